/* remote_free.c -- the cross-thread free path of the small-object engine
 * (a block freed by a thread other than its span's owner goes through the
 * span's remote bitmap; a full span is announced to its owner; spans of
 * exited threads are adopted by others). Every block carries a pattern
 * checked before it is freed, so a block handed out twice shows up.
 *
 *   remote_free [many_to_one|one_to_many|adopt|exit_race|fork|all]
 *
 * many_to_one  4 producers, 1 consumer that frees everything they make
 * one_to_many  1 producer, 3 consumers freeing into its spans at once
 * adopt        a thread exits with its blocks still live elsewhere; once
 *              they are freed, a new thread of the arena reuses the pages
 * exit_race    threads exit while others free their blocks
 * fork         fork while remote frees are in flight; children allocate */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "check.h"

#define RING 4096

typedef struct {
  _Atomic(void *) slot[RING];
  _Atomic size_t head, tail; /* multi-producer: head is claimed with CAS */
} ring_t;

static bool ring_put(ring_t *r, void *p) {
  size_t h = atomic_load(&r->head);
  for (;;) {
    if (h - atomic_load(&r->tail) >= RING) return false;
    if (atomic_compare_exchange_weak(&r->head, &h, h + 1)) break;
  }
  void *expect = NULL;
  while (!atomic_compare_exchange_weak(&r->slot[h % RING], &expect, p)) expect = NULL;
  return true;
}

static void *ring_get(ring_t *r) {
  size_t t = atomic_load(&r->tail);
  for (;;) {
    if (t == atomic_load(&r->head)) return NULL;
    if (atomic_compare_exchange_weak(&r->tail, &t, t + 1)) break;
  }
  void *p;
  while ((p = atomic_exchange(&r->slot[t % RING], NULL)) == NULL) sched_yield();
  return p;
}

/* A block: its size in the first 8 bytes, then a pattern. */
static void *make(rng_t *g) {
  size_t sz = 16 + (size_t)rng_range(g, 0, 1000);
  unsigned char *p = A_MALLOC(sz);
  CHECK(p != NULL);
  memcpy(p, &sz, 8);
  fill_pattern(p + 8, sz - 8, (uint64_t)sz);
  return p;
}

static void check_and_free(void *v) {
  unsigned char *p = v;
  size_t sz;
  memcpy(&sz, p, 8);
  CHECKF(sz >= 16 && sz <= 1016, "block %p has a bad size word %zu", v, sz);
  CHECKF(check_pattern(p + 8, sz - 8, (uint64_t)sz) == (size_t)-1,
         "block %p (%zu B) was overwritten: handed out twice?", v, sz);
  A_FREE(p);
}

/* ---- many producers, one consumer, and the reverse -------------------- */
static ring_t ring;
static _Atomic int producers_left;
static long per_producer;

static void *producer(void *arg) {
  rng_t g;
  rng_seed(&g, (uint64_t)(uintptr_t)arg);
  for (long i = 0; i < per_producer; i++) {
    void *p = make(&g);
    while (!ring_put(&ring, p)) sched_yield();
    /* and some local churn, so the producer's spans run dry and refill
     * from what the consumer freed */
    if (i % 8 == 0) check_and_free(make(&g));
  }
  atomic_fetch_sub(&producers_left, 1);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    void *p = ring_get(&ring);
    if (p != NULL) {
      check_and_free(p);
    } else if (atomic_load(&producers_left) == 0) {
      if ((p = ring_get(&ring)) == NULL) return NULL;
      check_and_free(p);
    } else {
      sched_yield();
    }
  }
}

