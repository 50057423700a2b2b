/* xmix: mixed sizes across threads (issue 11; in the manner of rpmalloc's
 * benchmark). Threads form a ring: thread t hands blocks to thread t+1.
 * Every operation allocates a block of log-uniform size 8 B - 16 KiB and
 * stamps it; half of the blocks (chosen at random) go to the next
 * thread's inbox, the others replace a random one of the thread's 1024
 * local blocks (whose old occupant is checked and freed here). Each thread
 * drains its inbox (checks and frees what the previous thread sent) after
 * every operation and while it waits for room, so about half of all frees
 * are frees of another thread's blocks, of every size. threads=1 hands the
 * blocks to itself. Total work = 6*10^6 ops * scale. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include "bench_common.h"

#define RING 256
#define LOCAL 1024
struct msg {
  unsigned char *p;
  size_t sz;
  uint64_t tag;
};
struct box {
  _Alignas(64) _Atomic size_t head; /* written by the sender (thread t-1) */
  _Alignas(64) _Atomic size_t tail; /* written by the receiver (thread t) */
  _Alignas(64) _Atomic int sender_done;
  size_t received;
  struct msg slot[RING];
};
static struct bench_args A;
static struct box *B;
static long per_thread;

static void check_free(unsigned char *p, size_t sz, uint64_t tag, const char *what) {
  if (!bench_check(p, sz, tag)) BENCH_FAIL("xmix: %s block of %zu B clobbered", what, sz);
  free(p);
}
/* receiver side: check and free what is in the inbox; 1 if anything */
static int drain(struct box *in) {
  size_t head = atomic_load_explicit(&in->head, memory_order_acquire);
  size_t t = atomic_load_explicit(&in->tail, memory_order_relaxed);
  if (head == t) return 0;
  for (; t != head; t++) {
    struct msg *m = &in->slot[t % RING];
    check_free(m->p, m->sz, m->tag, "received");
  }
  in->received += head - atomic_load_explicit(&in->tail, memory_order_relaxed);
  atomic_store_explicit(&in->tail, t, memory_order_release);
  return 1;
}

static void *worker(void *arg) {
  long t = (long)arg;
  struct box *in = &B[t], *out = &B[(t + 1) % A.threads];
  struct bench_rng r = bench_rng_init(A.seed, (uint64_t)t);
  unsigned char **lp = calloc(LOCAL, sizeof *lp);
  size_t *lsz = calloc(LOCAL, sizeof *lsz);
  uint64_t *ltag = calloc(LOCAL, sizeof *ltag);
  BENCH_OOM(lp);
  BENCH_OOM(lsz);
  BENCH_OOM(ltag);
  size_t head = 0;
  long sent = 0;
  for (long i = 0; i < per_thread; i++) {
    uint64_t x = bench_rand(&r);
    size_t sz = bench_loguniform(&r, 8, 16384);
    uint64_t tag = ((uint64_t)t << 40) | (uint64_t)i;
    unsigned char *p = malloc(sz);
    BENCH_OOM(p);
    bench_stamp(p, sz, tag);
    if (x & 1) {
      int spins = 0;
      while (head - atomic_load_explicit(&out->tail, memory_order_acquire) >= RING)
        if (!drain(in) && ++spins > 64) { sched_yield(); spins = 0; }
      out->slot[head % RING] = (struct msg){p, sz, tag};
      atomic_store_explicit(&out->head, ++head, memory_order_release);
      sent++;
    } else {
      size_t k = (size_t)((x >> 1) % LOCAL);
      if (lp[k]) check_free(lp[k], lsz[k], ltag[k], "local");
      lp[k] = p;
      lsz[k] = sz;
      ltag[k] = tag;
    }
    drain(in);
  }
  for (size_t k = 0; k < LOCAL; k++)
    if (lp[k]) check_free(lp[k], lsz[k], ltag[k], "local");
  free(lp);
  free(lsz);
  free(ltag);
  atomic_store_explicit(&out->sender_done, 1, memory_order_release);
  /* keep draining until the previous thread is done and its blocks freed */
  int spins = 0;
  for (;;) {
    int done = atomic_load_explicit(&in->sender_done, memory_order_acquire);
    if (!drain(in)) {
      if (done && atomic_load_explicit(&in->head, memory_order_acquire) ==
                      atomic_load_explicit(&in->tail, memory_order_relaxed))
        break;
      if (++spins > 64) { sched_yield(); spins = 0; }
    }
  }
  return (void *)sent;
}

int main(int argc, char **argv) {
  A = bench_parse(argc, argv);
  per_thread = bench_scaled(6e6, A.scale, 1000) / A.threads;
  B = aligned_alloc(64, sizeof *B * (size_t)A.threads);
  pthread_t *th = malloc(sizeof *th * (size_t)A.threads);
  BENCH_OOM(B);
  BENCH_OOM(th);
  memset(B, 0, sizeof *B * (size_t)A.threads);
  double t0 = bench_now();
  for (long t = 0; t < A.threads; t++)
    if (pthread_create(&th[t], NULL, worker, (void *)t)) BENCH_FAIL("pthread_create");
  long sent = 0;
  for (long t = 0; t < A.threads; t++) {
    void *v;
    pthread_join(th[t], &v);
    sent += (long)v;
  }
  double s = bench_now() - t0;
  long received = 0;
  for (long t = 0; t < A.threads; t++) received += (long)B[t].received;
  if (received != sent) BENCH_FAIL("xmix: %ld blocks sent, %ld received", sent, received);
  free(B);
  free(th);
  char extra[64];
  snprintf(extra, sizeof extra, "handed=%ld", sent);
  bench_result("xmix", &A, (double)per_thread * A.threads, s, extra);
  return 0;
}
