/* prof_triggers.c -- every way a profile gets written, and the error
 * paths. The driver (no arguments) re-runs this program once per mode in a
 * child with its own NALLOC_CONF, captures its stderr and checks the files
 * it left in a scratch directory:
 *   auto      prof.dump(NULL) twice: <prefix>.<pid>.0.m0.heap, .1.m1
 *   interval  lg_prof_interval:20 (exact mode), 8 MiB allocated: 8 .i<n>
 *   gdump     prof_gdump:true, live heap grown to 6 MiB: .u<n> files, none
 *             more while it stays under its peak
 *   signal    prof_signal:USR2: .s0 appears after raise()
 *   final     prof_final:true: .f at exit
 *   leak      prof_leak:true: summary on stderr naming the leaking function,
 *             and the .f file
 *   badprefix automatic dumps into a missing directory: prof.dump(NULL)
 *             returns ENOENT, the exit dump prints one line, exit status 0
 *   ctlerr    bad paths and bad values give errno values, then a dump works;
 *             every bool name takes only 0 and 1 (EINVAL, value kept)
 *   files     dump files are mode 0600; a symlink at the given path is
 *             refused (ELOOP) and its target untouched; an automatic name
 *             that exists (file or symlink) is never written through
 *             (EEXIST), for prof.dump and for the exit dump
 *   sigoff    prof_signal set to a fault, abort, kill, stop or sys signal
 *             (by name and number): one line, prof_signal stays 0
 *   conf      out-of-range / unknown prof values: message, defaults kept
 *   off       prof:false: prof.* names answer ENOENT */
#include "prof_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static int count_files(const char *infix) {
  DIR *d = opendir(dir);
  CHECK(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, infix) && strstr(e->d_name, ".heap")) n++;
  closedir(d);
  return n;
}

static bool exists(const char *name) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat st;
  return stat(p, &st) == 0 && st.st_size > 0;
}

/* Runs `self mode dir` with NALLOC_CONF=conf; returns its exit status and
 * its stderr in err. Returns the child's pid through *pidp. */
static int run(const char *self, const char *mode, const char *conf,
               char *err, size_t errcap, pid_t *pidp) {
  char errpath[600];
  snprintf(errpath, sizeof errpath, "%s/%s.stderr", dir, mode);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(120);
    dup2(fd, 2);
    setenv("NALLOC_CONF", conf, 1);
    execl(self, self, mode, dir, (char *)NULL);
    _exit(121);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  FILE *f = fopen(errpath, "r");
  CHECK(f);
  size_t n = fread(err, 1, errcap - 1, f);
  err[n] = 0;
  fclose(f);
  if (pidp) *pidp = pid;
  if (!WIFEXITED(st)) {
    fprintf(stderr, "mode %s: killed by signal %d\n%s", mode, WTERMSIG(st), err);
    return 128 + WTERMSIG(st);
  }
  if (WEXITSTATUS(st) != 0) fprintf(stderr, "mode %s failed:\n%s", mode, err);
  return WEXITSTATUS(st);
}

NOINL void leaky(void) {
  for (int i = 0; i < 3; i++) {
    void *p = t_malloc(1000);
    memset(p, 1, 1000);
    __asm__ volatile("" ::"r"(p) : "memory");
  }
}

static void *keep[4096];

