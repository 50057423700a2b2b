/* unit_base.c -- the metadata allocator (alloc/base.c) against a model of
 * the blocks the test holds:
 * - every block is non-NULL, 16-byte aligned, and starts on a cache line
 *   when its size is a multiple of 64 (what base.h promises), including
 *   blocks recycled from a free list;
 * - every block reads as zero when handed out, recycled ones included
 *   (the test fills each block before freeing it);
 * - no two live blocks overlap: each block carries a pattern of its own
 *   over all its bytes, checked before it is freed, from 4 threads at
 *   once, and at the end all threads' blocks are sorted and compared;
 * - freed blocks are reused: freeing k blocks of one size and asking for
 *   k more of it gives the same k addresses back (free lists, not the
 *   bump pointer), and a block bigger than BASE_MAX (64 KiB, mapped
 *   directly) moves base_stats_mapped by its page-rounded size both ways;
 * - base_alloc_purgeable's blocks of a page or more (page runs; half of
 *   the threads' blocks come from it) start on a page, and freeing
 *   more of them than the 256 KiB kept resident (BASE_WARM) lowers
 *   base_stats_resident by at least the excess (their pages go back to
 *   the kernel), while reused ones still read zero.
 * Linked with the engine's objects (nalloc's own base allocator; nalloc
 * boots first so that nothing else is under way in it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "nalloc.h"
#include "types.h"

#include "../check_core.h"

typedef struct {
  unsigned char *p;
  size_t size;
  unsigned char pat;
  bool purgeable; /* from base_alloc_purgeable */
} blk_t;

enum { NTHREADS = 4, MAXLIVE = 600, NOPS = 30000 };
static blk_t live[NTHREADS][MAXLIVE];
static size_t nlive[NTHREADS];

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Sizes: mostly small metadata records, some multiples of 64, a few
 * past BASE_MAX (64 KiB) that are mapped on their own. */
static size_t pick_size(uint64_t *s) {
  uint64_t r = rnd(s);
  switch (r % 8) {
  case 0: return 64 * (1 + (r >> 8) % 64);         /* cache-line multiples */
  case 1: return (size_t)1 << ((r >> 8) % 17);     /* powers of two to 64 KiB */
  case 2: return (r >> 8) % 16 == 0 ? 65536 + 1 + (r >> 16) % 70000 : 1 + (r >> 16) % 4096;
  default: return 1 + (r >> 8) % 512;
  }
}

static void check_new(const unsigned char *p, size_t size) {
  CHECKF(p != NULL, "base_alloc(%zu) failed", size);
  CHECKF((uintptr_t)p % 16 == 0, "base_alloc(%zu) = %p: not 16-byte aligned", size, (void *)p);
  if (size % CACHELINE == 0)
    CHECKF((uintptr_t)p % CACHELINE == 0, "base_alloc(%zu) = %p: not on a cache line", size,
           (void *)p);
  for (size_t i = 0; i < size; i++)
    CHECKF(p[i] == 0, "base_alloc(%zu) = %p: byte %zu is %#x, not zero", size, (void *)p, i,
           p[i]);
}

/* A base_alloc_purgeable block of a page or more is a page run. */
static void check_run(const unsigned char *p, size_t size) {
  check_new(p, size);
  CHECKF((uintptr_t)p % PAGE == 0, "base_alloc_purgeable(%zu) = %p: not on a page", size,
         (void *)p);
}

static void check_pattern(const blk_t *b, const char *when) {
  for (size_t i = 0; i < b->size; i++)
    CHECKF(b->p[i] == (unsigned char)(b->pat + i * 7),
           "%s: block %p (%zu bytes), byte %zu changed: another block overlaps it", when,
           (void *)b->p, b->size, i);
}

static void blk_free(const blk_t *b) {
  if (b->purgeable) base_free_purgeable(b->p, b->size);
  else base_free(b->p, b->size);
}

static void *worker(void *arg) {
  size_t t = (size_t)arg;
  uint64_t s = 0x1234567ull * (t + 1);
  for (int op = 0; op < NOPS; op++) {
    if (nlive[t] < MAXLIVE && (nlive[t] == 0 || rnd(&s) % 100 < 55)) {
      size_t size = pick_size(&s);
      blk_t *b = &live[t][nlive[t]++];
      b->purgeable = rnd(&s) % 2 == 0;
      b->p = b->purgeable ? base_alloc_purgeable(size) : base_alloc(size);
      b->size = size;
      b->pat = (unsigned char)rnd(&s);
      if (b->purgeable && size >= PAGE && size <= ((size_t)64 << 10)) check_run(b->p, size);
      else check_new(b->p, size);
      for (size_t i = 0; i < size; i++) b->p[i] = (unsigned char)(b->pat + i * 7);
    } else {
      size_t i = rnd(&s) % nlive[t];
      check_pattern(&live[t][i], "at free");
      blk_free(&live[t][i]);
      live[t][i] = live[t][--nlive[t]];
    }
  }
  return NULL;
}

static int blk_cmp(const void *a, const void *b) {
  const blk_t *x = a, *y = b;
  return x->p < y->p ? -1 : x->p > y->p;
}

/* Single-threaded: freed blocks of a size come back for that size, and
 * directly mapped blocks are counted in base_stats_mapped. */
