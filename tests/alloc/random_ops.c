/* random_ops.c -- a randomized differential test of every heap entry
 * point against a model of what is live.
 *
 * Each thread keeps a table of the blocks it owns (pointer, requested size,
 * alignment, content tag) and applies random operations: malloc, calloc,
 * realloc (grow, shrink, within a class, small <-> large), reallocarray,
 * posix_memalign / aligned_alloc / memalign / valloc / pvalloc with
 * alignments up to 2 MiB, free and free_sized. Sizes run from 0 to tens of
 * MiB. After every operation the model is the truth: a block must hold the
 * bytes last written into it (realloc: the old prefix), be aligned as
 * asked, have malloc_usable_size >= its size (and all of it writable), and
 * calloc memory must read as zero. Every so often all live blocks are
 * checked not to overlap. With several threads, blocks are handed between
 * threads through a mailbox, so that frees and reallocs also happen in a
 * thread other than the allocating one.
 *
 *   random_ops [-s SECONDS] [-t THREADS] [-seed N] [-live MIB]
 *
 * Without -seed the seed comes from the clock and is printed first.
 *
 * The first part is the deterministic regression for a one-page large
 * block grown in place (issue 10, defect 1). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "alloc/check.h"

#define NSLOT 512
#define MAILBOX 64

typedef struct {
  unsigned char *p;
  size_t size, align; /* align 0: plain malloc family */
  uint64_t tag;
  int zero;           /* calloc: content is zeros, not a pattern */
} blk_t;

typedef struct {
  rng_t rng;
  blk_t b[NSLOT];
  size_t live;          /* requested bytes live in this thread's table */
  unsigned long ops;
  unsigned id;
} thr_t;

static double opt_seconds = 5;
static unsigned opt_threads = 1;
static uint64_t opt_seed = 0; /* 0: from the clock */
static size_t opt_live = 256; /* MiB per thread, at most */
static _Atomic(blk_t *) mailbox[MAILBOX];
static _Atomic bool stop;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Mostly small, sometimes medium, rarely large and huge. */
static size_t pick_size(rng_t *r) {
  unsigned k = (unsigned)rng_range(r, 0, 999);
  if (k < 600) return rng_range(r, 0, 512);
  if (k < 850) return rng_range(r, 513, 16384);
  if (k < 960) return rng_range(r, 16385, 262144);
  if (k < 995) return rng_range(r, 262145, 4u << 20);
  return rng_range(r, 4u << 20, 40u << 20);
}

static size_t pick_align(rng_t *r) {
  return (size_t)1 << rng_range(r, 4, 21); /* 16 B .. 2 MiB */
}

static void fill(blk_t *b) {
  if (b->zero) return;
  fill_fast(b->p, b->size, b->tag);
}

static void verify(const blk_t *b, const char *what) {
  if (b->p == NULL) return;
  if (b->align && ((uintptr_t)b->p & (b->align - 1)))
    check_fail(__FILE__, __LINE__, "%s: %p not aligned to %zu", what,
               (void *)b->p, b->align);
  size_t us = A_USABLE(b->p);
  CHECKF(us >= b->size, "%s: usable size %zu < size %zu of %p", what, us,
         b->size, (void *)b->p);
  if (b->zero) {
    for (size_t i = 0; i < b->size; i++)
      CHECKF(b->p[i] == 0, "%s: calloc block %p byte %zu is %d", what,
             (void *)b->p, i, b->p[i]);
  } else {
    CHECKF(check_fast(b->p, b->size, b->tag),
           "%s: block %p (size %zu, align %zu) does not hold its contents",
           what, (void *)b->p, b->size, b->align);
  }
}

static void take(thr_t *t, blk_t *b, unsigned char *p, size_t size,
                 size_t align, int zero) {
  b->p = p;
  b->size = size;
  b->align = align;
  b->zero = zero;
  b->tag = rng_next(&t->rng);
  t->live += size;
  if (!zero) fill(b); /* calloc's zeros are the content to check */
  verify(b, "new block");
}

static void drop(thr_t *t, blk_t *b, bool sized) {
  verify(b, "before free");
  t->live -= b->size;
  if (sized) A_FREE_SIZED(b->p, b->size);
  else A_FREE(b->p);
  b->p = NULL;
}

