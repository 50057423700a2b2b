/* small: fast-path cost. Each thread allocates batches of 64 small blocks
 * of fixed sizes (8-256 B, cycling), writes and checks them, and frees the
 * batch; nearly every operation should be served by the thread cache.
 * Total work = 8*10^7 malloc+free pairs * scale. ns_per_op is per pair. */
#include <pthread.h>
#include "bench_common.h"

static const size_t sizes[8] = {8, 16, 32, 48, 64, 96, 128, 256};
static struct bench_args A;
static long per_thread;

static void *worker(void *arg) {
  long t = (long)arg;
  unsigned char *b[64];
  for (long done = 0; done < per_thread; done += 64) {
    for (int i = 0; i < 64; i++) {
      b[i] = malloc(sizes[i & 7]);
      BENCH_OOM(b[i]);
      b[i][0] = (unsigned char)(i + t);
      b[i][sizes[i & 7] - 1] = (unsigned char)(i ^ 0x5a);
    }
    for (int i = 0; i < 64; i++) {
      if (b[i][0] != (unsigned char)(i + t) || b[i][sizes[i & 7] - 1] != (unsigned char)(i ^ 0x5a))
        BENCH_FAIL("small: block %d clobbered", i);
      free(b[i]);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  long total = bench_scaled(8e7, A.scale, 6400);
  per_thread = (total / A.threads + 63) / 64 * 64;
  double t0 = bench_now();
  bench_join(bench_start(A.threads, worker), A.threads);
  double s = bench_now() - t0;
  bench_result("small", &A, (double)per_thread * A.threads, s, "");
  return 0;
}
