/* frag: fragmentation. Each thread allocates blocks of random size
 * 16-1024 B (384 MiB in all at scale 1), then frees 9 of every 10 (keeping
 * every 10th in allocation order, so the survivors are spread over all the
 * memory). The main thread reads the resident set size (/proc/self/statm)
 * at the peak, after the free phase, and after a second phase that
 * allocates half the freed volume again in larger blocks (1-4 KiB: can the
 * allocator reuse the holes?). Then everything is checked and freed.
 * extra: live_kb rss_peak_kb rss_after_free_kb rss_realloc_kb rss_end_kb
 * With -n MS, the process then stays idle (no call into the allocator) for
 * MS ms and adds rss_idle_kb: what an allocator's decay gave back by then
 * (`end` within dirty_decay_ms of the last free). */
#include <time.h>
#include <pthread.h>
#include "bench_common.h"

static struct bench_args A;
static long per_thread_bytes;
static pthread_barrier_t bar;

struct blk { unsigned char *p; uint32_t sz; };

static void *worker(void *arg) {
  long t = (long)arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)t);
  long cap = per_thread_bytes / 16 + 16, n = 0, bytes = 0;
  struct blk *b = malloc(sizeof *b * (size_t)cap);
  BENCH_OOM(b);
  while (bytes < per_thread_bytes && n < cap) {
    size_t sz = bench_uniform(&r, 16, 1024);
    b[n].p = malloc(sz);
    BENCH_OOM(b[n].p);
    b[n].sz = (uint32_t)sz;
    bench_stamp(b[n].p, sz, ((uint64_t)t << 40) | (uint64_t)n);
    bytes += (long)sz;
    n++;
  }
  pthread_barrier_wait(&bar); /* peak */
  pthread_barrier_wait(&bar);
  for (long i = 0; i < n; i++)
    if (i % 10) {
      if (!bench_check(b[i].p, b[i].sz, ((uint64_t)t << 40) | (uint64_t)i)) BENCH_FAIL("frag: block clobbered");
      free(b[i].p);
      b[i].p = NULL;
    }
  pthread_barrier_wait(&bar); /* after free */
  pthread_barrier_wait(&bar);
  long freed = bytes * 9 / 10, again = 0, m = 0;
  long cap2 = freed / 2 / 1024 + 16;
  struct blk *c = malloc(sizeof *c * (size_t)cap2);
  BENCH_OOM(c);
  while (again < freed / 2 && m < cap2) {
    size_t sz = bench_uniform(&r, 1024, 4096);
    c[m].p = malloc(sz);
    BENCH_OOM(c[m].p);
    c[m].sz = (uint32_t)sz;
    bench_stamp(c[m].p, sz, ((uint64_t)t << 40) | (uint64_t)(m + cap));
    again += (long)sz;
    m++;
  }
  pthread_barrier_wait(&bar); /* after second phase */
  pthread_barrier_wait(&bar);
  for (long i = 0; i < n; i++)
    if (b[i].p) {
      if (!bench_check(b[i].p, b[i].sz, ((uint64_t)t << 40) | (uint64_t)i)) BENCH_FAIL("frag: survivor clobbered");
      free(b[i].p);
    }
  for (long i = 0; i < m; i++) {
    if (!bench_check(c[i].p, c[i].sz, ((uint64_t)t << 40) | (uint64_t)(i + cap))) BENCH_FAIL("frag: block clobbered");
    free(c[i].p);
  }
  free(b);
  free(c);
  return (void *)(bytes / 10 + again);
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  per_thread_bytes = bench_scaled(384.0 * 1024 * 1024, A.scale, 1 << 20) / A.threads;
  pthread_t *th = malloc(sizeof *th * (size_t)A.threads);
  BENCH_OOM(th);
  pthread_barrier_init(&bar, NULL, (unsigned)A.threads + 1);
  double t0 = bench_now();
  for (long t = 0; t < A.threads; t++)
    if (pthread_create(&th[t], NULL, worker, (void *)t)) BENCH_FAIL("pthread_create");
  pthread_barrier_wait(&bar);
  long peak = bench_rss_kb();
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&bar);
  long after = bench_rss_kb();
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&bar);
  long again = bench_rss_kb();
  pthread_barrier_wait(&bar);
  long live = 0;
  for (int t = 0; t < A.threads; t++) {
    void *rv;
    pthread_join(th[t], &rv);
    live += (long)rv;
  }
  long end = bench_rss_kb();
  double s = bench_now() - t0;
  free(th);
  long idle = -1;
  if (A.iters > 0) {
    struct timespec ts = {A.iters / 1000, (A.iters % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    idle = bench_rss_kb();
  }
  char extra[240];
  int k = snprintf(extra, sizeof extra,
                   "live_kb=%ld rss_peak_kb=%ld rss_after_free_kb=%ld rss_realloc_kb=%ld "
                   "rss_end_kb=%ld",
                   live / 1024, peak, after, again, end);
  if (idle >= 0) snprintf(extra + k, sizeof extra - (size_t)k, " rss_idle_kb=%ld", idle);
  bench_result("frag", &A, (double)per_thread_bytes * A.threads / 520.0, s, extra);
  return 0;
}
