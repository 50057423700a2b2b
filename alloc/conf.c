/* conf.c -- NALLOC_CONF: `key:value,key:value`, parsed once at start-up
 * (conf_boot), by conf_parse, which the fuzz target calls on any string.
 *
 * Parsing works on the string in place and never allocates, since it runs
 * before the first allocation is served. A bad entry gets one line on
 * stderr naming the key, the value (escaped) and what is accepted, at most
 * CONF_MSG_MAX lines in all; the default stays (or the process aborts with
 * abort_conf:true, checked after the whole string so the flag works
 * wherever it appears). */
#include "conf.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "background.h"
#include "heap.h"
#include "log.h"
#include "node.h"
#include "page_heap.h"
#include "stats.h"
#include "../prof/prof_hook.h"

bool opt_abort_conf = false;

/* conf's own option. */
static const conf_entry_t conf_rows[] = {
    {"abort_conf", CONF_BOOL, &opt_abort_conf, 0, 0, NULL, 0,
     "abort on a bad NALLOC_CONF entry"},
};
static const conf_table_t conf_own_table = {conf_rows, ARRAY_LEN(conf_rows)};

/* Every module's options, in the order the "known keys" message lists
 * them. A module with options of its own for the first time adds its
 * table here. */
static const conf_table_t *const conf_tables[] = {
    &node_conf_table,       &heap_conf_table,      &page_heap_conf_table,
    &background_conf_table, &conf_own_table,       &stats_conf_table,
    &prof_conf_table,       &prof_http_conf_table, &prof_peak_conf_table,
};

const conf_entry_t *conf_row(size_t i) {
  for (size_t t = 0; t < ARRAY_LEN(conf_tables); t++) {
    if (i < conf_tables[t]->n) return &conf_tables[t]->rows[i];
    i -= conf_tables[t]->n;
  }
  return NULL;
}

const conf_entry_t *conf_find(const char *name, size_t len) {
  for (size_t t = 0; t < ARRAY_LEN(conf_tables); t++)
    for (size_t i = 0; i < conf_tables[t]->n; i++) {
      const conf_entry_t *e = &conf_tables[t]->rows[i];
      if (strlen(e->name) == len && memcmp(e->name, name, len) == 0) return e;
    }
  return NULL;
}

static bool conf_eq(const char *v, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(v, lit, n) == 0;
}

/* Parses a decimal (optionally signed) integer with an optional k/m/g
 * suffix when `suffix` is set. */
static bool conf_int(const char *v, size_t n, bool suffix, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (i < n && (v[i] == '-' || v[i] == '+')) neg = v[i++] == '-';
  if (i == n) return false;
  uint64_t x = 0;
  size_t first = i;
  for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
    if (x > (uint64_t)INT64_MAX / 10) return false;
    x = x * 10 + (uint64_t)(v[i] - '0');
  }
  if (i == first) return false; /* no digits: "k" alone is not 0 */
  if (i < n && suffix && i + 1 == n) {
    unsigned sh = v[i] == 'k' || v[i] == 'K' ? 10 : v[i] == 'm' || v[i] == 'M' ? 20
                : v[i] == 'g' || v[i] == 'G' ? 30 : 0;
    if (sh == 0 || x > ((uint64_t)INT64_MAX >> sh)) return false;
    x <<= sh;
    i++;
  }
  if (i != n || x > (uint64_t)INT64_MAX) return false;
  *out = neg ? -(int64_t)x : (int64_t)x;
  return true;
}

/* Names in the rows themselves, not pointers: a table of pointers lives in
 * .data.rel.ro, which the loader writes (relocates) in every process, and
 * these 22 rows (352 bytes) took the library's RELRO from two pages to
 * three, one page fault more per start (bench/results/startup.md). */
static const struct {
  char name[7];
  unsigned char sig;
} conf_signals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
                    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},
                    {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CHLD", SIGCHLD},
                    {"CONT", SIGCONT}, {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},
                    {"TTOU", SIGTTOU}, {"URG", SIGURG},   {"XCPU", SIGXCPU},
                    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
                    {"WINCH", SIGWINCH}, {"POLL", SIGPOLL}, {"PWR", SIGPWR},
                    {"SYS", SIGSYS}};

