/* bench_ring.h -- what prodcons, fanout and fanin share: the blocks they
 * hand across threads (16-512 B; a header {size, id << 40 | sequence}
 * and stamped contents, made by the producer, checked and freed by the
 * receiver, so every free is a remote free), and the bounded
 * single-producer/single-consumer ring they travel through.
 *
 * Define BENCH_RING (slots per ring) and BENCH_NAME (for messages) before
 * including it, after bench_common.h. */
#ifndef BENCH_RING_H
#define BENCH_RING_H

#include <sched.h>
#include <stdatomic.h>

struct ring {
  _Alignas(64) _Atomic size_t head; /* written by the producer */
  _Alignas(64) _Atomic size_t tail; /* written by the consumer */
  _Alignas(64) unsigned char *slot[BENCH_RING];
  long count; /* blocks that travel through this ring */
  int id;
};

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
  if (hdr[1] != (((uint64_t)id << 40) | (uint64_t)i))
    BENCH_FAIL(BENCH_NAME ": block out of order or clobbered");
  if (hdr[0] < 16 || hdr[0] > 512 || !bench_check(p + 16, hdr[0] - 16, hdr[1]))
    BENCH_FAIL(BENCH_NAME ": block contents clobbered");
  free(p);
}

/* The producer's side: waits for room, then publishes p. */
static void ring_put(struct ring *q, size_t *head, unsigned char *p) {
  int spins = 0;
  while (*head - atomic_load_explicit(&q->tail, memory_order_acquire) >= BENCH_RING)
    if (++spins > 64) { sched_yield(); spins = 0; }
  q->slot[*head % BENCH_RING] = p;
  atomic_store_explicit(&q->head, ++*head, memory_order_release);
}

/* The consumer's side of one ring: every block it carries, in order. */
__attribute__((unused)) static void *ring_consumer(void *arg) {
  struct ring *q = arg;
  size_t tail = 0;
  for (long i = 0; i < q->count; i++) {
    int spins = 0;
    while (atomic_load_explicit(&q->head, memory_order_acquire) == tail)
      if (++spins > 64) { sched_yield(); spins = 0; }
    consume(q->slot[tail % BENCH_RING], q->id, i);
    atomic_store_explicit(&q->tail, ++tail, memory_order_release);
  }
  return NULL;
}

/* n zeroed rings with ids 0..n-1 sharing *total blocks evenly (*total is
 * rounded down to a multiple of n). */
static struct ring *ring_array(int n, long *total) {
  struct ring *q = aligned_alloc(64, sizeof *q * (size_t)n);
  BENCH_OOM(q);
  memset(q, 0, sizeof *q * (size_t)n);
  *total = *total / n * n;
  for (int i = 0; i < n; i++) {
    q[i].count = *total / n;
    q[i].id = i;
  }
  return q;
}

/* threads=1: one thread makes a ring's worth of blocks, then frees them. */
static void ring_single_thread(uint64_t seed, long total) {
  struct bench_rng r = bench_rng_init(seed, 0);
  unsigned char *batch[BENCH_RING];
  for (long done = 0; done < total;) {
    long n = total - done < BENCH_RING ? total - done : BENCH_RING;
    for (long i = 0; i < n; i++) batch[i] = make(&r, 0, done + i);
    for (long i = 0; i < n; i++) consume(batch[i], 0, done + i);
    done += n;
  }
}

#endif
