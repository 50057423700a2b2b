/* phases: prodcons -t 1's allocation pattern with its two phases timed
 * apart. Batches of 1024 blocks of 16-512 B (uniform, as bench_ring.h's
 * make) are allocated, then freed in the order they were allocated; the
 * TSC is read around each phase (x86-64; elsewhere the clock, in ns), so
 * the RESULT line says how many ticks a malloc and a free took in that
 * pattern (malloc_ticks, free_ticks), without
 * the benchmark's own work between the calls. -z 0 (default): the blocks
 * are not touched; -z 1: each block's first 8 bytes and last byte are
 * written after its malloc and read before its free (the first write of a
 * block is then a store miss in the malloc phase, as in prodcons' make).
 * Total pairs: 2*10^7 * scale (-s). Not a workload of bench/run (issue
 * 11, churn11: where prodcons -t 1's time goes, alloc/README.md). */
#include "bench_common.h"

#define BATCH 1024

/* The TSC on x86-64 (a few cycles to read, no system call), else ns. */
static inline uint64_t ticks(void) {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  return (uint64_t)(bench_now() * 1e9);
#endif
}

int main(int argc, char **argv) {
  struct bench_args a = bench_parse(argc, argv);
  if (a.size < 0 || a.size > 1) bench_usage(argv[0]);
  int touch = (int)a.size;
  long total = bench_scaled(2e7, a.scale, BATCH) / BATCH * BATCH;
  struct bench_rng r = bench_rng_init(a.seed, 0);
  static unsigned char *batch[BATCH];
  static size_t sz[BATCH];
  uint64_t tm = 0, tf = 0;
  double t0 = bench_now();
  for (long done = 0; done < total; done += BATCH) {
    for (int i = 0; i < BATCH; i++) sz[i] = bench_uniform(&r, 16, 512);
    uint64_t c0 = ticks();
    for (int i = 0; i < BATCH; i++) {
      unsigned char *p = malloc(sz[i]);
      BENCH_OOM(p);
      if (touch) {
        memcpy(p, &sz[i], 8);
        p[sz[i] - 1] = (unsigned char)i;
      }
      batch[i] = p;
    }
    bench_escape(batch);
    uint64_t c1 = ticks();
    for (int i = 0; i < BATCH; i++) {
      unsigned char *p = batch[i];
      if (touch && (memcmp(p, &sz[i], 8) != 0 || p[sz[i] - 1] != (unsigned char)i))
        BENCH_FAIL("phases: block %d clobbered", i);
      free(p);
    }
    uint64_t c2 = ticks();
    tm += c1 - c0;
    tf += c2 - c1;
  }
  double s = bench_now() - t0;
  char extra[96];
  snprintf(extra, sizeof extra, "touch=%d malloc_ticks=%.2f free_ticks=%.2f", touch,
           (double)tm / (double)total, (double)tf / (double)total);
  bench_result("phases", &a, (double)total, s, extra);
  return 0;
}