/* Signals a dump trigger must not take: the synchronous faults (their
 * handler returning re-runs the faulting instruction: an endless loop of
 * dumps), abort's, and the two that cannot be caught. */
static bool conf_signal_usable(int64_t s) {
  switch (s) {
  case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP:
  case SIGABRT: case SIGKILL: case SIGSTOP: case SIGSYS:
    return false;
  }
  return s >= 0 && s < NSIG;
}

static bool conf_signal(const char *v, size_t n, int64_t *out) {
  if (conf_int(v, n, false, out)) return conf_signal_usable(*out);
  if (n > 3 && memcmp(v, "SIG", 3) == 0) v += 3, n -= 3;
  for (size_t i = 0; i < sizeof conf_signals / sizeof *conf_signals; i++)
    if (conf_eq(v, n, conf_signals[i].name)) {
      *out = conf_signals[i].sig;
      return conf_signal_usable(*out);
    }
  return false;
}

static void conf_expected(const conf_entry_t *e, char *buf, size_t cap) {
  switch (e->type) {
  case CONF_BOOL: snprintf(buf, cap, "true or false"); break;
  case CONF_UNSIGNED: case CONF_SIZE: case CONF_SSIZE:
    snprintf(buf, cap, "an integer in [%lld, %lld]%s", (long long)e->min,
             (long long)e->max, e->type == CONF_SIZE ? " (k, m, g suffixes allowed)" : "");
    break;
  case CONF_STR: snprintf(buf, cap, "text of at most %zu bytes without ','", e->strcap - 1); break;
  case CONF_SIGNAL:
    snprintf(buf, cap, "a signal name (USR2, SIGUSR2) or number, 0 for none; "
                       "not SEGV, BUS, ILL, FPE, TRAP, ABRT, KILL, STOP or SYS");
    break;
  case CONF_ENUM: {
    size_t o = 0;
    for (unsigned i = 0; e->choices[i] && o + 2 < cap; i++)
      o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " or " : "one of ", e->choices[i]);
    break;
  }
  }
}

/* Applies one value; false if it is not acceptable. */
static bool conf_apply(const conf_entry_t *e, const char *v, size_t n) {
  int64_t x;
  switch (e->type) {
  case CONF_BOOL:
    if (conf_eq(v, n, "true")) *(bool *)e->ptr = true;
    else if (conf_eq(v, n, "false")) *(bool *)e->ptr = false;
    else return false;
    return true;
  case CONF_UNSIGNED:
  case CONF_SIZE:
  case CONF_SSIZE:
    if (!conf_int(v, n, e->type == CONF_SIZE, &x) || x < e->min || x > e->max) return false;
    if (e->type == CONF_UNSIGNED) *(unsigned *)e->ptr = (unsigned)x;
    else if (e->type == CONF_SIZE) *(size_t *)e->ptr = (size_t)x;
    else *(ssize_t *)e->ptr = (ssize_t)x;
    return true;
  case CONF_STR:
    if (n + 1 > e->strcap) return false;
    memcpy(e->ptr, v, n);
    ((char *)e->ptr)[n] = '\0';
    return true;
  case CONF_ENUM:
    for (unsigned i = 0; e->choices[i]; i++)
      if (conf_eq(v, n, e->choices[i])) {
        *(unsigned *)e->ptr = i;
        return true;
      }
    return false;
  case CONF_SIGNAL:
    if (!conf_signal(v, n, &x)) return false;
    *(int *)e->ptr = (int)x;
    return true;
  }
  return false;
}

static void conf_known_keys(char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = '\0';
  const conf_entry_t *e;
  for (size_t i = 0; (e = conf_row(i)) != NULL && o + 2 < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? " " : "", e->name);
}

/* At most this many lines about one NALLOC_CONF, then one line with the
 * count of the rest: a string of 100,000 commas must not flood the
 * terminal (or a log collector) with as many lines. */
#define CONF_MSG_MAX 16

