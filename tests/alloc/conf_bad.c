/* conf_bad: bad NALLOC_CONF values give exactly one line on stderr naming
 * the key and the bad value, the program keeps running with the default;
 * with abort_conf:true it aborts. Runs the helper conf_child (built next to
 * this program) with each configuration and reads its opt.* values back.
 *
 *   conf_bad           the message / default / abort cases
 *   conf_bad secure    NALLOC_CONF is ignored in a setuid program
 *                      (AT_SECURE); exits 77 (skipped) when it cannot make
 *                      one (not root, nosuid file system, ...) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

extern char **environ;

static char child_path[PATH_MAX];

typedef struct {
  int status;
  char out[16384];
  char err[16384];
} result_t;

static void read_all(int fd, char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
    if (n == cap - 1) break;
  }
  buf[n] = 0;
  close(fd);
}

/* Runs `path` with NALLOC_CONF=conf (unset when conf is NULL). With
 * `as_user` >= 0, the child drops to that uid/gid before exec. */
static void run(const char *path, const char *conf, int as_user,
                result_t *res) {
  int po[2], pe[2];
  CHECK(pipe(po) == 0 && pipe(pe) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(pe[0]);
    close(po[1]);
    close(pe[1]);
    unsetenv("NALLOC_CONF");
    if (conf) setenv("NALLOC_CONF", conf, 1);
    if (as_user >= 0) {
      if (setgid((gid_t)as_user) != 0 || setuid((uid_t)as_user) != 0)
        _exit(77);
    }
    char *argv[] = {(char *)path, NULL};
    execve(path, argv, environ);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  /* outputs are small: stdout first, then stderr, cannot fill a pipe */
  read_all(po[0], res->out, sizeof res->out);
  read_all(pe[0], res->err, sizeof res->err);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  res->status = st;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++)
    if (*s == '\n') n++;
  return n;
}

/* value of key in the child's key=value output, or "" */
static const char *val(const result_t *r, const char *key, char *buf,
                       size_t cap) {
  size_t kl = strlen(key);
  const char *s = r->out;
  buf[0] = 0;
  while (*s) {
    const char *e = strchr(s, '\n');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (len > kl && strncmp(s, key, kl) == 0 && s[kl] == '=') {
      size_t vl = len - kl - 1;
      if (vl >= cap) vl = cap - 1;
      memcpy(buf, s + kl + 1, vl);
      buf[vl] = 0;
      return buf;
    }
    s += len + (e ? 1 : 0);
  }
  return buf;
}

static const char *const OPTS[] = {"narenas",    "tcache",
                                   "tcache_max", "dirty_decay_ms",
                                   "abort_conf", "numa",
                                   "narenas_per_node", "numa_nodes"};
#define NOPTS (sizeof OPTS / sizeof OPTS[0])

static result_t base;

typedef struct {
  const char *conf;
  int lines;               /* expected stderr lines */
  const char *has[4];      /* substrings of stderr */
  const char *set[4][2];   /* opt values the conf sets (key, value) */
} case_t;

static const case_t cases[] = {
    {"nosuchkey:1", 1, {"nosuchkey"}, {{0}}},
    {"tcache:maybe", 1, {"tcache", "maybe", "true", "false"}, {{0}}},
    {"abort_conf:yes", 1, {"abort_conf", "yes", "true", "false"}, {{0}}},
    {"numa:2", 1, {"numa", "2", "true", "false"}, {{0}}},
    {"narenas:abc", 1, {"narenas", "abc"}, {{0}}},
    {"narenas:99999999999", 1, {"narenas", "99999999999"}, {{0}}},
    {"narenas:-3", 1, {"narenas", "-3"}, {{0}}},
    {"tcache_max:-1", 1, {"tcache_max", "-1"}, {{0}}},
    {"tcache_max:12q", 1, {"tcache_max", "12q"}, {{0}}},
    {"dirty_decay_ms:12x", 1, {"dirty_decay_ms", "12x"}, {{0}}},
    {"dirty_decay_ms:99999999999999999999999", 1, {"dirty_decay_ms"}, {{0}}},
    {"numa_nodes:1000000", 1, {"numa_nodes", "1000000"}, {{0}}},
    {"narenas_per_node:abc", 1, {"narenas_per_node", "abc"}, {{0}}},
    {"narenas", 1, {"narenas"}, {{0}}},   /* missing colon */
    {"narenas:", 1, {"narenas"}, {{0}}},  /* empty value */
    {":5", 1, {"nalloc"}, {{0}}},         /* empty key */
    {"tcache:false,", 1, {"nalloc"}, {{0}}}, /* trailing comma */
    /* one line per stray comma: "," printed two before (issue 10, defect 8) */
    {",", 1, {"stray ','"}, {{0}}},
    {",,,", 3, {"stray ','"}, {{0}}},
    {",narenas:3,", 2, {"stray ','"}, {{"narenas", "3"}}},
    {"narenas:3,,", 2, {"stray ','"}, {{"narenas", "3"}}},
    {"narenas:3,,tcache:false", 1, {"stray ','"}, {{"narenas", "3"}, {"tcache", "false"}}},
    /* what is echoed is escaped: raw before (a terminal ran the escape
     * sequences); check_case also refuses any control byte on stderr */
    {"nosuchkey\x1b[31m:1", 1, {"nosuchkey\\x1b[31m"}, {{0}}},
    {"tcache:\x1b]0;owned\x07", 1, {"\"\\x1b]0;owned\\x07\""}, {{0}}},
    {"narenas:\xff\xfe\xc0\xaf", 1, {"\\xff\\xfe\\xc0\\xaf"}, {{0}}},
    {"narenas:\xc2\x9b""2J", 1, {"\\xc2\\x9b2J"}, {{0}}}, /* C1 CSI */
    {"narenas:\xc3\xa9t\xc3\xa9", 1, {"\"\xc3\xa9t\xc3\xa9\""}, {{0}}}, /* UTF-8 stays */
    {"narenas:a\\b\"c\rd\te", 1, {"a\\\\b\\\"c\\x0dd\\x09e"}, {{0}}},
    {"bad\nline:1", 1, {"bad\\x0aline"}, {{0}}},
    {"narenas:3,bogus:1,tcache:false", 1, {"bogus"},
     {{"narenas", "3"}, {"tcache", "false"}}},
    {"narenas:abc,tcache:maybe", 2, {"narenas", "abc", "tcache", "maybe"},
     {{0}}},
    /* controls: valid configurations print nothing */
    {"", 0, {0}, {{0}}},
    {"narenas:2,tcache:false,tcache_max:8192,dirty_decay_ms:500", 0, {0},
     {{"narenas", "2"}, {"tcache", "false"}, {"tcache_max", "8192"},
      {"dirty_decay_ms", "500"}}},
    {"tcache_max:16k,abort_conf:true", 0, {0},
     {{"tcache_max", "16384"}, {"abort_conf", "true"}}},
};

