/* http_prog.c -- the program the prof_http tests (http_test.py) profile
 * over HTTP. Started with NALLOC_CONF=prof:true,...,prof_http:..., it
 * allocates a known heap, says "ready" and then obeys one command per line
 * on stdin, answering one line on stdout:
 *   dump PATH    prof.dump to PATH                      -> "ok" / "err N"
 *   alloc N      delta_alloc(): N more blocks of 4096 B -> "ok"
 *   arena N      thread.arena N                         -> "ok" / "err N"
 *   churn N      churn(): N blocks of 1000 B allocated and freed at once
 *                                                       -> "ok"
 *   addrs        the addresses of make_node, build_list, churn, delta_alloc
 *                -> "make_node=0x... build_list=0x... ..."
 *   where        prof.http_address                      -> "where ADDR"
 *   fork         a child that allocates child_alloc()'s 100 x 512 B, says
 *                "child PID" and waits to be killed (60 s at most)
 *                                                       -> "forked"
 *   quit / EOF   exit 0
 * Known heap after start-up: make_node (via build_list) 100 x 64 B live;
 * churn 20 x 1000 B allocated and freed (alloc_space only). I/O is done with
 * read/write on fixed buffers, so that waiting for a command allocates
 * nothing: a profile taken over HTTP while the program waits must equal a
 * dump taken just before. */
#include "prof_check.h"

#include <signal.h>
#include <sys/wait.h>

static void *keep[4096];
static int nkeep;

NOINL void *make_node(size_t n) { return t_malloc(n); }
NOINL void build_list(int n) {
  for (int i = 0; i < n; i++) keep[nkeep++] = make_node(64);
}
NOINL void churn(int n) {
  for (int i = 0; i < n; i++) {
    void *p = t_malloc(1000);
    __asm__ volatile("" : : "r"(p) : "memory");
    t_free(p);
  }
}
NOINL void delta_alloc(int n) {
  for (int i = 0; i < n && nkeep < 4096; i++) keep[nkeep++] = t_malloc(4096);
}
NOINL void child_alloc(void) {
  for (int i = 0; i < 100 && nkeep < 4096; i++) keep[nkeep++] = t_malloc(512);
}

static void say(const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(1, s, n);
    if (w <= 0) exit(3);
    s += w;
    n -= (size_t)w;
  }
}

/* One line from stdin (without the newline); false at EOF. */
static bool get_line(char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    char c;
    ssize_t r = read(0, &c, 1);
    if (r <= 0) return false;
    if (c == '\n') break;
    if (n + 1 < cap) buf[n++] = c;
  }
  buf[n] = '\0';
  return true;
}

static void child_main(void) {
  child_alloc();
  char line[64];
  snprintf(line, sizeof line, "child %d\n", (int)getpid());
  say(line);
  alarm(60); /* never outlive the test, which kills it sooner */
  for (;;) pause();
}

int main(void) {
  build_list(100);
  churn(20);
  say("ready\n");
  char line[4096], out[512];
  while (get_line(line, sizeof line)) {
    if (strncmp(line, "dump ", 5) == 0) {
      int e = ctl_dump(line + 5);
      snprintf(out, sizeof out, e ? "err %d\n" : "ok\n", e);
    } else if (strncmp(line, "alloc ", 6) == 0) {
      delta_alloc(atoi(line + 6));
      snprintf(out, sizeof out, "ok\n");
    } else if (strncmp(line, "arena ", 6) == 0) {
      unsigned a = (unsigned)atoi(line + 6);
      int e = nalloc_ctl("thread.arena", NULL, NULL, &a, sizeof a);
      snprintf(out, sizeof out, e ? "err %d\n" : "ok\n", e);
    } else if (strncmp(line, "churn ", 6) == 0) {
      churn(atoi(line + 6));
      snprintf(out, sizeof out, "ok\n");
    } else if (strcmp(line, "addrs") == 0) {
      snprintf(out, sizeof out, "make_node=%p build_list=%p churn=%p delta_alloc=%p\n",
               (void *)make_node, (void *)build_list, (void *)churn,
               (void *)delta_alloc);
    } else if (strcmp(line, "where") == 0) {
      const char *w = NULL;
      size_t len = sizeof w;
      int e = nalloc_ctl("prof.http_address", &w, &len, NULL, 0);
      snprintf(out, sizeof out, "where %s\n", e ? "?" : w);
    } else if (strcmp(line, "fork") == 0) {
      pid_t pid = fork();
      if (pid == 0) child_main();
      snprintf(out, sizeof out, pid > 0 ? "forked\n" : "err fork\n");
    } else if (strcmp(line, "quit") == 0) {
      break;
    } else {
      snprintf(out, sizeof out, "err unknown\n");
    }
    say(out);
  }
  return 0;
}
