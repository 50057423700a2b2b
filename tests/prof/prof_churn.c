/* prof_churn.c -- profiler memory under thread churn (issue 10, item 4),
 * exact mode (lg_prof_sample:0): N short-lived threads, 4 at a time, each
 * allocating KT objects it frees at once (churn_temp) and one it leaves in
 * a ring of RING slots, where a later thread frees it after its maker has
 * exited (churn_kept). Half way, a dump must equal the truth this program
 * knows (live and allocated objects and bytes per stack); at the end,
 * with everything freed, another one too.
 *
 * Memory must follow what is live, not how many threads ran: mid-run at
 * most two thread records per ring slot (and none once a dump has shown
 * them: the counters of their live objects stay, their records go) (an exited thread's record goes
 * when nothing of it is live; the sweeps that free them are amortized, a
 * sweep runs once half of the records counted at the last one are empty,
 * or their number doubled) plus the running threads, and the profiler's
 * mapped memory below MID_MAX; at the end (everything freed and dumped)
 * below END_MAX, and stats.metadata below META_MAX. Before
 * this was fixed every exited thread kept ~4.4 KB until a dump, which
 * then kept it on a free list for ever (445 MB for 10^5 threads).
 *
 * Bounds: a ring slot's object keeps its dead thread's record (128 B) and
 * tctx (128 B in exact mode; 192 B before 0c2eafe), so RING slots need
 * ~0.5 MB; the running threads' tdatas
 * (~4.5 KB) and tables, the gctxs, and one spare 64 KiB slab per size
 * class (at most ~10 classes in use) add ~1 MB. MID_MAX = 4 MiB leaves
 * room for slab fragmentation; END_MAX = 1.5 MiB is the spare slabs and
 * the main thread's records. Arguments: N (default 20000) and RING
 * (default 2048); the sanitizer builds run 1000 threads and a ring of 128
 * (starting a thread costs them ~15 ms: the unwinder reads
 * /proc/self/maps for the new thread's stack bounds). */
#include "prof_check.h"

#include <pthread.h>

static int RING = 2048;
#define RING_MAX 2048
#define KT 4
#define BATCH 4
#define TEMP_SIZE 100
#define KEPT_SIZE 48
#define MID_MAX ((size_t)4 << 20)
#define END_MAX ((size_t)3 << 19)
#define META_MAX ((size_t)8 << 20)

static void *ring[RING_MAX];
static long nmade;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

NOINL void *churn_temp(void) {
  void *p = t_malloc(TEMP_SIZE);
  __asm__ volatile("" ::"r"(p) : "memory");
  return p;
}
NOINL void *churn_kept(void) {
  void *p = t_malloc(KEPT_SIZE);
  __asm__ volatile("" ::"r"(p) : "memory");
  return p;
}

void *body(void *arg);
void *body(void *arg) {
  (void)arg;
  for (int i = 0; i < KT; i++) t_free(churn_temp());
  void *p = churn_kept();
  CHECK(p);
  pthread_mutex_lock(&mu);
  void *old = ring[nmade % RING];
  ring[nmade % RING] = p;
  nmade++;
  pthread_mutex_unlock(&mu);
  t_free(old); /* its maker has exited */
  return NULL;
}

static size_t get_size(const char *name) {
  size_t v = 0, sz = sizeof v;
  CHECK(nalloc_ctl(name, &v, &sz, NULL, 0) == 0);
  return v;
}

static size_t metadata(void) {
  uint64_t e = 1;
  CHECK(nalloc_ctl("epoch", NULL, NULL, &e, sizeof e) == 0);
  return get_size("stats.metadata");
}

/* The dump against the truth: `made` threads ran, `live` kept objects are
 * in the ring. */
static void check_dump(const char *tag, long made, long live) {
  char path[256];
  snprintf(path, sizeof path, "prof_churn.%d.%s.heap", (int)getpid(), tag);
  CHECK(ctl_dump(path) == 0);
  pc_prof_t P = pc_load(path);
  pc_sum_t T = pc_sum(&P, "churn_temp", "body");
  pc_sum_t K = pc_sum(&P, "churn_kept", "body");
  printf("%s: temp %" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "], kept %" PRIu64
         ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "]\n",
         tag, T.n, T.b, T.an, T.ab, K.n, K.b, K.an, K.ab);
  CHECK_EQ_U(T.n, 0);
  CHECK_EQ_U(T.b, 0);
  CHECK_EQ_U(T.an, (uint64_t)made * KT);
  CHECK_EQ_U(T.ab, (uint64_t)made * KT * TEMP_SIZE);
  CHECK_EQ_U(K.n, (uint64_t)live);
  CHECK_EQ_U(K.b, (uint64_t)live * KEPT_SIZE);
  CHECK_EQ_U(K.an, (uint64_t)made);
  CHECK_EQ_U(K.ab, (uint64_t)made * KEPT_SIZE);
  pc_free(&P);
  unlink(path);
}

static void run_threads(long n) {
  for (long i = 0; i < n; i += BATCH) {
    pthread_t t[BATCH];
    for (int j = 0; j < BATCH; j++) CHECK(pthread_create(&t[j], NULL, body, NULL) == 0);
    for (int j = 0; j < BATCH; j++) CHECK(pthread_join(t[j], NULL) == 0);
  }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000;
  if (argc > 2) RING = atoi(argv[2]);
  CHECK(RING > 0 && RING <= RING_MAX);
  n -= n % (2 * BATCH);
  CHECK(n >= 2 * RING);
  run_threads(n / 2);
  size_t mid = get_size("prof.stats.mapped");
  size_t nthr = get_size("prof.stats.nthreads");
  printf("after %ld threads: profiler mapped %zu B, %zu thread records, "
         "%zu tctxs, metadata %zu B\n", n / 2, mid, nthr,
         get_size("prof.stats.ntctx"), metadata());
  check_dump("mid", n / 2, RING);
  CHECK(nthr <= 2 * (size_t)RING + BATCH + 65); /* amortized sweeps: see above */
  CHECK(mid <= MID_MAX);
  /* The dump showed the exited threads' records: they are folded away,
   * only their live objects' counters stay (the main thread's record is
   * all that remains). */
  size_t after = get_size("prof.stats.nthreads");
  printf("after the dump: %zu thread records, profiler mapped %zu B\n", after,
         get_size("prof.stats.mapped"));
  CHECK(after <= 1);

  run_threads(n / 2);
  for (int i = 0; i < RING; i++) t_free(ring[i]);
  check_dump("end", n, 0);
  size_t end = get_size("prof.stats.mapped"), meta = metadata();
  printf("after %ld threads, all freed: profiler mapped %zu B, %zu thread "
         "records, %zu tctxs, %zu gctxs, metadata %zu B\n", n, end,
         get_size("prof.stats.nthreads"), get_size("prof.stats.ntctx"),
         get_size("prof.stats.ngctx"), meta);
  CHECK(end <= END_MAX);
  CHECK(meta <= META_MAX);
  printf("prof_churn: ok\n");
  return 0;
}
