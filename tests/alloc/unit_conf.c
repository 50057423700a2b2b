/* unit_conf.c -- the NALLOC_CONF parser (alloc/conf.c: conf_parse) on
 * strings, against a table written here from the README's description of
 * each option: for each string, what every option (alloc and prof, 28 in
 * all) must hold afterwards -- the documented defaults except what the
 * string sets -- whether conf_parse reports a problem, how many message
 * lines it writes (captured through nalloc_log_to), and a piece of text the
 * first line must carry. Covers valid values, k/m/g suffixes (tcache_max),
 * bounds on each side, signal names and numbers, enums, string lengths,
 * bad values keeping the value before, unknown keys, stray commas, the
 * 16-line cap, and abort_conf:true not aborting from conf_parse (only
 * conf_boot does). Linked with the engine's objects; NALLOC_CONF is empty
 * in the test's environment, so nalloc's boot leaves the defaults. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "background.h"
#include "conf.h"
#include "heap.h"
#include "log.h"
#include "nalloc.h"
#include "node.h"
#include "page_heap.h"
#include "stats.h"
#include "../prof/prof_http.h"
#include "../prof/prof_internal.h"

#include "../check_core.h"

/* Every option as the test sees it: numbers widened to long long,
 * strings as text. */
typedef struct {
  const char *name;
  char type; /* 'b' bool, 'u' unsigned, 'z' size_t, 's' ssize_t, 'i' int, 't' text */
  void *ptr;
  long long def;      /* the documented default (numbers) */
  const char *defstr; /* the documented default (text) */
} opt_t;

static const opt_t opts[] = {
    {"narenas", 'u', &opt_narenas, 0, NULL},
    {"narenas_per_node", 'u', &opt_narenas_per_node, 0, NULL},
    {"numa", 'b', &opt_numa, 1, NULL},
    {"numa_nodes", 'u', &opt_numa_nodes, 0, NULL},
    {"tcache", 'b', &opt_tcache, 1, NULL},
    {"tcache_max", 'z', &opt_tcache_max, 65536, NULL},
    {"dirty_decay_ms", 's', &opt_dirty_decay_ms, 10000, NULL},
    {"background_thread", 'b', &opt_background_thread, 0, NULL},
    {"abort_conf", 'b', &opt_abort_conf, 0, NULL},
    {"stats_print", 'b', &opt_stats_print, 0, NULL},
    {"prof", 'b', &opt_prof, 0, NULL},
    {"prof_active", 'b', &opt_prof_active, 1, NULL},
    {"prof_thread_active_init", 'b', &opt_prof_thread_active_init, 1, NULL},
    {"lg_prof_sample", 'u', &opt_lg_prof_sample, 19, NULL},
    {"lg_prof_interval", 's', &opt_lg_prof_interval, -1, NULL},
    {"prof_gdump", 'b', &opt_prof_gdump, 0, NULL},
    {"prof_final", 'b', &opt_prof_final, 0, NULL},
    {"prof_leak", 'b', &opt_prof_leak, 0, NULL},
    {"prof_prefix", 't', opt_prof_prefix, 0, "nalloc"},
    {"prof_unwind", 'u', &opt_prof_unwind, 0, NULL}, /* dwarf libunwind fp */
    {"prof_depth", 'u', &opt_prof_depth, 128, NULL},
    {"prof_format", 'u', &opt_prof_format, 0, NULL}, /* gperftools jemalloc */
    {"prof_signal", 'i', &opt_prof_signal, 0, NULL},
    {"prof_http", 't', opt_prof_http, 0, ""},
    {"prof_http_any", 'b', &opt_prof_http_any, 0, NULL},
    {"prof_http_fork", 'b', &opt_prof_http_fork, 0, NULL},
    {"prof_peak", 'b', &opt_prof_peak, 0, NULL},
    {"prof_peak_final", 'b', &opt_prof_peak_final, 0, NULL},
};
enum { NOPTS = sizeof opts / sizeof *opts };