/* Whether the next problem gets its line (counts it either way). */
static bool conf_show(unsigned *nbad) { return ++*nbad <= CONF_MSG_MAX; }

/* Keys and values are printed escaped (nalloc_log_escape), cut to this
 * many bytes: the environment is text from anyone, and a terminal
 * executes the escape sequences in it. */
#define CONF_ECHO_MAX 192

bool conf_parse(const char *conf) {
  const char *s = conf;
  unsigned nbad = 0;
  char ek[CONF_ECHO_MAX], ev[CONF_ECHO_MAX];
  bool any_entry = false;
  /* Entries are the pieces between commas, an empty one after a trailing
   * ',' included. A comma is stray when it does not separate two entries:
   * with k entries, n commas leave n - (k - 1) stray, one per empty piece
   * except that a string of commas alone has one empty piece more than
   * commas. So each empty piece gets a line, but the one after a trailing
   * ',' only if an entry came before (",": one line, not two). */
  while (*s) {
    const char *item = s, *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    s = comma ? comma + 1 : s + len;
    if (len == 0) {
      if (conf_show(&nbad)) nalloc_log("NALLOC_CONF: empty entry (stray ',') ignored");
      continue;
    }
    any_entry = true;
    const char *colon = memchr(item, ':', len);
    if (colon == NULL) {
      if (conf_show(&nbad))
        nalloc_log("NALLOC_CONF: entry \"%s\" has no ':value' (expected key:value); ignored",
                   nalloc_log_escape(ek, sizeof ek, item, len));
      continue;
    }
    size_t klen = (size_t)(colon - item), vlen = len - klen - 1;
    const char *v = colon + 1;
    const conf_entry_t *e = conf_find(item, klen);
    if (e == NULL) {
      if (conf_show(&nbad)) {
        char keys[768];
        conf_known_keys(keys, sizeof keys);
        nalloc_log("NALLOC_CONF: unknown key \"%s\" ignored; known keys: %s",
                   nalloc_log_escape(ek, sizeof ek, item, klen), keys);
      }
      continue;
    }
    if (!conf_apply(e, v, vlen) && conf_show(&nbad)) {
      char exp[256];
      conf_expected(e, exp, sizeof exp);
      nalloc_log("NALLOC_CONF: bad value \"%s\" for \"%s\": expected %s; keeping the default",
                 nalloc_log_escape(ev, sizeof ev, v, vlen), e->name, exp);
    }
  }
  size_t total = strlen(conf);
  if (any_entry && total > 0 && conf[total - 1] == ',' && conf_show(&nbad))
    nalloc_log("NALLOC_CONF: empty entry (stray ',') ignored");
  if (nbad > CONF_MSG_MAX)
    nalloc_log("NALLOC_CONF: ... %u more problems not shown", nbad - CONF_MSG_MAX);
  return nbad == 0;
}

/* getenv("NALLOC_CONF") without getenv: the constructor runs in every
 * process, and its first call of a libc function costs a lazy binding
 * (_dl_runtime_resolve, ~750 instructions by callgrind) on top of the
 * call; `environ` is bound once the library is loaded. The name is
 * compared byte by byte against immediates, not a string: a process that
 * never allocates then touches no page of the library's read-only data
 * (one page fault less for /bin/true). */
extern char **environ;

static bool conf_is_ours(const char *e) {
  return e[0] == 'N' && e[1] == 'A' && e[2] == 'L' && e[3] == 'L' && e[4] == 'O' &&
         e[5] == 'C' && e[6] == '_' && e[7] == 'C' && e[8] == 'O' && e[9] == 'N' &&
         e[10] == 'F' && e[11] == '=';
}

static const char *conf_getenv(void) {
  for (char **env = environ; env != NULL && *env != NULL; env++)
    if (conf_is_ours(*env)) return *env + 12;
  return NULL;
}

void conf_boot(void) {
  if (getauxval(AT_SECURE)) return; /* setuid/setgid: the environment is not trusted */
  const char *conf = conf_getenv();
  if (conf == NULL) return;
  if (!conf_parse(conf) && opt_abort_conf)
    nalloc_fatal("NALLOC_CONF is invalid and abort_conf is true");
}
