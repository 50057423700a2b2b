/* prof_threads.c -- counters across threads (exact mode):
 *  - a thread that exits keeps its rows (and its name, in the jemalloc
 *    format) in the next dump; after that its record is folded away and
 *    its live objects are still counted, without a thread row;
 *  - frees from another thread leave the allocating stack at 0 live objects
 *    with its cumulative totals intact after the dead thread's records
 *    are folded away (at once: nothing of it is live), and one dump later
 *    the idle stack is gone (its gctx reclaimed);
 *  - a live thread whose objects are half freed elsewhere shows the half.
 * Runs with prof_format gperftools and jemalloc (see CMakeLists.txt). */
#include "prof_check.h"

#include <pthread.h>
#include <unistd.h>

#define NA 1000
#define NC 500
static void *objs_a[NA], *objs_c[NC];
static pthread_barrier_t bar;
static bool jeformat;

NOINL void alloc_a(void) {
  for (int i = 0; i < NA; i++) objs_a[i] = t_malloc(24);
  __asm__ volatile("");
}
NOINL void alloc_c(void) {
  for (int i = 0; i < NC; i++) objs_c[i] = t_malloc(40);
  __asm__ volatile("");
}

static void *thread_a(void *arg) {
  (void)arg;
  const char *name = "worker-a";
  CHECK(nalloc_ctl("thread.prof.name", NULL, NULL, &name, sizeof name) == 0);
  const char *back = NULL;
  size_t sz = sizeof back;
  CHECK(nalloc_ctl("thread.prof.name", &back, &sz, NULL, 0) == 0);
  CHECK(back && strcmp(back, "worker-a") == 0);
  alloc_a();
  return NULL;
}
static void *thread_b(void *arg) {
  (void)arg;
  for (int i = 0; i < NA; i++) t_free(objs_a[i]);
  return NULL;
}
static void *thread_c(void *arg) {
  (void)arg;
  alloc_c();
  pthread_barrier_wait(&bar); /* allocated */
  pthread_barrier_wait(&bar); /* main has checked */
  return NULL;
}

/* jemalloc format: find the stack whose first frame is in fn and return
 * its t* line and the number of tN lines; also look for a header tN line
 * carrying `name`. Values in exact mode equal the raw counts here because
 * every object is >= 24 bytes (the R=1 correction is < 1e-10). */
typedef struct {
  uint64_t c[4];
  int nthr;
  bool named;
} je_t;
static je_t je_find(const char *path, const char *fn, const char *name) {
  je_t J;
  memset(&J, 0, sizeof J);
  FILE *f = fopen(path, "r");
  CHECK(f);
  char line[4096];
  bool in = false, stacks = false;
  CHECK(fgets(line, sizeof line, f) && strncmp(line, "heap_v2/1\n", 10) == 0);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "MAPPED_LIBRARIES:", 17) == 0) break;
    if (line[0] == '@') {
      stacks = true;
      uintptr_t a0 = strtoull(line + 2, NULL, 16);
      in = strcmp(pc_fn(a0), fn) == 0;
      continue;
    }
    const char *s = line;
    while (*s == ' ') s++;
    if (*s == '\n' || *s == 0) continue;
    if (!stacks) {
      if (name && strstr(line, name) && s[0] == 't' && s[1] != '*') J.named = true;
      continue;
    }
    if (!in) continue;
    if (strncmp(s, "t*: ", 4) == 0) {
      s += 4;
      CHECK(pc_counts(&s, J.c));
    } else {
      CHECK(s[0] == 't');
      J.nthr++;
    }
  }
  fclose(f);
  return J;
}

static void dump_check(int step, uint64_t na_live, uint64_t nc_live,
                       bool a_thread_line, bool a_shown) {
  char path[256];
  snprintf(path, sizeof path, "prof_threads.%d.%d.heap", (int)getpid(), step);
  CHECK(ctl_dump(path) == 0);
  if (jeformat) {
    je_t A = je_find(path, "alloc_a", "worker-a");
    CHECK_EQ_U(A.c[0], na_live);
    CHECK_EQ_U(A.c[1], na_live * 24);
    CHECK_EQ_U(A.c[2], a_shown ? NA : 0);
    CHECK_EQ_U(A.c[3], a_shown ? NA * 24 : 0);
    CHECK_EQ_U(A.nthr, a_thread_line ? 1 : 0);
    CHECK(A.named == a_thread_line);
    je_t C = je_find(path, "alloc_c", NULL);
    CHECK_EQ_U(C.c[0], nc_live);
    CHECK_EQ_U(C.c[1], nc_live * 40);
  } else {
    pc_prof_t P = pc_load(path);
    pc_sum_t A = pc_sum(&P, "alloc_a", NULL), C = pc_sum(&P, "alloc_c", NULL);
    CHECK_EQ_U(A.nrec, a_shown ? 1 : 0);
    CHECK_EQ_U(A.n, na_live);
    CHECK_EQ_U(A.b, na_live * 24);
    CHECK_EQ_U(A.an, a_shown ? NA : 0);
    CHECK_EQ_U(A.ab, a_shown ? NA * 24 : 0);
    CHECK_EQ_U(C.n, nc_live);
    CHECK_EQ_U(C.b, nc_live * 40);
    CHECK_EQ_U(C.an, NC);
    CHECK_EQ_U(C.ab, NC * 40);
    pc_free(&P);
  }
  unlink(path);
}

int main(void) {
  const char *fmt = NULL;
  size_t sz = sizeof fmt;
  CHECK(nalloc_ctl("opt.prof_format", &fmt, &sz, NULL, 0) == 0);
  jeformat = strcmp(fmt, "jemalloc") == 0;
  pthread_barrier_init(&bar, NULL, 2);
  pthread_t ta, tb, tc;

  CHECK(pthread_create(&tc, NULL, thread_c, NULL) == 0);
  pthread_barrier_wait(&bar);
  /* Half of C's objects freed by main while C still runs. */
  for (int i = 0; i < NC / 2; i++) t_free(objs_c[i]);

  CHECK(pthread_create(&ta, NULL, thread_a, NULL) == 0);
  CHECK(pthread_join(ta, NULL) == 0);
  dump_check(1, NA, NC / 2, true, true); /* A exited: its rows stay */
  /* ...for one dump: then its record is folded away, its objects still
   * counted (without a thread row) */
  dump_check(15, NA, NC / 2, false, true);

  CHECK(pthread_create(&tb, NULL, thread_b, NULL) == 0);
  CHECK(pthread_join(tb, NULL) == 0);
  /* freed elsewhere: A's records folded away, its stack at 0 live with
   * its totals; then, shown idle once, the stack is gone */
  dump_check(2, 0, NC / 2, false, true);
  dump_check(3, 0, NC / 2, false, false);

  pthread_barrier_wait(&bar);
  CHECK(pthread_join(tc, NULL) == 0);
  for (int i = NC / 2; i < NC; i++) t_free(objs_c[i]);
  dump_check(4, 0, 0, false, false);
  printf("prof_threads: ok\n");
  return 0;
}