static void check_reuse(void) {
  enum { K = 50 };
  const size_t sizes[] = {16, 48, 64, 200, 192, 4096, 30000, 65536};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    size_t size = sizes[si];
    unsigned char *a[K], *b[K];
    for (int i = 0; i < K; i++) {
      a[i] = base_alloc(size);
      check_new(a[i], size);
      memset(a[i], 0xa5, size);
    }
    for (int i = 0; i < K; i++) base_free(a[i], size);
    for (int i = 0; i < K; i++) {
      b[i] = base_alloc(size);
      check_new(b[i], size); /* recycled: zeroed again, still aligned */
    }
    /* the same set of addresses (in any order) */
    for (int i = 0; i < K; i++) {
      bool found = false;
      for (int j = 0; j < K && !found; j++) found = b[i] == a[j];
      CHECKF(found, "size %zu: %p was not one of the %d blocks just freed", size, (void *)b[i], K);
    }
    for (int i = 0; i < K; i++) base_free(b[i], size);
  }
  /* past BASE_MAX: a mapping of its own, counted while it lives */
  size_t before = base_stats_mapped(), size = 100000;
  size_t want = ALIGN_UP(ALIGN_UP(size, 16), PAGE);
  void *p = base_alloc(size);
  check_new(p, size);
  CHECKF(base_stats_mapped() == before + want, "a %zu-byte block: mapped %zu -> %zu, want +%zu",
         size, before, base_stats_mapped(), want);
  base_free(p, size);
  CHECKF(base_stats_mapped() == before, "after freeing it: mapped %zu, want %zu",
         base_stats_mapped(), before);
}

/* Freed page runs stay resident until they have been free for
 * a second (dirty_decay_ms is 10 s here, the default): freeing them and a decay pass
 * right after give nothing back, and the next run of their length is the
 * one freed last, zeroed. Carving runs of another length meanwhile gives
 * back as many of them (past the 256 KiB kept whatever their age).
 * base_decay(true) then gives back every freed run, and purged runs come
 * back reading zero. Purged bytes are read as mapped less resident
 * (carving may map a new chunk). */
static size_t purged(void) { return base_stats_mapped() - base_stats_resident(); }

static void check_purge(void) {
  enum { K = 100, M = 50 };
  const size_t size = 8192, other = 3 * 4096, warm = (size_t)256 << 10;
  void *a[K], *c[M];
  for (int i = 0; i < K; i++) {
    a[i] = base_alloc_purgeable(size);
    check_run(a[i], size);
    memset(a[i], 0x5a, size);
  }
  size_t p0 = purged();
  for (int i = 0; i < K; i++) base_free_purgeable(a[i], size);
  base_decay(false);
  CHECKF(purged() == p0, "freed runs purged before their decay: %zu -> %zu bytes purged", p0,
         purged());
  void *last = base_alloc_purgeable(size);
  CHECKF(last == a[K - 1], "the next run is %p, not the one freed last (%p)", last, a[K - 1]);
  check_run(last, size); /* zeroed again */
  base_free_purgeable(last, size);
  /* runs of another length, carved while these sit resident, send as
   * many of these (past the 256 KiB kept) back */
  for (int i = 0; i < M; i++) check_run(c[i] = base_alloc_purgeable(other), other);
  size_t p1 = purged(), owed = K * size - warm;
  if (owed > M * other) owed = M * other;
  CHECKF(p1 + size >= p0 + owed, "carving %d runs of %zu bytes: purged %zu -> %zu, want >= %zu more",
         M, other, p0, p1, owed - size);
  for (int i = 0; i < M; i++) base_free_purgeable(c[i], other);
  base_decay(true);
  size_t p2 = purged();
  CHECKF(p2 >= p0 + K * size + M * other,
         "base_decay(true): purged %zu -> %zu bytes, want every freed run (+%zu)", p0, p2,
         K * size + M * other);
  for (int i = 0; i < K; i++) check_run(a[i] = base_alloc_purgeable(size), size); /* zero again */
  for (int i = 0; i < K; i++) base_free_purgeable(a[i], size);
}

int main(void) {
  nalloc_free(nalloc_malloc(1)); /* nalloc boots (its own metadata first) */
  check_reuse();
  check_purge();
  pthread_t th[NTHREADS];
  for (size_t t = 0; t < NTHREADS; t++)
    CHECKF(pthread_create(&th[t], NULL, worker, (void *)t) == 0, "pthread_create");
  for (size_t t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  /* every thread's live blocks together: sorted, none overlaps the next */
  static blk_t all[NTHREADS * MAXLIVE];
  size_t n = 0;
  for (size_t t = 0; t < NTHREADS; t++)
    for (size_t i = 0; i < nlive[t]; i++) all[n++] = live[t][i];
  qsort(all, n, sizeof *all, blk_cmp);
  for (size_t i = 0; i < n; i++) {
    check_pattern(&all[i], "at the end");
    if (i + 1 < n)
      CHECKF(all[i].p + all[i].size <= all[i + 1].p, "blocks %p (+%zu) and %p overlap",
             (void *)all[i].p, all[i].size, (void *)all[i + 1].p);
  }
  for (size_t i = 0; i < n; i++) blk_free(&all[i]);
  check_reuse(); /* the lists the threads left behind serve as well */
  printf("ok: %zu blocks live at the end of %d threads x %d operations\n", n, NTHREADS, NOPS);
  return 0;
}