static long long get_num(const opt_t *o) {
  switch (o->type) {
  case 'b': return *(bool *)o->ptr;
  case 'u': return *(unsigned *)o->ptr;
  case 'z': return (long long)*(size_t *)o->ptr;
  case 's': return *(ssize_t *)o->ptr;
  case 'i': return *(int *)o->ptr;
  }
  return 0;
}

static void set_defaults(void) {
  for (size_t i = 0; i < NOPTS; i++) {
    const opt_t *o = &opts[i];
    switch (o->type) {
    case 'b': *(bool *)o->ptr = o->def; break;
    case 'u': *(unsigned *)o->ptr = (unsigned)o->def; break;
    case 'z': *(size_t *)o->ptr = (size_t)o->def; break;
    case 's': *(ssize_t *)o->ptr = (ssize_t)o->def; break;
    case 'i': *(int *)o->ptr = (int)o->def; break;
    case 't': strcpy(o->ptr, o->defstr); break;
    }
  }
}

/* The value `want` gives option i ("name=value ..."), or NULL for its
 * default. */
static const char *wanted(const char *want, const char *name, char *buf, size_t cap) {
  size_t n = strlen(name);
  for (const char *w = want; w && *w;) {
    const char *sp = strchr(w, ' ');
    size_t len = sp ? (size_t)(sp - w) : strlen(w);
    if (len > n && w[n] == '=' && memcmp(w, name, n) == 0) {
      CHECKF(len - n - 1 < cap, "expectation too long");
      memcpy(buf, w + n + 1, len - n - 1);
      buf[len - n - 1] = '\0';
      return buf;
    }
    w = sp ? sp + 1 : w + len;
  }
  return NULL;
}

static int logfd;

/* The message lines written since the last call, and the first of them. */
static unsigned take_lines(char *first, size_t cap) {
  static char buf[1 << 16];
  off_t end = lseek(logfd, 0, SEEK_CUR);
  CHECKF(end >= 0 && (size_t)end < sizeof buf, "log too long");
  CHECKF(pread(logfd, buf, (size_t)end, 0) == end, "pread");
  buf[end] = '\0';
  unsigned n = 0;
  for (char *p = buf; *p; p++) n += *p == '\n';
  first[0] = '\0';
  char *nl = strchr(buf, '\n');
  if (nl) {
    size_t l = (size_t)(nl - buf) < cap - 1 ? (size_t)(nl - buf) : cap - 1;
    memcpy(first, buf, l);
    first[l] = '\0';
  }
  for (char *p = buf; (p = strchr(p, '\n')) != NULL && *++p;)
    CHECKF(strncmp(p, "<nalloc>: NALLOC_CONF: ", 23) == 0, "a line without the prefix: %.80s", p);
  CHECKF(n == 0 || strncmp(buf, "<nalloc>: NALLOC_CONF: ", 23) == 0,
         "a line without the prefix: %.80s", buf);
  CHECKF(ftruncate(logfd, 0) == 0 && lseek(logfd, 0, SEEK_SET) == 0, "truncate");
  return n;
}

typedef struct {
  const char *conf;
  const char *want;  /* options that differ from the default afterwards */
  unsigned nlines;   /* message lines (0: conf_parse returns true) */
  const char *text;  /* in the first line, if not NULL */
} case_t;

#define LONG255 \
  "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp" \
  "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp" \
  "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp" \
  "ppppppppppppppppppppp"
#define LONG159 \
  "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh" \
  "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh" \
  "hhh"

