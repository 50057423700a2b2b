/* realloc: each thread grows 256 buffers in turn by 1-512 bytes at a time
 * with realloc (interleaved, so in-place growth is not free) up to a
 * random target of 1-64 KiB, writing the new bytes and checking the old
 * ones survived each move; a buffer that reaches its target is checked in
 * full and freed, and starts again from NULL. Total work = 2.5*10^6
 * reallocs * scale. */
#include <pthread.h>
#include "bench_common.h"

#define NBUF 256
static struct bench_args A;
static long per_thread;

static inline unsigned char pat(size_t i, size_t b, uint64_t gen) {
  return (unsigned char)(i * 31 + b * 7 + gen);
}

static void *worker(void *arg) {
  long t = (long)arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)t);
  unsigned char *p[NBUF] = {0};
  size_t len[NBUF] = {0}, target[NBUF];
  uint64_t gen[NBUF] = {0};
  for (int b = 0; b < NBUF; b++) target[b] = bench_uniform(&r, 1024, 65536);
  for (long i = 0; i < per_thread; i++) {
    size_t b = (size_t)i % NBUF;
    size_t old = len[b], n = old + bench_uniform(&r, 1, 512);
    unsigned char *q = realloc(p[b], n);
    BENCH_OOM(q);
    if (old && (q[0] != pat(0, b, gen[b]) || q[old - 1] != pat(old - 1, b, gen[b]) ||
                q[old / 2] != pat(old / 2, b, gen[b])))
      BENCH_FAIL("realloc: contents lost growing %zu -> %zu", old, n);
    for (size_t j = old; j < n; j++) q[j] = pat(j, b, gen[b]);
    p[b] = q;
    len[b] = n;
    if (n >= target[b]) {
      for (size_t j = 0; j < n; j++)
        if (q[j] != pat(j, b, gen[b])) BENCH_FAIL("realloc: byte %zu of %zu wrong", j, n);
      free(q);
      p[b] = NULL;
      len[b] = 0;
      gen[b]++;
      target[b] = bench_uniform(&r, 1024, 65536);
    }
  }
  for (int b = 0; b < NBUF; b++) free(p[b]);
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  per_thread = bench_scaled(2.5e6, A.scale, 1000) / A.threads;
  double t0 = bench_now();
  bench_join(bench_start(A.threads, worker), A.threads);
  double s = bench_now() - t0;
  bench_result("realloc", &A, (double)per_thread * A.threads, s, "");
  return 0;
}
