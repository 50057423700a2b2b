/* random: each thread keeps 4096 live blocks and replaces a random one per
 * operation with a block of log-uniform random size in 8 B - 64 KiB
 * (checking the old block before freeing it). Total work = 8*10^6 ops *
 * scale. */
#include <pthread.h>
#include "bench_common.h"

#define WS 4096
static struct bench_args A;
static long per_thread;

static void *worker(void *arg) {
  long t = (long)arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)t);
  unsigned char **p = calloc(WS, sizeof *p);
  size_t *sz = calloc(WS, sizeof *sz);
  uint64_t *tag = calloc(WS, sizeof *tag);
  BENCH_OOM(p);
  BENCH_OOM(sz);
  BENCH_OOM(tag);
  for (long i = 0; i < per_thread; i++) {
    size_t k = (size_t)(bench_rand(&r) % WS);
    if (p[k]) {
      if (!bench_check(p[k], sz[k], tag[k])) BENCH_FAIL("random: block of %zu B clobbered", sz[k]);
      free(p[k]);
    }
    sz[k] = bench_loguniform(&r, 8, 65536);
    tag[k] = ((uint64_t)t << 40) | (uint64_t)i;
    p[k] = malloc(sz[k]);
    BENCH_OOM(p[k]);
    bench_stamp(p[k], sz[k], tag[k]);
  }
  for (size_t k = 0; k < WS; k++)
    if (p[k]) {
      if (!bench_check(p[k], sz[k], tag[k])) BENCH_FAIL("random: block of %zu B clobbered", sz[k]);
      free(p[k]);
    }
  free(p);
  free(sz);
  free(tag);
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  per_thread = bench_scaled(8e6, A.scale, 1000) / A.threads;
  double t0 = bench_now();
  bench_join(bench_start(A.threads, worker), A.threads);
  double s = bench_now() - t0;
  bench_result("random", &A, (double)per_thread * A.threads, s, "");
  return 0;
}
