/* stress_mt: several threads allocating random sizes (1 B - 256 KiB) with
 * content checks before every free, objects handed to other threads to free
 * (cross-thread frees), realloc chains, aligned allocations; then a
 * producer/consumer run. Deterministic per-thread seeds; iteration counts,
 * not time. Afterwards stats.allocated is back near its baseline.
 *
 *   stress_mt [mixed|prodcons|realloc|all]   (default all) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { NT = 6, SLOTS = 512 };

typedef struct {
  void *p;
  size_t size;
  uint64_t tag;
} obj_t;

typedef struct {
  pthread_mutex_t mu;
  obj_t *items;
  size_t n, cap;
} inbox_t;

static inbox_t inbox[NT];
static pthread_barrier_t barrier;

static void inbox_push(int to, obj_t o) {
  inbox_t *b = &inbox[to];
  pthread_mutex_lock(&b->mu);
  if (b->n == b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 256;
    obj_t *ni = A_REALLOC(b->items, nc * sizeof *ni);
    CHECK(ni != NULL);
    b->items = ni;
    b->cap = nc;
  }
  b->items[b->n++] = o;
  pthread_mutex_unlock(&b->mu);
}

static void verify_free(obj_t o, const char *why) {
  CHECKF(check_fast(o.p, o.size, o.tag),
         "%s: object %p size %zu tag %jx corrupted", why, o.p, o.size,
         (uintmax_t)o.tag);
  CHECKF(A_USABLE(o.p) >= o.size, "usable %zu < %zu", A_USABLE(o.p), o.size);
  A_FREE(o.p);
}

static size_t inbox_drain(int me) {
  inbox_t *b = &inbox[me];
  pthread_mutex_lock(&b->mu);
  size_t n = b->n;
  obj_t local[64];
  size_t done = 0;
  /* take up to 64 at a time so the lock is not held across frees */
  while (b->n > 0) {
    size_t k = b->n < 64 ? b->n : 64;
    memcpy(local, b->items + b->n - k, k * sizeof(obj_t));
    b->n -= k;
    pthread_mutex_unlock(&b->mu);
    for (size_t i = 0; i < k; i++) verify_free(local[i], "cross-thread free");
    done += k;
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  (void)n;
  return done;
}

static size_t pick_size(rng_t *r) {
  uint64_t k = rng_next(r) % 100;
  if (k < 60) return (size_t)rng_range(r, 1, 256);
  if (k < 85) return (size_t)rng_range(r, 257, 8192);
  if (k < 97) return (size_t)rng_range(r, 8193, 64 * KiB);
  return (size_t)rng_range(r, 64 * KiB + 1, 256 * KiB);
}

static int all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static void *alloc_some(rng_t *r, size_t s) {
  uint64_t k = rng_next(r) % 20;
  void *p = NULL;
  if (k < 13) {
    p = A_MALLOC(s);
  } else if (k < 15) {
    p = A_CALLOC(1, s);
    CHECKF(p && all_zero(p, s), "calloc(1, %zu) not zeroed", s);
  } else if (k < 17) {
    size_t a = (size_t)16 << (rng_next(r) % 9); /* 16 .. 4096 */
    CHECK(A_POSIX_MEMALIGN(&p, a, s) == 0);
    CHECKF(((uintptr_t)p & (a - 1)) == 0, "posix_memalign(%zu) misaligned", a);
  } else if (k < 18) {
    size_t a = (size_t)32 << (rng_next(r) % 8);
    p = A_ALIGNED_ALLOC(a, s);
    CHECKF(p && ((uintptr_t)p & (a - 1)) == 0, "aligned_alloc(%zu)", a);
  } else if (k < 19) {
    p = A_REALLOC(NULL, s);
  } else {
    size_t a = (size_t)64 << (rng_next(r) % 6);
    p = A_MEMALIGN(a, s);
    CHECKF(p && ((uintptr_t)p & (a - 1)) == 0, "memalign(%zu)", a);
  }
  CHECKF(p != NULL, "allocation of %zu failed", s);
  CHECKF(((uintptr_t)p & 15) == 0, "%p not 16-aligned", p);
  return p;
}