static void op_alloc(thr_t *t, blk_t *b) {
  size_t size = pick_size(&t->rng), align = 0;
  unsigned char *p = NULL;
  int zero = 0;
  switch (rng_range(&t->rng, 0, 7)) {
  case 0: case 1: case 2:
    p = A_MALLOC(size);
    break;
  case 3: {
    size_t n = rng_range(&t->rng, 1, 16), each = size / n;
    p = A_CALLOC(n, each);
    size = n * each;
    zero = 1;
    break;
  }
  case 4: {
    align = pick_align(&t->rng);
    void *q = NULL;
    int e = A_POSIX_MEMALIGN(&q, align, size);
    CHECKF(e == 0, "posix_memalign(%zu, %zu) -> %d", align, size, e);
    p = q;
    break;
  }
  case 5:
    align = pick_align(&t->rng);
    size = (size + align - 1) / align * align; /* C11 wants a multiple */
    p = A_ALIGNED_ALLOC(align, size);
    break;
  case 6:
    align = pick_align(&t->rng);
    p = A_MEMALIGN(align, size);
    break;
  case 7:
    align = 4096;
    p = rng_range(&t->rng, 0, 1) ? A_VALLOC(size) : A_PVALLOC(size);
    break;
  }
  CHECKF(p != NULL, "allocation of %zu (align %zu) failed", size, align);
  take(t, b, p, size, align, zero);
}

static void op_realloc(thr_t *t, blk_t *b) {
  verify(b, "before realloc");
  size_t old = b->size, size;
  unsigned k = (unsigned)rng_range(&t->rng, 0, 3);
  if (k == 0) size = pick_size(&t->rng);
  else if (k == 1) size = old + rng_range(&t->rng, 0, 64);  /* same class */
  else if (k == 2) size = old * 2 + rng_range(&t->rng, 1, 200000); /* grow */
  else size = old / 2; /* shrink */
  if (size > (48u << 20)) size = 48u << 20;
  if (size == 0) size = 1; /* realloc(p, 0) frees: not this op */
  unsigned char *q;
  if (rng_range(&t->rng, 0, 4) == 0 && size % 8 == 0)
    q = A_REALLOCARRAY(b->p, size / 8, 8);
  else
    q = A_REALLOC(b->p, size);
  CHECKF(q != NULL, "realloc(%p, %zu) failed", (void *)b->p, size);
  /* the prefix survives; alignment is not promised past realloc */
  size_t keep = old < size ? old : size;
  if (b->zero) {
    for (size_t i = 0; i < keep; i++)
      CHECKF(q[i] == 0, "realloc %zu -> %zu lost calloc zeros at %zu", old,
             size, i);
  } else {
    CHECKF(check_fast(q, keep, b->tag),
           "realloc %p %zu -> %p %zu (align %zu) lost the old contents",
           (void *)b->p, old, (void *)q, size, b->align);
  }
  t->live = t->live - old + size;
  b->p = q;
  b->size = size;
  b->align = 0;
  b->zero = 0;
  b->tag = rng_next(&t->rng);
  fill(b);
}

/* Writes every usable byte, then puts the pattern back: the usable size
 * is the block's to use, and must not reach into a neighbour. */
static void op_usable(thr_t *t, blk_t *b) {
  (void)t;
  size_t us = A_USABLE(b->p);
  CHECK(us >= b->size);
  if (us > (1u << 20)) us = b->size; /* keep big ones cheap */
  memset(b->p, 0xa5, us);
  b->zero = 0;
  fill(b);
}

static int cmp_addr(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)((const blk_t *)x)->p;
  uintptr_t c = (uintptr_t)((const blk_t *)y)->p;
  return a < c ? -1 : a > c;
}

static void check_disjoint(thr_t *t) {
  static _Thread_local blk_t v[NSLOT];
  size_t n = 0;
  for (unsigned i = 0; i < NSLOT; i++)
    if (t->b[i].p) v[n++] = t->b[i];
  qsort(v, n, sizeof *v, cmp_addr);
  for (size_t i = 1; i < n; i++)
    CHECKF(v[i - 1].p + A_USABLE(v[i - 1].p) <= v[i].p,
           "blocks overlap: %p+%zu and %p", (void *)v[i - 1].p,
           A_USABLE(v[i - 1].p), (void *)v[i].p);
}

/* Hands a block to whichever thread looks next, or adopts one. */
static void op_mail(thr_t *t, blk_t *b) {
  unsigned m = (unsigned)rng_range(&t->rng, 0, MAILBOX - 1);
  if (b->p != NULL) {
    blk_t *box = malloc(sizeof *box);
    CHECK(box != NULL);
    verify(b, "mailed");
    *box = *b;
    blk_t *expect = NULL;
    if (atomic_compare_exchange_strong(&mailbox[m], &expect, box)) {
      t->live -= b->size;
      b->p = NULL;
    } else {
      free(box);
    }
  } else {
    blk_t *box = atomic_exchange(&mailbox[m], NULL);
    if (box == NULL) return;
    *b = *box;
    free(box);
    t->live += b->size;
    verify(b, "received");
  }
}