static const case_t cases[] = {
    {"", NULL, 0, NULL},
    /* every option once, to a value that is not its default */
    {"narenas:3,narenas_per_node:2,numa:false,numa_nodes:4,tcache:false,tcache_max:4096,"
     "dirty_decay_ms:0,background_thread:true,abort_conf:false,stats_print:true",
     "narenas=3 narenas_per_node=2 numa=0 numa_nodes=4 tcache=0 tcache_max=4096 "
     "dirty_decay_ms=0 background_thread=1 stats_print=1", 0, NULL},
    {"prof:true,prof_active:false,prof_thread_active_init:false,lg_prof_sample:0,"
     "lg_prof_interval:30,prof_gdump:true,prof_final:true,prof_leak:true,prof_prefix:/tmp/x.y,"
     "prof_unwind:fp,prof_depth:1,prof_format:jemalloc,prof_signal:USR2,"
     "prof_http:127.0.0.1:0,prof_http_any:true,prof_http_fork:true,prof_peak:true,"
     "prof_peak_final:true",
     "prof=1 prof_active=0 prof_thread_active_init=0 lg_prof_sample=0 lg_prof_interval=30 "
     "prof_gdump=1 prof_final=1 prof_leak=1 prof_prefix=/tmp/x.y prof_unwind=2 prof_depth=1 "
     "prof_format=1 prof_signal=12 prof_http=127.0.0.1:0 prof_http_any=1 prof_http_fork=1 "
     "prof_peak=1 prof_peak_final=1", 0, NULL},
    {"prof_unwind:libunwind", "prof_unwind=1", 0, NULL},
    {"prof_unwind:dwarf,prof_format:gperftools", NULL, 0, NULL},
    /* suffixes (tcache_max only) and bounds */
    {"tcache_max:1k", "tcache_max=1024", 0, NULL},
    {"tcache_max:2K", "tcache_max=2048", 0, NULL},
    {"tcache_max:64k", "tcache_max=65536", 0, NULL},
    {"tcache_max:0", "tcache_max=0", 0, NULL},
    {"tcache_max:65537", NULL, 1, "bad value \"65537\" for \"tcache_max\""},
    {"tcache_max:1m", NULL, 1, "bad value \"1m\" for \"tcache_max\""},
    {"tcache_max:1g", NULL, 1, "bad value"},
    {"tcache_max:1t", NULL, 1, "bad value"},
    {"tcache_max:1kk", NULL, 1, "bad value"},
    {"tcache_max:k", NULL, 1, "bad value \"k\" for \"tcache_max\""},
    {"tcache_max:-k", NULL, 1, "bad value"},
    {"tcache_max:-1", NULL, 1, "bad value"},
    {"tcache_max:", NULL, 1, "bad value \"\" for \"tcache_max\""},
    {"narenas:1k", NULL, 1, "bad value \"1k\" for \"narenas\""}, /* no suffix on counts */
    {"narenas:1024", "narenas=1024", 0, NULL},
    {"narenas:1025", NULL, 1, "expected an integer in [0, 1024]"},
    {"narenas:-1", NULL, 1, "bad value"},
    {"narenas:+7", "narenas=7", 0, NULL},
    {"narenas:-0", "narenas=0", 0, NULL},
    {"narenas:99999999999999999999", NULL, 1, "bad value"},
    {"narenas:3x", NULL, 1, "bad value"},
    {"narenas: 3", NULL, 1, "bad value"},
    {"narenas:+", NULL, 1, "bad value"},
    {"narenas_per_node:256", "narenas_per_node=256", 0, NULL},
    {"narenas_per_node:257", NULL, 1, "bad value"},
    {"numa_nodes:64", "numa_nodes=64", 0, NULL},
    {"numa_nodes:65", NULL, 1, "bad value"},
    {"dirty_decay_ms:-1", "dirty_decay_ms=-1", 0, NULL},
    {"dirty_decay_ms:-2", NULL, 1, "bad value"},
    {"dirty_decay_ms:1099511627776", "dirty_decay_ms=1099511627776", 0, NULL},
    {"dirty_decay_ms:1099511627777", NULL, 1, "bad value"},
    {"dirty_decay_ms:1k", NULL, 1, "bad value"},
    {"lg_prof_sample:62", "lg_prof_sample=62", 0, NULL},
    {"lg_prof_sample:63", NULL, 1, "bad value"},
    {"lg_prof_interval:-1,lg_prof_interval:62", "lg_prof_interval=62", 0, NULL},
    {"lg_prof_interval:-2", NULL, 1, "bad value"},
    {"prof_depth:0", NULL, 1, "expected an integer in [1, 256]"},
    {"prof_depth:256", "prof_depth=256", 0, NULL},
    {"prof_depth:257", NULL, 1, "bad value"},
    /* booleans and enums: the exact words only */
    {"tcache:TRUE", NULL, 1, "expected true or false"},
    {"tcache:1", NULL, 1, "bad value"},
    {"tcache:", NULL, 1, "bad value"},
    {"prof_unwind:FP", NULL, 1, "one of dwarf or libunwind or fp"},
    {"prof_format:pprof", NULL, 1, "bad value"},
    /* signals */
    {"prof_signal:SIGUSR1", "prof_signal=10", 0, NULL},
    {"prof_signal:12", "prof_signal=12", 0, NULL},
    {"prof_signal:0", NULL, 0, NULL},
    {"prof_signal:HUP", "prof_signal=1", 0, NULL},
    {"prof_signal:64", "prof_signal=64", 0, NULL},
    {"prof_signal:65", NULL, 1, "bad value"},
    {"prof_signal:SEGV", NULL, 1, "bad value"},
    {"prof_signal:11", NULL, 1, "bad value"},
    {"prof_signal:SIGKILL", NULL, 1, "bad value"},
    {"prof_signal:-1", NULL, 1, "bad value"},
    {"prof_signal:SIG", NULL, 1, "bad value"},
    {"prof_signal:usr2", NULL, 1, "bad value"},
    /* text: up to the buffer less its NUL; empty allowed */
    {"prof_prefix:", "prof_prefix=", 0, NULL},
    {"prof_prefix:" LONG255, "prof_prefix=" LONG255, 0, NULL},
    {"prof_prefix:" LONG255 "p", NULL, 1, "at most 255 bytes"},
    {"prof_http:" LONG159, "prof_http=" LONG159, 0, NULL},
    {"prof_http:" LONG159 "h", NULL, 1, "bad value"},
    {"prof_prefix:a:b", "prof_prefix=a:b", 0, NULL}, /* the value is all after the first ':' */
    /* a bad value keeps what was there; the last good value wins */
    {"narenas:2,narenas:x", "narenas=2", 1, "bad value \"x\" for \"narenas\""},
    {"narenas:2,narenas:5", "narenas=5", 0, NULL},
    /* keys */
    {"nosuch:1", NULL, 1, "unknown key \"nosuch\" ignored; known keys: narenas"},
    {"narenas :2", NULL, 1, "unknown key"},
    {"Narenas:2", NULL, 1, "unknown key"},
    {"narenas", NULL, 1, "entry \"narenas\" has no ':value'"},
    {":3", NULL, 1, "unknown key \"\""},
    {"narenas:3,bogus,tcache:false", "narenas=3 tcache=0", 1, "has no ':value'"},
    /* stray commas: one line per empty entry */
    {",", NULL, 1, "empty entry"},
    {",,", NULL, 2, "empty entry"},
    {"narenas:1,", "narenas=1", 1, "empty entry"},
    {",narenas:1", "narenas=1", 1, "empty entry"},
    {"narenas:1,,tcache:false", "narenas=1 tcache=0", 1, "empty entry"},
    {"x,", NULL, 2, "has no ':value'"},
    /* escaping: a control character is not echoed as is */
    {"narenas:\x1b[31m", NULL, 1, "bad value \"\\x1b[31m\""},
    /* abort_conf is only read by conf_boot: the parser reports, no abort */
    {"abort_conf:true,narenas:zz", "abort_conf=1", 1, "bad value"},
    {"narenas:zz,abort_conf:true", "abort_conf=1", 1, "bad value"},
};