static void check_case(const case_t *c) {
  result_t r;
  run(child_path, c->conf, -1, &r);
  CHECKF(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
         "NALLOC_CONF=\"%s\": the program did not run to the end (%s %d); "
         "stderr:\n%s", c->conf, WIFEXITED(r.status) ? "exit" : "signal",
         WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status),
         r.err);
  for (const unsigned char *b = (const unsigned char *)r.err; *b; b++)
    CHECKF(*b == '\n' || (*b >= 0x20 && *b != 0x7f),
           "NALLOC_CONF=\"%s\": raw byte 0x%02x on stderr", c->conf, *b);
  int nl = count_lines(r.err);
  CHECKF(nl == c->lines && (c->lines > 0 || r.err[0] == 0),
         "NALLOC_CONF=\"%s\": %d line(s) on stderr, want %d:\n%s", c->conf, nl,
         c->lines, r.err);
  if (c->lines > 0)
    CHECKF(strstr(r.err, "nalloc") != NULL,
           "NALLOC_CONF=\"%s\": message does not say it is nalloc's: %s",
           c->conf, r.err);
  for (int i = 0; i < 4 && c->has[i]; i++)
    CHECKF(strstr(r.err, c->has[i]) != NULL,
           "NALLOC_CONF=\"%s\": message does not mention \"%s\": %s", c->conf,
           c->has[i], r.err);
  /* every opt not set by the conf keeps its default */
  for (size_t k = 0; k < NOPTS; k++) {
    const char *want = NULL;
    for (int j = 0; j < 4 && c->set[j][0]; j++)
      if (strcmp(c->set[j][0], OPTS[k]) == 0) want = c->set[j][1];
    char b1[64], b2[64];
    const char *got = val(&r, OPTS[k], b1, sizeof b1);
    const char *def = val(&base, OPTS[k], b2, sizeof b2);
    CHECKF(got[0] != 0, "opt.%s missing from the child's output:\n%s",
           OPTS[k], r.out);
    if (want)
      CHECKF(strcmp(got, want) == 0,
             "NALLOC_CONF=\"%s\": opt.%s = %s, want %s", c->conf, OPTS[k],
             got, want);
    else if (strncmp(c->conf, "tcache:false,", 13) != 0)
      CHECKF(strcmp(got, def) == 0,
             "NALLOC_CONF=\"%s\": opt.%s = %s, default is %s", c->conf,
             OPTS[k], got, def);
  }
  fprintf(stderr, "ok: NALLOC_CONF=\"%s\" -> %d line(s)%s%.*s", c->conf, nl,
          nl ? ": " : "\n", (int)strlen(r.err), r.err);
}

/* Many problems: 16 lines, then one line counting the rest (before: one
 * line per stray comma, 100,001 lines for 100,000 commas). */