static void *mixed_thread(void *arg) {
  int me = (int)(intptr_t)arg;
  rng_t r;
  rng_seed(&r, 1000 + me);
  obj_t slots[SLOTS];
  memset(slots, 0, sizeof slots);
  uint64_t counter = 0;
  long ops = ITERS(120000);
  pthread_barrier_wait(&barrier);
  for (long op = 0; op < ops; op++) {
    obj_t *o = &slots[rng_next(&r) % SLOTS];
    if (o->p == NULL) {
      o->size = pick_size(&r);
      o->tag = ((uint64_t)(me + 1) << 48) | ++counter;
      o->p = alloc_some(&r, o->size);
      fill_fast(o->p, o->size, o->tag);
    } else {
      uint64_t k = rng_next(&r) % 10;
      if (k < 4) {
        verify_free(*o, "local free");
        o->p = NULL;
      } else if (k < 6) {
        CHECKF(check_fast(o->p, o->size, o->tag), "before realloc: %p",
               o->p);
        size_t ns = pick_size(&r);
        void *np = A_REALLOC(o->p, ns);
        CHECKF(np != NULL, "realloc to %zu", ns);
        size_t keep = ns < o->size ? ns : o->size;
        CHECKF(check_fast(np, keep, o->tag),
               "realloc %zu -> %zu lost content", o->size, ns);
        o->p = np;
        o->size = ns;
        fill_fast(np, ns, o->tag);
      } else {
        int to = (int)(rng_next(&r) % (NT - 1));
        if (to >= me) to++;
        inbox_push(to, *o);
        o->p = NULL;
      }
    }
    if ((op & 63) == 0) inbox_drain(me);
  }
  pthread_barrier_wait(&barrier); /* nobody pushes any more */
  inbox_drain(me);
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p) verify_free(slots[i], "final free");
  return NULL;
}

static void run_mixed(void) {
  tcache_flush();
  size_t base = stat_allocated();
  pthread_t t[NT];
  pthread_barrier_init(&barrier, NULL, NT);
  for (int i = 0; i < NT; i++) {
    pthread_mutex_init(&inbox[i].mu, NULL);
    CHECK(pthread_create(&t[i], NULL, mixed_thread, (void *)(intptr_t)i) == 0);
  }
  for (int i = 0; i < NT; i++) CHECK(pthread_join(t[i], NULL) == 0);
  pthread_barrier_destroy(&barrier);
  for (int i = 0; i < NT; i++) {
    CHECK(inbox[i].n == 0);
    A_FREE(inbox[i].items);
    inbox[i].items = NULL;
    inbox[i].cap = 0;
  }
  tcache_flush();
  size_t end = stat_allocated();
  CHECKF(end <= base + 2 * MiB,
         "mixed: stats.allocated %zu before, %zu after every object was "
         "freed and every thread exited", base, end);
  fprintf(stderr, "stress_mt mixed: ok (allocated %zu -> %zu)\n", base, end);
}

/* ---- producer / consumer --------------------------------------------- */
enum { RING = 1024, NPROD = 2, NCONS = 2 };
static struct {
  pthread_mutex_t mu;
  pthread_cond_t not_full, not_empty;
  obj_t q[RING];
  size_t head, tail, count;
  int producers_left;
} ring = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, {{0}}, 0, 0, 0, NPROD};

static void *producer(void *arg) {
  int me = (int)(intptr_t)arg;
  rng_t r;
  rng_seed(&r, 5000 + me);
  long n = ITERS(150000);
  for (long i = 0; i < n; i++) {
    obj_t o;
    o.size = (rng_next(&r) % 50 == 0) ? (size_t)rng_range(&r, 4097, 100 * KiB)
                                      : (size_t)rng_range(&r, 1, 4096);
    o.tag = ((uint64_t)(100 + me) << 48) | (uint64_t)i;
    o.p = A_MALLOC(o.size);
    CHECK(o.p != NULL);
    fill_fast(o.p, o.size, o.tag);
    pthread_mutex_lock(&ring.mu);
    while (ring.count == RING) pthread_cond_wait(&ring.not_full, &ring.mu);
    ring.q[ring.tail] = o;
    ring.tail = (ring.tail + 1) % RING;
    ring.count++;
    pthread_cond_signal(&ring.not_empty);
    pthread_mutex_unlock(&ring.mu);
  }
  pthread_mutex_lock(&ring.mu);
  ring.producers_left--;
  pthread_cond_broadcast(&ring.not_empty);
  pthread_mutex_unlock(&ring.mu);
  return NULL;
}