static void check_case(const case_t *c) {
  set_defaults();
  bool ok = conf_parse(c->conf);
  char first[1024];
  unsigned n = take_lines(first, sizeof first);
  CHECKF(ok == (c->nlines == 0), "\"%s\": conf_parse returned %d", c->conf, ok);
  CHECKF(n == c->nlines, "\"%s\": %u message lines, want %u (first: %s)", c->conf, n,
         c->nlines, first);
  if (c->text)
    CHECKF(strstr(first, c->text) != NULL, "\"%s\": the message \"%s\" lacks \"%s\"", c->conf,
           first, c->text);
  for (size_t i = 0; i < NOPTS; i++) {
    const opt_t *o = &opts[i];
    char buf[300];
    const char *w = wanted(c->want, o->name, buf, sizeof buf);
    if (o->type == 't') {
      const char *want = w ? w : o->defstr;
      CHECKF(strcmp(o->ptr, want) == 0, "\"%.60s\": %s is \"%.40s\", want \"%.40s\"", c->conf,
             o->name, (const char *)o->ptr, want);
    } else {
      long long want = w ? strtoll(w, NULL, 10) : o->def;
      CHECKF(get_num(o) == want, "\"%.60s\": %s is %lld, want %lld", c->conf, o->name,
             get_num(o), want);
    }
  }
}

