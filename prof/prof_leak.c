/* prof_leak.c -- the prof_leak report at exit: what is still live, the
 * biggest stacks symbolized, and the final dump's path with the command
 * that reads it.
 *
 * The stacks are symbolized by running nalloc-prof itself on the final
 * dump (`nalloc-prof stacks -n 5 FILE`): demangled names, inlined frames,
 * file:line wherever there is debug info, separate debug files -- the same
 * text the user gets from the tool afterwards. Doing that in the process
 * would mean linking elfutils into libnalloc and calling code that
 * allocates from inside the allocator at exit; a child process after the
 * dump is written costs neither, and only runs with prof_leak. The child
 * gets the environment without LD_PRELOAD and NALLOC_CONF (it must not
 * profile itself) and writes to the stderr the program had at start-up.
 *
 * Where nalloc-prof is looked for, in order: $NALLOC_PROF_TOOL (a path;
 * empty: do not run it), next to the library (<libdir>/../bin,
 * <libdir>, <libdir>/tools: the install and build layouts), then $PATH.
 * Not found, or in a setuid program: the fallback is the return addresses
 * with the names dladdr knows (exported symbols only), and the command to
 * run. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOOL "nalloc-prof"
#define PATH_CAP 4096
#define WAIT_S 60


static int leak_fd = -1; /* stderr as the program started with it */

void prof_leak_boot(void) {
  if (opt_prof_leak && leak_fd < 0)
    leak_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

static size_t put(char *buf, size_t at, size_t cap, const char *s) {
  while (*s && at + 1 < cap) buf[at++] = *s++;
  buf[at] = 0;
  return at;
}

static bool executable(const char *p) { return access(p, X_OK) == 0; }

/* dir + "/" + rest into out; false if it does not fit. */
static bool join(char *out, const char *dir, size_t dlen, const char *rest) {
  size_t rl = strlen(rest);
  if (dlen + 1 + rl + 1 > PATH_CAP) return false;
  memcpy(out, dir, dlen);
  out[dlen] = '/';
  memcpy(out + dlen + 1, rest, rl + 1);
  return true;
}

/* Finds nalloc-prof (see the header). NULL: found; else why not. */
static const char *find_tool(char *out) {
  if (getauxval(AT_SECURE)) return "not run in a setuid program";
  const char *env = getenv("NALLOC_PROF_TOOL");
  if (env != NULL) {
    if (env[0] == 0) return "not run: NALLOC_PROF_TOOL is empty";
    if (strlen(env) < PATH_CAP && executable(env)) {
      memcpy(out, env, strlen(env) + 1);
      return NULL;
    }
    return "not run: NALLOC_PROF_TOOL is not an executable file";
  }
  Dl_info di;
  if (dladdr((void *)find_tool, &di) && di.dli_fname != NULL) {
    const char *slash = strrchr(di.dli_fname, '/');
    if (slash != NULL) {
      size_t dl = (size_t)(slash - di.dli_fname);
      static const char *const rel[] = {"../bin/" TOOL, TOOL, "tools/" TOOL};
      for (size_t i = 0; i < sizeof rel / sizeof *rel; i++)
        if (join(out, di.dli_fname, dl, rel[i]) && executable(out)) return NULL;
    }
  }
  const char *path = getenv("PATH");
  while (path != NULL && *path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    if (n > 0 && join(out, path, n, TOOL) && executable(out)) return NULL;
    path = end ? end + 1 : NULL;
  }
  return "not found next to the library or on PATH (NALLOC_PROF_TOOL=path "
         "names it)";
}

/* The environment minus LD_PRELOAD and NALLOC_CONF, in profiler memory. */
static char **child_env(size_t *bytes) {
  size_t n = 0;
  while (environ != NULL && environ[n] != NULL) n++;
  *bytes = (n + 1) * sizeof(char *);
  char **env = prof_mem_alloc(*bytes, PM_DUMP);
  if (env == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 &&
        strncmp(environ[i], "NALLOC_CONF=", 12) != 0)
      env[k++] = environ[i];
  env[k] = NULL;
  return env;
}

/* Waits up to WAIT_S for the child; then stops it. */
static void reap(pid_t pid) {
  struct timespec tick = {0, 10 * 1000 * 1000};
  for (int i = 0; i < WAIT_S * 100; i++) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return; /* ECHILD: reaped */
    nanosleep(&tick, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  nalloc_log("prof_leak: %s did not finish in %d s", TOOL, WAIT_S);
}

/* Runs `tool stacks -n 5 path` with its output on the saved stderr. vfork
 * and execve: no allocation here, and posix_spawn's file actions would
 * allocate (they are malloc'd). */
static bool run_tool(const char *tool, const char *path) {
  size_t envb;
  char **env = child_env(&envb);
  if (env == NULL) return false;
  char n[4] = "5";
  char *argv[] = {(char *)tool, (char *)"stacks", (char *)"-n", n,
                  (char *)path, NULL};
  int fd = leak_fd >= 0 ? leak_fd : STDERR_FILENO;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = vfork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    sigprocmask(SIG_SETMASK, &old, NULL);
    execve(tool, argv, env);
    _exit(127);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  prof_mem_free(env, envb, PM_DUMP);
  if (pid < 0) return false;
  reap(pid);
  return true;
}

/* Today's hint without the tool: addresses, and the exported names. */
static void fallback(const prof_leak_t *l) {
  for (unsigned k = 0; k < l->ntop; k++) {
    char line[900], num[24];
    size_t at = 0;
    line[0] = 0;
    for (unsigned i = 0; i < l->top[k].nframes; i++) {
      void *pc = l->top[k].pcs[i];
      if (i) at = put(line, at, sizeof line, " <- ");
      num[prof_fmt_hex(num, (uint64_t)(uintptr_t)pc)] = 0;
      at = put(line, at, sizeof line, num);
      Dl_info di;
      if (dladdr((char *)pc - 1, &di) && di.dli_sname) {
        at = put(line, at, sizeof line, " ");
        at = put(line, at, sizeof line, di.dli_sname);
      }
    }
    nalloc_log("  #%u: %llu bytes in %llu objects at %s", k + 1,
               (unsigned long long)l->top[k].bytes,
               (unsigned long long)l->top[k].objs, line);
  }
}

void prof_leak_report(const prof_leak_t *l, const char *path) {
  nalloc_log("Leak summary: %llu bytes in %llu objects from %llu stacks "
             "(%s, lg_prof_sample %u)",
             (unsigned long long)l->bytes, (unsigned long long)l->objs,
             (unsigned long long)l->stacks,
             l->lg == 0 ? "exact" : "sampled estimate", l->lg);
  if (l->stacks == 0) return;
  NALLOC_BIG_BSS static char tool[PATH_CAP]; /* at exit, one thread: no lock needed */
  if (path == NULL) { /* no file to read: the addresses are all we have */
    fallback(l);
    return;
  }
  const char *why = find_tool(tool);
  if (why == NULL && !run_tool(tool, path)) why = "could not be started";
  if (why != NULL) {
    fallback(l);
    nalloc_log("Full profile: %s; symbolized with: " TOOL " stacks %s "
               "(" TOOL " %s)", path, path, why);
    return;
  }
  nalloc_log("Full profile: %s; read it with: %s top %s", path, tool, path);
}