int child(const char *mode);
int child(const char *mode) {
  if (!strcmp(mode, "auto")) {
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, NULL, 0) == 0);
    const char *null = NULL;
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, &null, sizeof null) == 0);
  } else if (!strcmp(mode, "interval")) {
    uint64_t iv = 0;
    size_t sz = sizeof iv;
    CHECK(nalloc_ctl("prof.interval", &iv, &sz, NULL, 0) == 0);
    CHECK_EQ_U(iv, 1u << 20);
    for (int i = 0; i < 2048; i++) t_free(t_malloc(4096)); /* 8 MiB */
  } else if (!strcmp(mode, "gdump")) {
    for (int i = 0; i < 96; i++) keep[i] = t_malloc(65536); /* 6 MiB */
    for (int i = 0; i < 96; i++) t_free(keep[i]);
    for (int i = 0; i < 64; i++) keep[i] = t_malloc(65536); /* below peak */
  } else if (!strcmp(mode, "signal")) {
    raise(SIGUSR2);
    for (int i = 0; i < 3000 && count_files(".s0.") == 0; i++) usleep(10000);
    CHECK(count_files(".s0.") == 1);
  } else if (!strcmp(mode, "final")) {
    keep[0] = t_malloc(10);
  } else if (!strcmp(mode, "leak")) {
    leaky();
  } else if (!strcmp(mode, "badprefix")) {
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, NULL, 0) == ENOENT);
  } else if (!strcmp(mode, "ctlerr")) {
    const char *p = "/nonexistent-dir/x.heap";
    CHECK(ctl_dump(p) == ENOENT);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/afile", dir);
    close(open(tmp, O_WRONLY | O_CREAT, 0644));
    snprintf(tmp, sizeof tmp, "%s/afile/x.heap", dir);
    CHECK(ctl_dump(tmp) == ENOTDIR);
    CHECK(ctl_dump(dir) == EISDIR);
    if (geteuid() != 0) {
      snprintf(tmp, sizeof tmp, "%s/ro", dir);
      mkdir(tmp, 0555);
      snprintf(tmp, sizeof tmp, "%s/ro/x.heap", dir);
      CHECK(ctl_dump(tmp) == EACCES);
    }
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, &p, 3) == EINVAL);
    size_t sz = 8;
    char buf[8];
    CHECK(nalloc_ctl("prof.dump", buf, &sz, NULL, 0) == EPERM);
    size_t lg = 63;
    CHECK(nalloc_ctl("prof.reset", NULL, NULL, &lg, sizeof lg) == EINVAL);
    CHECK(nalloc_ctl("prof.reset", NULL, NULL, &lg, 4) == EINVAL);
    CHECK(nalloc_ctl("prof.lg_sample", NULL, NULL, &lg, sizeof lg) == EPERM);
    unsigned small;
    sz = sizeof small;
    CHECK(nalloc_ctl("prof.lg_sample", &small, &sz, NULL, 0) == EINVAL);
    bool b = true;
    CHECK(nalloc_ctl("prof.active", NULL, NULL, &b, 4) == EINVAL);
    CHECK(nalloc_ctl("thread.prof.active", NULL, NULL, &b, 2) == EINVAL);
    /* bool names: a byte other than 0 or 1 is refused, the value kept */
    static const char *const bools[] = {"prof.active", "prof.gdump",
                                        "prof.thread_active_init",
                                        "thread.prof.active"};
    for (int i = 0; i < 4; i++) {
      bool cur = false;
      sz = sizeof cur;
      CHECK(nalloc_ctl(bools[i], &cur, &sz, NULL, 0) == 0);
      for (unsigned v = 2; v < 256; v += 51) {
        unsigned char byte = (unsigned char)v;
        CHECK(nalloc_ctl(bools[i], NULL, NULL, &byte, 1) == EINVAL);
      }
      unsigned char raw = 0xff;
      sz = 1;
      CHECK(nalloc_ctl(bools[i], &raw, &sz, NULL, 0) == 0);
      CHECK(raw == (unsigned char)cur); /* unchanged, and a real bool */
      for (unsigned char v = 0; v <= 1; v++) { /* 0 and 1 round-trip */
        CHECK(nalloc_ctl(bools[i], NULL, NULL, &v, 1) == 0);
        CHECK(nalloc_ctl(bools[i], &raw, &sz, NULL, 0) == 0);
        CHECK(raw == v);
      }
      CHECK(nalloc_ctl(bools[i], NULL, NULL, &cur, sizeof cur) == 0);
    }
    const char *bad = "tab\there";
    CHECK(nalloc_ctl("thread.prof.name", NULL, NULL, &bad, sizeof bad) == EINVAL);
    const char *nul = NULL;
    CHECK(nalloc_ctl("thread.prof.name", NULL, NULL, &nul, sizeof nul) == EINVAL);
    CHECK(nalloc_ctl("prof.nosuch", NULL, NULL, NULL, 0) == ENOENT);
    /* Values round-trip, and profiling goes on. */
    bool old = false;
    sz = sizeof old;
    b = false;
    CHECK(nalloc_ctl("prof.gdump", &old, &sz, &b, sizeof b) == 0);
    CHECK(!old);
    b = true;
    CHECK(nalloc_ctl("prof.thread_active_init", &old, &sz, &b, sizeof b) == 0);
    CHECK(old);
    CHECK(nalloc_ctl("thread.prof.active", &old, &sz, NULL, 0) == 0);
    CHECK(old);
    leaky();
    snprintf(tmp, sizeof tmp, "%s/ok.heap", dir);
    CHECK(ctl_dump(tmp) == 0);
    pc_prof_t P = pc_load(tmp);
    pc_sum_t s = pc_sum(&P, "leaky", "child");
    CHECK_EQ_U(s.n, 3);
    CHECK_EQ_U(s.b, 3000);
    pc_free(&P);
  } else if (!strcmp(mode, "files")) {
    char p[600], q[600], buf[16];
    struct stat st;
    snprintf(p, sizeof p, "%s/plain.heap", dir);
    CHECK(ctl_dump(p) == 0);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* a symlink at the path: refused, target untouched */
    snprintf(q, sizeof q, "%s/victim", dir);
    snprintf(p, sizeof p, "%s/link.heap", dir);
    CHECK(symlink(q, p) == 0);
    CHECK(ctl_dump(p) == ELOOP);
    CHECK(stat(q, &st) != 0); /* not created through the link */
    int fd = open(q, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0 && write(fd, "precious", 8) == 8 && close(fd) == 0);
    CHECK(ctl_dump(p) == ELOOP);
    /* automatic names, <prefix>.<pid>.<seq>.<kind><n>.heap, O_EXCL (the
     * dumps above had paths of their own: seq is still 0) */
    int pid = (int)getpid();
    snprintf(p, sizeof p, "%s/x.%d.0.m0.heap", dir, pid);
    CHECK(symlink(q, p) == 0);
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, NULL, 0) == EEXIST);
    snprintf(p, sizeof p, "%s/x.%d.1.m1.heap", dir, pid);
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0 && write(fd, "mine", 4) == 4 && close(fd) == 0);
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, NULL, 0) == EEXIST);
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, NULL, 0) == 0); /* .2.m2 */
    snprintf(p, sizeof p, "%s/x.%d.2.m2.heap", dir, pid);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    snprintf(p, sizeof p, "%s/x.%d.1.m1.heap", dir, pid);
    fd = open(p, O_RDONLY);
    CHECK(fd >= 0 && read(fd, buf, sizeof buf) == 4 && close(fd) == 0);
    CHECK(memcmp(buf, "mine", 4) == 0);
    /* the exit dump will be seq 3: plant a symlink there too */
    snprintf(p, sizeof p, "%s/x.%d.3.f.heap", dir, pid);
    CHECK(symlink(q, p) == 0);
  } else if (!strcmp(mode, "sigoff")) {
    int sig = -1;
    size_t sz = sizeof sig;
    CHECK(nalloc_ctl("opt.prof_signal", &sig, &sz, NULL, 0) == 0);
    CHECK_EQ_U(sig, 0);
  } else if (!strcmp(mode, "conf")) {
    unsigned lg = 0;
    size_t sz = sizeof lg;
    CHECK(nalloc_ctl("opt.lg_prof_sample", &lg, &sz, NULL, 0) == 0);
    CHECK_EQ_U(lg, 19);
    const char *s = NULL;
    sz = sizeof s;
    CHECK(nalloc_ctl("opt.prof_unwind", &s, &sz, NULL, 0) == 0);
    CHECK(!strcmp(s, "dwarf"));
    CHECK(nalloc_ctl("opt.prof_format", &s, &sz, NULL, 0) == 0);
    CHECK(!strcmp(s, "gperftools"));
    unsigned depth = 0;
    sz = sizeof depth;
    CHECK(nalloc_ctl("opt.prof_depth", &depth, &sz, NULL, 0) == 0);
    CHECK_EQ_U(depth, 128);
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, NULL, 0) == 0);
  } else if (!strcmp(mode, "off")) {
    bool on = true;
    size_t sz = sizeof on;
    CHECK(nalloc_ctl("opt.prof", &on, &sz, NULL, 0) == 0);
    CHECK(!on);
    CHECK(nalloc_ctl("prof.dump", NULL, NULL, NULL, 0) == ENOENT);
    CHECK(nalloc_ctl("prof.active", &on, &sz, NULL, 0) == ENOENT);
  } else {
    return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2) {
    snprintf(dir, sizeof dir, "%s", argv[2]);
    return child(argv[1]);
  }
  alarm(100);
  snprintf(dir, sizeof dir, "/tmp/prof_triggers.%d", (int)getpid());
  CHECK(mkdir(dir, 0755) == 0);
  const char *self = "/proc/self/exe";
  char exe[512];
  ssize_t n = readlink(self, exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n] = 0;
  static char err[65536], conf[1024], name[600];
  pid_t pid;