int main(void) {
  nalloc_free(nalloc_malloc(1)); /* boot (NALLOC_CONF is empty) */
  /* the documented defaults are what the engine starts with */
  for (size_t i = 0; i < NOPTS; i++) {
    const opt_t *o = &opts[i];
    if (o->type == 't')
      CHECKF(strcmp(o->ptr, o->defstr) == 0, "default of %s is \"%s\"", o->name,
             (const char *)o->ptr);
    else
      CHECKF(get_num(o) == o->def, "default of %s is %lld, documented %lld", o->name,
             get_num(o), o->def);
  }
  /* every row of the parser's tables is one the test knows */
  size_t rows = 0;
  for (const conf_entry_t *e; (e = conf_row(rows)) != NULL; rows++) {
    size_t i = 0;
    while (i < NOPTS && strcmp(opts[i].name, e->name) != 0) i++;
    CHECKF(i < NOPTS && opts[i].ptr == e->ptr, "option %s is not in the test's table", e->name);
  }
  CHECKF(rows == NOPTS, "the parser has %zu options, the test %d", rows, (int)NOPTS);

  logfd = memfd_create("conf_log", 0);
  CHECKF(logfd >= 0, "memfd_create");
  int saved = nalloc_log_fd();
  nalloc_log_to(logfd);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);

  /* the cap: 20 problems give 16 lines and one counting the other 4 */
  char many[400] = "";
  for (int i = 0; i < 20; i++) strcat(many, "narenas:bad,");
  strcat(many, "narenas:9");
  set_defaults();
  CHECKF(!conf_parse(many), "20 bad entries: conf_parse returned true");
  char first[1024];
  unsigned n = take_lines(first, sizeof first);
  CHECKF(n == 17, "20 bad entries: %u lines, want 16 and one counting the rest", n);
  CHECKF(opt_narenas == 9, "20 bad entries then narenas:9: narenas %u", opt_narenas);
  /* the last line counts the rest */
  set_defaults();
  conf_parse(many);
  {
    static char buf[1 << 14];
    ssize_t got = pread(logfd, buf, sizeof buf - 1, 0);
    CHECKF(got > 0, "pread");
    buf[got] = '\0';
    CHECKF(strstr(buf, "... 4 more problems not shown\n") != NULL, "no count of the rest in:\n%s",
           buf);
    take_lines(first, sizeof first);
  }
  nalloc_log_to(saved);
  set_defaults();
  printf("ok: %zu strings, %d options each\n", sizeof cases / sizeof *cases, (int)NOPTS);
  return 0;
}
