/* large: each thread keeps 8 live blocks of log-uniform random size in
 * 64 KiB - 16 MiB and replaces a random one per operation, touching one
 * byte per 4 KiB page of the new block (so page faults, mmap/munmap and
 * the allocator's retention policy all show). Total work = 300 ops *
 * scale. */
#include <pthread.h>
#include "bench_common.h"

#define WS 8
static struct bench_args A;
static long per_thread;

static void fill(unsigned char *p, size_t n, uint64_t tag) {
  for (size_t o = 4096; o + 1 < n; o += 4096) p[o] = (unsigned char)(tag + o / 4096);
  bench_stamp(p, n, tag);
}
static void check(unsigned char *p, size_t n, uint64_t tag) {
  if (!bench_check(p, n, tag)) BENCH_FAIL("large: block of %zu B clobbered", n);
  size_t mid = (n / 2) & ~(size_t)7; /* bench_stamp's middle word */
  for (size_t o = 4096; o + 1 < n; o += 4096 * 16)
    if ((o < mid || o >= mid + 8) && p[o] != (unsigned char)(tag + o / 4096))
      BENCH_FAIL("large: page at +%zu clobbered", o);
}

static void *worker(void *arg) {
  long t = (long)arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)t);
  unsigned char *p[WS] = {0};
  size_t sz[WS] = {0};
  uint64_t tag[WS] = {0};
  for (long i = 0; i < per_thread; i++) {
    size_t k = (size_t)(bench_rand(&r) % WS);
    if (p[k]) {
      check(p[k], sz[k], tag[k]);
      free(p[k]);
    }
    sz[k] = bench_loguniform(&r, 65536, 16 << 20);
    tag[k] = ((uint64_t)t << 40) | (uint64_t)i;
    p[k] = malloc(sz[k]);
    BENCH_OOM(p[k]);
    fill(p[k], sz[k], tag[k]);
  }
  for (int k = 0; k < WS; k++)
    if (p[k]) {
      check(p[k], sz[k], tag[k]);
      free(p[k]);
    }
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  per_thread = bench_scaled(300, A.scale, 4) / A.threads;
  if (per_thread < 4) per_thread = 4;
  double t0 = bench_now();
  bench_join(bench_start(A.threads, worker), A.threads);
  double s = bench_now() - t0;
  bench_result("large", &A, (double)per_thread * A.threads, s, "");
  return 0;
}
