/* larson: server-like churn. All threads share one pool of slots; each
 * operation puts a new block of random size (16-1024 B) into a random slot
 * and frees the block it displaces, which was most likely allocated by
 * another thread (cross-thread frees, as in Larson & Krishnan's benchmark).
 * Every block carries its size and tag so the freeing thread can check it.
 * Total work = 3*10^7 ops * scale. */
#include <pthread.h>
#include <stdatomic.h>
#include "bench_common.h"

#define SLOTS_PER_THREAD 2048
static _Atomic(unsigned char *) *pool;
static size_t npool;
static long per_thread;
static struct bench_args A;

static void check_free(unsigned char *p) {
  uint64_t hdr[2];
  memcpy(hdr, p, 16);
  if (hdr[0] < 16 || hdr[0] > 1024) BENCH_FAIL("larson: block header size %llu", (unsigned long long)hdr[0]);
  if (!bench_check(p + 16, hdr[0] - 16, hdr[1])) BENCH_FAIL("larson: block contents clobbered");
  free(p);
}

static void *worker(void *arg) {
  long t = (long)arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)t);
  for (long i = 0; i < per_thread; i++) {
    size_t sz = bench_uniform(&r, 16, 1024);
    unsigned char *p = malloc(sz);
    BENCH_OOM(p);
    uint64_t hdr[2] = {sz, ((uint64_t)t << 40) | (uint64_t)i};
    memcpy(p, hdr, 16);
    bench_stamp(p + 16, sz - 16, hdr[1]);
    size_t slot = (size_t)(bench_rand(&r) % npool);
    unsigned char *old = atomic_exchange_explicit(&pool[slot], p, memory_order_acq_rel);
    if (old) check_free(old);
  }
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  long total = bench_scaled(3e7, A.scale, 1000);
  per_thread = total / A.threads;
  npool = (size_t)A.threads * SLOTS_PER_THREAD;
  pool = calloc(npool, sizeof *pool);
  BENCH_OOM(pool);
  double t0 = bench_now();
  bench_join(bench_start(A.threads, worker), A.threads);
  for (size_t i = 0; i < npool; i++)
    if (pool[i]) check_free(pool[i]);
  double s = bench_now() - t0;
  free(pool);
  bench_result("larson", &A, (double)per_thread * A.threads, s, "");
  return 0;
}
