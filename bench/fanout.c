/* fanout / fanin: one producer feeding N consumers, and N producers
 * feeding one consumer (issue 11). Blocks of 16-512 B travel through one
 * bounded single-producer/single-consumer ring per producer-consumer pair;
 * the receiving thread checks each block (its ring's sequence number and
 * the stamped contents) and frees it, so every free is a remote free.
 *   bench-fanout -t T: 1 producer -> T-1 consumers, round robin over them
 *                      (the producer's spans are freed into by T-1 threads)
 *   bench-fanin  -t T: T-1 producers -> 1 consumer, which polls the rings
 *                      in turn (one thread frees into T-1 threads' spans)
 * threads=1 runs one thread that produces a batch and consumes it;
 * threads=2 is one pair (as prodcons -t 2). Total work = 2*10^7 blocks *
 * scale. fanin.c builds this file with FAN_IN defined. */
#include <pthread.h>
#include "bench_common.h"

#ifdef FAN_IN
#define NAME "fanin"
#else
#define NAME "fanout"
#endif
#define BENCH_RING 512
#define BENCH_NAME NAME
#include "bench_ring.h"

static struct bench_args A;
static struct ring *Q;
static int NQ; /* rings: one per consumer (fanout) or per producer (fanin) */

#ifndef FAN_IN
/* one producer, round robin over the consumers' rings */
static void *producer(void *arg) {
  (void)arg;
  struct bench_rng r = bench_rng_init(A.seed, 0);
  size_t *head = calloc((size_t)NQ, sizeof *head);
  BENCH_OOM(head);
  long per = Q[0].count;
  for (long i = 0; i < per; i++)
    for (int k = 0; k < NQ; k++) ring_put(&Q[k], &head[k], make(&r, k, i));
  free(head);
  return NULL;
}
#else
/* N producers, one ring each; one consumer drains whatever is ready */
static void *producer(void *arg) {
  struct ring *q = arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)q->id);
  size_t head = 0;
  for (long i = 0; i < q->count; i++) ring_put(q, &head, make(&r, q->id, i));
  return NULL;
}
static void *consumer(void *arg) {
  (void)arg;
  size_t *tail = calloc((size_t)NQ, sizeof *tail);
  BENCH_OOM(tail);
  long left = 0;
  for (int k = 0; k < NQ; k++) left += Q[k].count;
  int idle = 0;
  while (left > 0) {
    int got = 0;
    for (int k = 0; k < NQ; k++) {
      struct ring *q = &Q[k];
      size_t head = atomic_load_explicit(&q->head, memory_order_acquire);
      size_t t = tail[k];
      if (head == t) continue;
      for (; t != head; t++) consume(q->slot[t % BENCH_RING], q->id, (long)t);
      atomic_store_explicit(&q->tail, t, memory_order_release);
      left -= (long)(t - tail[k]);
      tail[k] = t;
      got = 1;
    }
    if (got) idle = 0;
    else if (++idle > 64) { sched_yield(); idle = 0; }
  }
  free(tail);
  return NULL;
}
#endif

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  long total = bench_scaled(2e7, A.scale, 1000);
  double t0 = bench_now();
  if (A.threads == 1) {
    ring_single_thread(A.seed, total);
  } else {
    NQ = A.threads - 1;
    Q = ring_array(NQ, &total);
    pthread_t *th = malloc(sizeof *th * (size_t)A.threads);
    BENCH_OOM(th);
#ifndef FAN_IN
    /* thread 0 produces, threads 1..T-1 consume ring k-1 */
    if (pthread_create(&th[0], NULL, producer, NULL)) BENCH_FAIL("pthread_create");
    for (int k = 0; k < NQ; k++)
      if (pthread_create(&th[k + 1], NULL, ring_consumer, &Q[k])) BENCH_FAIL("pthread_create");
#else
    if (pthread_create(&th[0], NULL, consumer, NULL)) BENCH_FAIL("pthread_create");
    for (int k = 0; k < NQ; k++)
      if (pthread_create(&th[k + 1], NULL, producer, &Q[k])) BENCH_FAIL("pthread_create");
#endif
    for (int i = 0; i < A.threads; i++) pthread_join(th[i], NULL);
    for (int k = 0; k < NQ; k++)
      if (atomic_load(&Q[k].tail) != (size_t)Q[k].count) BENCH_FAIL(NAME ": ring %d not drained", k);
    free(Q);
    free(th);
  }
  double s = bench_now() - t0;
  char extra[64];
  snprintf(extra, sizeof extra, "producers=%d consumers=%d",
#ifndef FAN_IN
           1, A.threads > 1 ? A.threads - 1 : 1
#else
           A.threads > 1 ? A.threads - 1 : 1, 1
#endif
  );
  bench_result(NAME, &A, (double)total, s, extra);
  return 0;
}
