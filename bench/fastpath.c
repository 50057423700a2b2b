/* fastpath: the cost of one small malloc+free pair on the thread-cache
 * fast path. One thread, a fixed number of iterations (-n, default
 * 2*10^8 * scale) of malloc(size) + write + free(size) (-z, default 32).
 * Run it twice under callgrind with two iteration counts and subtract to
 * get instructions per pair (bench/run does that). */
#include "bench_common.h"

int main(int argc, char **argv) {
  struct bench_args a = bench_parse(argc, argv);
  long n = a.iters > 0 ? a.iters : bench_scaled(2e8, a.scale, 1000);
  size_t size = a.size > 0 ? (size_t)a.size : 32;
  /* warm up: first call initialises the allocator and the thread cache */
  for (int i = 0; i < 1000; i++) {
    void *p = malloc(size);
    BENCH_OOM(p);
    bench_escape(p);
    free(p);
  }
  double t0 = bench_now();
  for (long i = 0; i < n; i++) {
    unsigned char *p = malloc(size);
    if (__builtin_expect(!p, 0)) BENCH_FAIL("fastpath: malloc returned NULL");
    p[0] = (unsigned char)i;
    bench_escape(p);
    if (p[0] != (unsigned char)i) BENCH_FAIL("fastpath: byte clobbered");
    free(p);
  }
  double s = bench_now() - t0;
  char extra[48];
  snprintf(extra, sizeof extra, "size=%zu", size);
  bench_result("fastpath", &a, (double)n, s, extra);
  return 0;
}