static void step(thr_t *t) {
  blk_t *b = &t->b[rng_range(&t->rng, 0, NSLOT - 1)];
  unsigned k = (unsigned)rng_range(&t->rng, 0, 99);
  if (opt_threads > 1 && k < 8) {
    op_mail(t, b);
  } else if (b->p == NULL) {
    if (t->live < opt_live << 20) op_alloc(t, b);
  } else if (k < 45) {
    drop(t, b, k < 15);
  } else if (k < 80) {
    if (t->live < opt_live << 20) op_realloc(t, b);
    else drop(t, b, false);
  } else if (k < 90) {
    op_usable(t, b);
  } else {
    verify(b, "check");
  }
  if (++t->ops % 4096 == 0) check_disjoint(t);
}

static void *worker(void *arg) {
  thr_t *t = arg;
  double end = now_s() + opt_seconds;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 256; i++) step(t);
    if (now_s() > end) break;
  }
  check_disjoint(t);
  for (unsigned i = 0; i < NSLOT; i++)
    if (t->b[i].p) drop(t, &t->b[i], false);
  return NULL;
}

/* Issue 10, defect 1: a one-page large block (alignment above a page makes
 * even a 100-byte request one) grown in place lost its page-map entry, and
 * the free that followed aborted with "invalid pointer". */
static void regression_grow_one_page(void) {
  for (size_t align = 8192; align <= ((size_t)2 << 20); align *= 2)
    for (size_t size = 1; size <= 4096; size = size * 3 + 1) {
      void *p = NULL;
      CHECK(A_POSIX_MEMALIGN(&p, align, size) == 0);
      fill_fast(p, size, align ^ size);
      unsigned char *q = A_REALLOC(p, 200000);
      CHECK(q != NULL);
      CHECKF(check_fast(q, size, align ^ size),
             "align %zu size %zu: contents lost growing to 200000", align,
             size);
      CHECKF(A_USABLE(q) >= 200000, "align %zu size %zu: usable %zu", align,
             size, A_USABLE(q));
      unsigned char *r = A_REALLOC(q, 300000); /* grow again */
      CHECK(r != NULL);
      r = A_REALLOC(r, 5000); /* and shrink back to one page or two */
      CHECK(r != NULL);
      CHECK(check_fast(r, size, align ^ size));
      A_FREE(r);
    }
}

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-s") == 0) opt_seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "-t") == 0) opt_threads = (unsigned)atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-seed") == 0) opt_seed = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "-live") == 0) opt_live = strtoull(argv[i + 1], NULL, 0);
    else {
      fprintf(stderr, "usage: random_ops [-s SECONDS] [-t THREADS] [-seed N] [-live MIB]\n");
      return 2;
    }
  }
  if (opt_threads < 1) opt_threads = 1;
  if (opt_seed == 0) opt_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  /* printed first, so that a failure can be replayed with -seed */
  fprintf(stderr, "random_ops: seed %llu, %u thread(s), %.0f s\n",
          (unsigned long long)opt_seed, opt_threads, opt_seconds);
  regression_grow_one_page();
  thr_t *t = calloc(opt_threads, sizeof *t);
  pthread_t *tid = calloc(opt_threads, sizeof *tid);
  CHECK(t != NULL && tid != NULL);
  for (unsigned i = 0; i < opt_threads; i++) {
    t[i].id = i;
    rng_seed(&t[i].rng, opt_seed * 1000003 + i);
    CHECK(pthread_create(&tid[i], NULL, worker, &t[i]) == 0);
  }
  unsigned long ops = 0;
  for (unsigned i = 0; i < opt_threads; i++) {
    CHECK(pthread_join(tid[i], NULL) == 0);
    ops += t[i].ops;
  }
  for (unsigned m = 0; m < MAILBOX; m++) {
    blk_t *box = atomic_exchange(&mailbox[m], NULL);
    if (box) {
      verify(box, "left in mailbox");
      A_FREE(box->p);
      free(box);
    }
  }
  printf("random_ops: %lu operations in %u thread(s), seed %llu (%s): ok\n",
         ops, opt_threads, (unsigned long long)opt_seed, A_MODE);
  free(t);
  free(tid);
  return 0;
}
