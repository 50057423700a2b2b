/* simple: glibc's bench-malloc-simple loop, single thread: malloc a batch
 * of n blocks of one size, then free them in the order they were
 * allocated, for n = 1, 25, 100, 400 and 1600 (-n: one n only). Where
 * bench-fastpath frees each block at once (the same slot again), a batch
 * frees runs of neighbouring slots, across bitmap words and spans. One
 * RESULT line per n; ns_per_op is per malloc+free pair. Total pairs per
 * n: 2*10^8 * scale (-s). Not a workload of bench/run. */
#include "bench_common.h"

static void run(const struct bench_args *a, long n, size_t size) {
  long iters = bench_scaled(2e8, a->scale, 1000) / n;
  if (iters < 1) iters = 1;
  void **b = malloc(sizeof *b * (size_t)n);
  BENCH_OOM(b);
  double t0 = bench_now();
  for (long k = 0; k < iters; k++) {
    for (long i = 0; i < n; i++) {
      unsigned char *p = malloc(size);
      if (__builtin_expect(!p, 0)) BENCH_FAIL("simple: malloc returned NULL");
      p[0] = (unsigned char)i;
      b[i] = p;
    }
    bench_escape(b);
    for (long i = 0; i < n; i++) {
      if (((unsigned char *)b[i])[0] != (unsigned char)i) BENCH_FAIL("simple: byte clobbered");
      free(b[i]);
    }
  }
  double s = bench_now() - t0;
  free(b);
  char extra[64];
  snprintf(extra, sizeof extra, "n=%ld size=%zu", n, size);
  bench_result("simple", a, (double)iters * (double)n, s, extra);
}

int main(int argc, char **argv) {
  struct bench_args a = bench_parse(argc, argv);
  size_t size = a.size > 0 ? (size_t)a.size : 32;
  static const long ns[] = {1, 25, 100, 400, 1600};
  for (unsigned k = 0; k < sizeof ns / sizeof ns[0]; k++)
    if (a.iters <= 0 || a.iters == ns[k]) run(&a, ns[k], size);
  if (a.iters > 0 && a.iters != 1 && a.iters != 25 && a.iters != 100 && a.iters != 400 &&
      a.iters != 1600)
    run(&a, a.iters, size);
  return 0;
}
