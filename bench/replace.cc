// replace: the large-block pattern of issue 12. Each thread keeps 20 live
// buffers of 5-25 MiB made by std::make_unique<char[]> (operator new[] and
// a zero fill of every byte) and replaces a random one 200 times (split
// over the threads, times scale), checking a few bytes of the buffer it
// drops. Peak RSS against the live bytes shows how the allocator reuses
// freed large blocks; the zero fill makes every page of a new buffer
// resident.
#include <pthread.h>

#include <atomic>
#include <memory>

#include "bench_common.h"

#define NBUF 20
static struct bench_args A;
static long per_thread;
/* the most bytes live at once over all threads (the old and the new
 * buffer of a replacement both count): what a perfect reuse would need */
static std::atomic<size_t> live, peak_live;

static void live_add(size_t n) {
  size_t now = live.fetch_add(n) + n, peak = peak_live.load();
  while (now > peak && !peak_live.compare_exchange_weak(peak, now)) {
  }
}

static void *worker(void *arg) {
  long t = (long)arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)t);
  std::unique_ptr<char[]> b[NBUF];
  size_t sz[NBUF];
  for (int i = 0; i < NBUF; i++) {
    sz[i] = bench_uniform(&r, 5 << 20, 25 << 20);
    live_add(sz[i]);
    b[i] = std::make_unique<char[]>(sz[i]);
    b[i][sz[i] - 1] = (char)i;
  }
  for (long k = 0; k < per_thread; k++) {
    size_t i = (size_t)(bench_rand(&r) % NBUF);
    if (b[i][0] != 0 || b[i][sz[i] / 2] != 0 || b[i][sz[i] - 1] != (char)i)
      BENCH_FAIL("replace: buffer of %zu B clobbered", sz[i]);
    size_t n = bench_uniform(&r, 5 << 20, 25 << 20);
    live_add(n);
    b[i] = std::make_unique<char[]>(n); /* the old buffer goes after */
    live.fetch_sub(sz[i]);
    sz[i] = n;
    b[i][sz[i] - 1] = (char)i;
  }
  for (int i = 0; i < NBUF; i++) live.fetch_sub(sz[i]);
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  per_thread = bench_scaled(200, A.scale, 4) / A.threads;
  if (per_thread < 4) per_thread = 4;
  double t0 = bench_now();
  bench_join(bench_start(A.threads, worker), A.threads);
  double s = bench_now() - t0;
  char extra[64];
  snprintf(extra, sizeof extra, "peak_live_kb=%zu", peak_live.load() >> 10);
  bench_result("replace", &A, (double)per_thread * A.threads, s, extra);
  return 0;
}