#define CONF(...) (snprintf(conf, sizeof conf, __VA_ARGS__), conf)
  CHECK(run(exe, "auto", CONF("prof:true,prof_prefix:%s/a", dir), err, sizeof err, &pid) == 0);
  snprintf(name, sizeof name, "a.%d.0.m0.heap", (int)pid);
  CHECK(exists(name));
  snprintf(name, sizeof name, "a.%d.1.m1.heap", (int)pid);
  CHECK(exists(name));

  CHECK(run(exe, "interval", CONF("prof:true,lg_prof_sample:0,lg_prof_interval:20,prof_prefix:%s/i", dir),
            err, sizeof err, &pid) == 0);
  int ni = count_files(".i");
  printf("interval dumps: %d\n", ni);
  CHECK(ni >= 7 && ni <= 9); /* exact mode counts every byte */
  snprintf(name, sizeof name, "i.%d.0.i0.heap", (int)pid);
  CHECK(exists(name));

  CHECK(run(exe, "gdump", CONF("prof:true,lg_prof_sample:0,prof_gdump:true,prof_prefix:%s/g", dir),
            err, sizeof err, &pid) == 0);
  int nu = count_files(".u");
  printf("gdump dumps: %d\n", nu);
  CHECK(nu >= 4 && nu <= 6); /* a new 1 MiB step of the peak each */

  CHECK(run(exe, "signal", CONF("prof:true,prof_signal:USR2,prof_prefix:%s/s", dir),
            err, sizeof err, &pid) == 0);
  snprintf(name, sizeof name, "s.%d.0.s0.heap", (int)pid);
  CHECK(exists(name));

  CHECK(run(exe, "final", CONF("prof:true,prof_final:true,prof_prefix:%s/f", dir),
            err, sizeof err, &pid) == 0);
  snprintf(name, sizeof name, "f.%d.0.f.heap", (int)pid);
  CHECK(exists(name));
  snprintf(name, sizeof name, "%s/f.%d.0.f.heap", dir, (int)pid);
  pc_prof_t P = pc_load(name);
  pc_free(&P);

  CHECK(run(exe, "leak", CONF("prof:true,lg_prof_sample:0,prof_leak:true,prof_prefix:%s/l", dir),
            err, sizeof err, &pid) == 0);
  printf("%s", err);
  CHECK(strstr(err, "Leak summary: "));
  CHECK(strstr(err, "exact"));
  CHECK(strstr(err, "leaky"));
  snprintf(name, sizeof name, "%s/l.%d.0.f.heap", dir, (int)pid);
  P = pc_load(name);
  pc_rebase(&P, name);
  pc_sum_t s = pc_sum(&P, "leaky", "child");
  CHECK_EQ_U(s.n, 3);
  CHECK_EQ_U(s.b, 3000);
  pc_free(&P);

  CHECK(run(exe, "badprefix",
            CONF("prof:true,prof_final:true,prof_prefix:%s/missing/x", dir),
            err, sizeof err, &pid) == 0);
  CHECK(strstr(err, "cannot write") && strstr(err, "ENOENT"));
  CHECK(strchr(err, '\n') == strrchr(err, '\n')); /* one line */

  CHECK(run(exe, "ctlerr", CONF("prof:true,lg_prof_sample:0,prof_prefix:%s/c", dir),
            err, sizeof err, &pid) == 0);

  CHECK(run(exe, "files", CONF("prof:true,prof_final:true,prof_prefix:%s/x", dir),
            err, sizeof err, &pid) == 0);
  printf("%s", err);
  CHECK(strstr(err, "cannot write") && strstr(err, "EEXIST")); /* exit dump */
  CHECK(strchr(err, '\n') == strrchr(err, '\n'));              /* one line */
  {
    char victim[600], buf[16];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    int fd = open(victim, O_RDONLY);
    CHECK(fd >= 0 && read(fd, buf, sizeof buf) == 8 && close(fd) == 0);
    CHECK(memcmp(buf, "precious", 8) == 0);
  }

  static const char *const badsig[] = {"SEGV", "SIGBUS", "ILL", "FPE", "TRAP",
                                       "ABRT", "KILL", "SIGSTOP", "SYS"};
  static const int badnum[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
                               SIGABRT, SIGKILL, SIGSTOP, SIGSYS};
  for (int i = 0; i < 9; i++) {
    for (int by_num = 0; by_num < 2; by_num++) {
      if (by_num) CONF("prof:true,prof_signal:%d,prof_prefix:%s/sg", badnum[i], dir);
      else CONF("prof:true,prof_signal:%s,prof_prefix:%s/sg", badsig[i], dir);
      CHECK(run(exe, "sigoff", conf, err, sizeof err, &pid) == 0);
      CHECK(strstr(err, "prof_signal") && strstr(err, "not SEGV"));
      CHECK(strchr(err, '\n') == strrchr(err, '\n')); /* one line */
    }
  }
  CHECK(run(exe, "sigoff", CONF("prof:true,prof_signal:TERM,prof_prefix:%s/sg", dir),
            err, sizeof err, &pid) == 1); /* a valid one is taken */

  CHECK(run(exe, "conf",
            CONF("prof:true,lg_prof_sample:99,prof_unwind:bogus,prof_format:xml,"
                 "prof_depth:0,prof_prefix:%s/confdump", dir),
            err, sizeof err, &pid) == 0);
  CHECK(strstr(err, "lg_prof_sample") && strstr(err, "prof_unwind") &&
        strstr(err, "prof_format") && strstr(err, "prof_depth"));
  CHECK(count_files("confdump.") == 1);

  CHECK(run(exe, "off", "prof:false", err, sizeof err, &pid) == 0);

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  printf("prof_triggers: ok\n");
  return 0;
}