static void check_many(const char *what, size_t n, const char *piece,
                       size_t problems) {
  size_t pl = strlen(piece);
  char *conf = malloc(n * pl + 1);
  CHECK(conf != NULL);
  for (size_t i = 0; i < n; i++) memcpy(conf + i * pl, piece, pl);
  conf[n * pl] = 0;
  result_t r;
  run(child_path, conf, -1, &r);
  free(conf);
  CHECKF(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
         "%s: status 0x%x; stderr:\n%.2000s", what, r.status, r.err);
  int nl = count_lines(r.err);
  CHECKF(nl == 17, "%s: %d lines on stderr, want 16 and one summary:\n%.2000s",
         what, nl, r.err);
  char last[128];
  snprintf(last, sizeof last, "NALLOC_CONF: ... %zu more problems not shown\n",
           problems - 16);
  size_t el = strlen(r.err), ll = strlen(last);
  CHECKF(el >= ll && strcmp(r.err + el - ll, last) == 0,
         "%s: the last line is not \"%s\":\n%s", what, last, r.err);
  fprintf(stderr, "ok: %s -> 17 lines, last: %s", what, last);
}

static void check_abort(const char *conf, const char *mention) {
  result_t r;
  run(child_path, conf, -1, &r);
  CHECKF(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT,
         "NALLOC_CONF=\"%s\": want SIGABRT, got %s %d; stderr:\n%s", conf,
         WIFEXITED(r.status) ? "exit" : "signal",
         WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status),
         r.err);
  CHECKF(strstr(r.err, mention) != NULL,
         "NALLOC_CONF=\"%s\": abort without naming \"%s\": %s", conf, mention,
         r.err);
  fprintf(stderr, "ok: NALLOC_CONF=\"%s\" -> SIGABRT\n", conf);
}

static int secure_test(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "conf_bad secure: not root: skipped\n");
    return 77;
  }
  char dir[] = "/tmp/nalloc_secure_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK(chmod(dir, 0755) == 0);
  char copy[PATH_MAX + 64];
  snprintf(copy, sizeof copy, "%s/conf_child_suid", dir);
  {
    int in = open(child_path, O_RDONLY);
    int out = open(copy, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    CHECK(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
      CHECK(write(out, buf, (size_t)n) == n);
    close(in);
    close(out);
  }
  CHECK(chown(copy, 0, 0) == 0);
  CHECK(chmod(copy, 04755) == 0);
  result_t plain, sec;
  run(copy, NULL, 65534, &plain);
  run(copy, "narenas:3,tcache:false,nosuchkey:1", 65534, &sec);
  unlink(copy);
  rmdir(dir);
  if (!WIFEXITED(plain.status) || WEXITSTATUS(plain.status) == 77 ||
      WEXITSTATUS(plain.status) == 127) {
    fprintf(stderr, "conf_bad secure: cannot run a setuid program as nobody "
            "(status 0x%x, stderr %s): skipped\n", plain.status, plain.err);
    return 77;
  }
  char b[64];
  if (strcmp(val(&plain, "secure", b, sizeof b), "1") != 0) {
    fprintf(stderr, "conf_bad secure: AT_SECURE not set (nosuid mount?): "
            "skipped\n");
    return 77;
  }
  CHECKF(WIFEXITED(sec.status) && WEXITSTATUS(sec.status) == 0,
         "setuid run failed: status 0x%x, stderr %s", sec.status, sec.err);
  CHECKF(sec.err[0] == 0,
         "setuid program printed on stderr: NALLOC_CONF was read: %s",
         sec.err);
  for (size_t k = 0; k < NOPTS; k++) {
    char b1[64], b2[64];
    const char *got = val(&sec, OPTS[k], b1, sizeof b1);
    const char *def = val(&plain, OPTS[k], b2, sizeof b2);
    CHECKF(strcmp(got, def) == 0,
           "setuid program: opt.%s = %s with NALLOC_CONF set, %s without: "
           "NALLOC_CONF must be ignored under AT_SECURE", OPTS[k], got, def);
  }
  printf("conf_bad secure: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(n > 0);
  self[n] = 0;
  char *slash = strrchr(self, '/');
  CHECK(slash != NULL);
  *slash = 0;
  snprintf(child_path, sizeof child_path, "%s/alloc_conf_child", self);
  CHECKF(access(child_path, X_OK) == 0, "helper %s missing", child_path);

  if (argc > 1 && strcmp(argv[1], "secure") == 0) return secure_test();

  run(child_path, NULL, -1, &base);
  CHECKF(WIFEXITED(base.status) && WEXITSTATUS(base.status) == 0,
         "conf_child without NALLOC_CONF failed: 0x%x\n%s", base.status,
         base.err);
  CHECKF(base.err[0] == 0, "conf_child without NALLOC_CONF printed: %s",
         base.err);
  CHECKF(strstr(base.out, "<error") == NULL,
         "an opt.* name is missing:\n%s", base.out);
  fprintf(stderr, "defaults:\n%s", base.out);

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_case(&cases[i]);
  check_many("100,000 commas", 100000, ",", 100000);
  check_many("20 unknown keys", 20, "bogus\x1b:1,", 21); /* and a trailing ',' */
  check_abort("abort_conf:true,nosuchkey:1", "nosuchkey");
  check_abort(",,,,,,,,,,,,,,,,,,,,,,,,,abort_conf:true", "abort_conf is true");
  check_abort("abort_conf:true,tcache:maybe", "maybe");
  check_abort("nosuchkey:1,abort_conf:true", "nosuchkey");
  printf("conf_bad: ok\n");
  return 0;
}