static void *consumer(void *arg) {
  int me = (int)(intptr_t)arg;
  long got = 0;
  for (;;) {
    pthread_mutex_lock(&ring.mu);
    while (ring.count == 0 && ring.producers_left > 0)
      pthread_cond_wait(&ring.not_empty, &ring.mu);
    if (ring.count == 0) {
      pthread_mutex_unlock(&ring.mu);
      break;
    }
    obj_t o = ring.q[ring.head];
    ring.head = (ring.head + 1) % RING;
    ring.count--;
    pthread_cond_signal(&ring.not_full);
    pthread_mutex_unlock(&ring.mu);
    /* every 7th object: the consumer reallocs it before freeing */
    if (++got % 7 == 0) {
      CHECKF(check_fast(o.p, o.size, o.tag), "consumer %d: corrupted", me);
      size_t ns = o.size * 2 + 1;
      void *np = A_REALLOC(o.p, ns);
      CHECK(np != NULL);
      CHECKF(check_fast(np, o.size, o.tag), "consumer realloc lost content");
      o.p = np;
      o.size = ns;
      fill_fast(np, ns, o.tag);
    }
    verify_free(o, "consumer free");
  }
  return (void *)(intptr_t)got;
}

static void run_prodcons(void) {
  tcache_flush();
  size_t base = stat_allocated();
  pthread_t p[NPROD], c[NCONS];
  for (int i = 0; i < NCONS; i++)
    CHECK(pthread_create(&c[i], NULL, consumer, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < NPROD; i++)
    CHECK(pthread_create(&p[i], NULL, producer, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < NPROD; i++) CHECK(pthread_join(p[i], NULL) == 0);
  long total = 0;
  for (int i = 0; i < NCONS; i++) {
    void *got;
    CHECK(pthread_join(c[i], &got) == 0);
    total += (long)(intptr_t)got;
  }
  CHECK_EQ_I(total, NPROD * ITERS(150000));
  tcache_flush();
  size_t end = stat_allocated();
  CHECKF(end <= base + 2 * MiB,
         "prodcons: stats.allocated %zu before, %zu after", base, end);
  fprintf(stderr, "stress_mt prodcons: ok (allocated %zu -> %zu)\n", base,
          end);
}

/* ---- realloc chains ---------------------------------------------------- */
static void *realloc_chain(void *arg) {
  int me = (int)(intptr_t)arg;
  rng_t r;
  rng_seed(&r, 9000 + me);
  int rounds = (int)ITERS(30);
  for (int round = 0; round < rounds; round++) {
    uint64_t tag = ((uint64_t)(200 + me) << 48) | (uint64_t)round;
    unsigned char *p = NULL;
    size_t cur = 0;
    size_t s = 1;
    /* grow to ~2 MiB, then shrink back */
    while (s < 2 * MiB) {
      unsigned char *np = A_REALLOC(p, s);
      CHECKF(np != NULL, "realloc(%zu)", s);
      if (p) CHECKF(check_fast(np, cur, tag), "grow %zu -> %zu lost content",
                    cur, s);
      p = np;
      fill_fast(p, s, tag);
      cur = s;
      s = s + s / 3 + (size_t)rng_range(&r, 1, 64);
      /* something else in between, freed later by this thread */
      void *junk = A_MALLOC((size_t)rng_range(&r, 1, 2000));
      A_FREE(junk);
    }
    while (s > 1) {
      s = s / 2 + (size_t)rng_range(&r, 0, 3);
      if (s >= cur) s = cur - 1;
      if (s == 0) break;
      unsigned char *np = A_REALLOC(p, s);
      CHECKF(np != NULL, "realloc(%zu)", s);
      CHECKF(check_fast(np, s, tag), "shrink %zu -> %zu lost content", cur,
             s);
      p = np;
      cur = s;
      fill_fast(p, s, tag);
    }
    A_FREE(p);
  }
  return NULL;
}

static void run_realloc(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    CHECK(pthread_create(&t[i], NULL, realloc_chain, (void *)(intptr_t)i) ==
          0);
  for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
  fprintf(stderr, "stress_mt realloc: ok\n");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  bool all = strcmp(mode, "all") == 0;
  fprintf(stderr, "stress_mt: mode %s, %s\n", mode, A_MODE);
  if (all || strcmp(mode, "mixed") == 0) run_mixed();
  if (all || strcmp(mode, "prodcons") == 0) run_prodcons();
  if (all || strcmp(mode, "realloc") == 0) run_realloc();
  printf("stress_mt: ok\n");
  return 0;
}
