/* prodcons: producer/consumer pairs hand blocks (16-512 B) across threads
 * through bounded single-producer/single-consumer rings; the consumer
 * checks each block and frees it, so every free is a remote free.
 * threads=1 runs one thread that produces a batch and consumes it;
 * threads=T>=2 runs T/2 pairs. Total work = 2*10^7 blocks * scale. */
#include <pthread.h>
#include "bench_common.h"

#define BENCH_RING 1024
#define BENCH_NAME "prodcons"
#include "bench_ring.h"

static struct bench_args A;

static void *producer(void *arg) {
  struct ring *q = arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)q->id);
  size_t head = 0;
  for (long i = 0; i < q->count; i++) ring_put(q, &head, make(&r, q->id, i));
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  long total = bench_scaled(2e7, A.scale, 1000);
  double t0 = bench_now();
  if (A.threads == 1) {
    ring_single_thread(A.seed, total);
  } else {
    int pairs = A.threads / 2;
    struct ring *q = ring_array(pairs, &total);
    pthread_t *th = malloc(sizeof *th * 2 * (size_t)pairs);
    BENCH_OOM(th);
    for (int i = 0; i < pairs; i++) {
      if (pthread_create(&th[2 * i], NULL, producer, &q[i]) ||
          pthread_create(&th[2 * i + 1], NULL, ring_consumer, &q[i]))
        BENCH_FAIL("pthread_create");
    }
    for (int i = 0; i < 2 * pairs; i++) pthread_join(th[i], NULL);
    free(q);
    free(th);
  }
  double s = bench_now() - t0;
  bench_result("prodcons", &A, (double)total, s, "");
  return 0;
}