static void run_ring(int np, int nc, long items) {
  pthread_t t[16];
  per_producer = items / np;
  atomic_store(&producers_left, np);
  for (int i = 0; i < np; i++)
    CHECK(pthread_create(&t[i], NULL, producer, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < nc; i++) CHECK(pthread_create(&t[np + i], NULL, consumer, NULL) == 0);
  for (int i = 0; i < np + nc; i++) CHECK(pthread_join(t[i], NULL) == 0);
  CHECK(atomic_load(&ring.head) == atomic_load(&ring.tail));
}

/* ---- adoption ----------------------------------------------------------- */
enum { ADOPT_N = 20000, ADOPT_SIZE = 200 };
static void *adopt_blocks[ADOPT_N];

static void *adopt_maker(void *arg) {
  (void)arg;
  set_thread_arena(0); /* the user below is on the same arena */
  for (int i = 0; i < ADOPT_N; i++) {
    adopt_blocks[i] = A_MALLOC(ADOPT_SIZE);
    CHECK(adopt_blocks[i] != NULL);
    memset(adopt_blocks[i], 0x5a, ADOPT_SIZE);
  }
  return NULL; /* exits with every block still live */
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* Whether p lies in a page one of the (sorted) old blocks lay in. */
static bool on_old_page(const uintptr_t *pages, size_t n, void *p) {
  uintptr_t pg = (uintptr_t)p & ~(uintptr_t)4095;
  return bsearch(&pg, pages, n, sizeof *pages, cmp_ptr) != NULL;
}

static uintptr_t *old_pages;
static size_t nold;
static _Atomic int reused;

static void *adopt_user(void *arg) {
  (void)arg;
  set_thread_arena(0);
  int on_old = 0;
  void **v = A_MALLOC(sizeof(void *) * ADOPT_N);
  CHECK(v != NULL);
  for (int i = 0; i < ADOPT_N; i++) {
    v[i] = A_MALLOC(ADOPT_SIZE);
    CHECK(v[i] != NULL);
    on_old += on_old_page(old_pages, nold, v[i]);
  }
  for (int i = 0; i < ADOPT_N; i++) A_FREE(v[i]);
  A_FREE(v);
  atomic_store(&reused, on_old);
  return NULL;
}

static void run_adopt(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, adopt_maker, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  old_pages = malloc(sizeof *old_pages * ADOPT_N);
  CHECK(old_pages != NULL);
  for (int i = 0; i < ADOPT_N; i++) {
    unsigned char *p = adopt_blocks[i];
    CHECK(p[0] == 0x5a && p[ADOPT_SIZE - 1] == 0x5a);
    old_pages[nold++] = (uintptr_t)p & ~(uintptr_t)4095;
  }
  qsort(old_pages, nold, sizeof *old_pages, cmp_ptr);
  /* free them from this thread, which does not own their spans */
  for (int i = 0; i < ADOPT_N; i++) A_FREE(adopt_blocks[i]);
  /* a new thread on the same arena allocates as many: it must get them
   * from the abandoned spans or their pages (or, after the other modes,
   * from spans earlier threads left), never from fresh memory */
  size_t m0 = stat_mapped();
  CHECK(pthread_create(&t, NULL, adopt_user, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  size_t m1 = stat_mapped();
  fprintf(stderr, "remote_free adopt: %d of %d blocks on the exited thread's pages; "
          "mapped %zu -> %zu\n", atomic_load(&reused), ADOPT_N, m0, m1);
  CHECKF(m1 <= m0 + ADOPT_N * ADOPT_SIZE / 8,
         "mapped grew by %zu bytes for %d blocks that had room in the exited thread's "
         "spans", m1 - m0, ADOPT_N);
  free(old_pages);
}

/* ---- threads exiting while others free their blocks ------------------- */
static void *short_lived(void *arg) {
  rng_t g;
  rng_seed(&g, (uint64_t)(uintptr_t)arg);
  for (int i = 0; i < 300; i++) {
    void *p = make(&g);
    while (!ring_put(&ring, p)) sched_yield();
  }
  return NULL;
}

static void run_exit_race(int rounds) {
  pthread_t c[2];
  atomic_store(&producers_left, 1);
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&c[i], NULL, consumer, NULL) == 0);
  for (int r = 0; r < rounds; r++) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
      CHECK(pthread_create(&t[i], NULL, short_lived, (void *)(uintptr_t)(r * 4 + i + 1)) == 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
  }
  atomic_store(&producers_left, 0);
  for (int i = 0; i < 2; i++) CHECK(pthread_join(c[i], NULL) == 0);
}

/* ---- fork while remote frees are in flight ---------------------------- */
static _Atomic bool fork_stop;

static void *fork_churn(void *arg) {
  rng_t g;
  rng_seed(&g, (uint64_t)(uintptr_t)arg);
  while (!atomic_load(&fork_stop)) {
    void *p = make(&g);
    if (!ring_put(&ring, p)) check_and_free(p);
    if ((p = ring_get(&ring)) != NULL) check_and_free(p);
  }
  return NULL;
}

static void run_fork(int nforks) {
  pthread_t t[3];
  atomic_store(&fork_stop, false);
  for (int i = 0; i < 3; i++)
    CHECK(pthread_create(&t[i], NULL, fork_churn, (void *)(uintptr_t)(i + 100)) == 0);
  for (int k = 0; k < nforks; k++) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      alarm(20);
      rng_t g;
      rng_seed(&g, (uint64_t)k);
      /* free what the parent's threads left in the ring, allocate again;
       * ring_get would wait forever for a slot a parent thread had
       * claimed but not filled when fork came, so take the slots as
       * they are */
      for (int i = 0; i < RING; i++) {
        void *p = atomic_exchange(&ring.slot[i], NULL);
        if (p != NULL) check_and_free(p);
      }
      void *v[500];
      for (int i = 0; i < 500; i++) v[i] = make(&g);
      for (int i = 0; i < 500; i++) check_and_free(v[i]);
      _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child %d: status %#x", k, st);
  }
  atomic_store(&fork_stop, true);
  for (int i = 0; i < 3; i++) CHECK(pthread_join(t[i], NULL) == 0);
  void *p;
  while ((p = ring_get(&ring)) != NULL) check_and_free(p);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  bool all = strcmp(mode, "all") == 0;
  size_t a0 = stat_allocated();
  if (all || strcmp(mode, "many_to_one") == 0) run_ring(4, 1, ITERS(400000));
  if (all || strcmp(mode, "one_to_many") == 0) run_ring(1, 3, ITERS(400000));
  if (all || strcmp(mode, "adopt") == 0) run_adopt();
  if (all || strcmp(mode, "exit_race") == 0) run_exit_race((int)ITERS(200));
  if (all || strcmp(mode, "fork") == 0) run_fork(CHECK_TSAN ? 10 : 200);
  size_t a1 = stat_allocated();
  CHECKF(a1 <= a0 + 256 * 1024, "stats.allocated %zu -> %zu after every block was freed",
         a0, a1);
  printf("remote_free %s: ok (%s)\n", mode, A_MODE);
  return 0;
}
