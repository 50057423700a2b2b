/* prodcons: producer/consumer pairs hand blocks (16-512 B) across threads
 * through bounded single-producer/single-consumer rings; the consumer
 * checks each block and frees it, so every free is a remote free.
 * threads=1 runs one thread that produces a batch and consumes it;
 * threads=T>=2 runs T/2 pairs. Total work = 2*10^7 blocks * scale. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include "bench_common.h"

#define RING 1024
struct ring {
  _Alignas(64) _Atomic size_t head; /* written by the producer */
  _Alignas(64) _Atomic size_t tail; /* written by the consumer */
  _Alignas(64) unsigned char *slot[RING];
  long count;
  int id;
};
static struct bench_args A;

static unsigned char *make(struct bench_rng *r, int id, long i) {
  size_t sz = bench_uniform(r, 16, 512);
  unsigned char *p = malloc(sz);
  BENCH_OOM(p);
  uint64_t hdr[2] = {sz, ((uint64_t)id << 40) | (uint64_t)i};
  memcpy(p, hdr, 16);
  bench_stamp(p + 16, sz - 16, hdr[1]);
  return p;
}
static void consume(unsigned char *p, int id, long i) {
  uint64_t hdr[2];
  memcpy(hdr, p, 16);
  if (hdr[1] != (((uint64_t)id << 40) | (uint64_t)i)) BENCH_FAIL("prodcons: block out of order or clobbered");
  if (hdr[0] < 16 || hdr[0] > 512 || !bench_check(p + 16, hdr[0] - 16, hdr[1]))
    BENCH_FAIL("prodcons: block contents clobbered");
  free(p);
}

static void *producer(void *arg) {
  struct ring *q = arg;
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)q->id);
  size_t head = 0;
  for (long i = 0; i < q->count; i++) {
    unsigned char *p = make(&r, q->id, i);
    int spins = 0;
    while (head - atomic_load_explicit(&q->tail, memory_order_acquire) >= RING)
      if (++spins > 64) { sched_yield(); spins = 0; }
    q->slot[head % RING] = p;
    atomic_store_explicit(&q->head, ++head, memory_order_release);
  }
  return NULL;
}
static void *consumer(void *arg) {
  struct ring *q = arg;
  size_t tail = 0;
  for (long i = 0; i < q->count; i++) {
    int spins = 0;
    while (atomic_load_explicit(&q->head, memory_order_acquire) == tail)
      if (++spins > 64) { sched_yield(); spins = 0; }
    consume(q->slot[tail % RING], q->id, i);
    atomic_store_explicit(&q->tail, ++tail, memory_order_release);
  }
  return NULL;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  long total = bench_scaled(2e7, A.scale, 1000);
  double t0 = bench_now();
  if (A.threads == 1) {
    struct bench_rng r = bench_rng_init(A.seed, 0);
    unsigned char *batch[RING];
    for (long done = 0; done < total;) {
      long n = total - done < RING ? total - done : RING;
      for (long i = 0; i < n; i++) batch[i] = make(&r, 0, done + i);
      for (long i = 0; i < n; i++) consume(batch[i], 0, done + i);
      done += n;
    }
  } else {
    int pairs = A.threads / 2;
    struct ring *q = aligned_alloc(64, sizeof *q * (size_t)pairs);
    pthread_t *th = malloc(sizeof *th * 2 * (size_t)pairs);
    BENCH_OOM(q);
    BENCH_OOM(th);
    memset(q, 0, sizeof *q * (size_t)pairs);
    total = total / pairs * pairs;
    for (int i = 0; i < pairs; i++) {
      q[i].count = total / pairs;
      q[i].id = i;
      if (pthread_create(&th[2 * i], NULL, producer, &q[i]) ||
          pthread_create(&th[2 * i + 1], NULL, consumer, &q[i]))
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
