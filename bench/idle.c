/* idle: resident memory of a process that frees most of its heap and goes
 * quiet. One thread allocates 500 MiB (at scale 1) in mixed sizes -- by
 * bytes about a third each in 16 B-1 KiB, 1-64 KiB and 64 KiB-2 MiB
 * blocks -- writes every byte, frees 90% of the blocks at random, then
 * makes no call into the allocator at all: it sleeps and samples the
 * resident set (/proc/self/statm) every `-z` ms (default 100) for `-n` ms
 * (default 20000: twice the usual dirty_decay_ms of 10 s). The survivors
 * are checked at the end.
 * Output: one line `idle t_ms rss_kb` per sample, then the RESULT line
 * (extra: live_kb rss_peak_kb rss_freed_kb rss_end_kb). bench/idle_rss
 * runs it under every allocator and writes the table. */
#include <time.h>

#include "bench_common.h"

struct blk {
  unsigned char *p;
  uint32_t sz;
};

static size_t pick_size(struct bench_rng *r) {
  /* equal bytes per band: pick a band with probability inverse to its
   * mean size */
  uint64_t x = bench_rand(r) % 100000;
  if (x < 48) return bench_uniform(r, 64 << 10, 2 << 20);   /* mean ~1 MiB */
  if (x < 1622) return bench_uniform(r, 1 << 10, 64 << 10); /* mean ~32 KiB */
  return bench_uniform(r, 16, 1024);                        /* mean ~520 B */
}

int main(int argc, char **argv) {
  struct bench_args A = bench_parse(argc, argv);
  long duration_ms = A.iters > 0 ? A.iters : 20000, step_ms = A.size > 0 ? A.size : 100;
  long total = bench_scaled(500.0 * 1024 * 1024, A.scale, 1 << 20);
  struct bench_rng r = bench_rng_init(A.seed, 0);
  long cap = total / 16 + 16, n = 0, bytes = 0;
  struct blk *b = malloc(sizeof *b * (size_t)cap);
  BENCH_OOM(b);
  double t0 = bench_now();
  while (bytes < total && n < cap) {
    size_t sz = pick_size(&r);
    BENCH_OOM(b[n].p = malloc(sz));
    b[n].sz = (uint32_t)sz;
    memset(b[n].p, 0x5a, sz); /* every page resident */
    bench_stamp(b[n].p, sz, (uint64_t)n);
    bytes += (long)sz;
    n++;
  }
  long peak = bench_rss_kb(), live = 0;
  for (long i = 0; i < n; i++)
    if (bench_rand(&r) % 10) {
      free(b[i].p);
      b[i].p = NULL;
    } else {
      live += b[i].sz;
    }
  long freed = bench_rss_kb();
  printf("idle %d %ld\n", 0, freed);
  double start = bench_now();
  long rss = freed;
  for (long t = step_ms; t <= duration_ms; t += step_ms) {
    double until = start + (double)t / 1000.0;
    for (double now; (now = bench_now()) < until;) {
      double d = until - now;
      struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
      nanosleep(&ts, NULL);
    }
    rss = bench_rss_kb();
    printf("idle %ld %ld\n", t, rss);
  }
  for (long i = 0; i < n; i++)
    if (b[i].p) {
      if (!bench_check(b[i].p, b[i].sz, (uint64_t)i)) BENCH_FAIL("idle: survivor clobbered");
      free(b[i].p);
    }
  free(b);
  char extra[200];
  snprintf(extra, sizeof extra, "live_kb=%ld rss_peak_kb=%ld rss_freed_kb=%ld rss_end_kb=%ld",
           live / 1024, peak, freed, rss);
  bench_result("idle", &A, (double)n, bench_now() - t0, extra);
  return 0;
}
