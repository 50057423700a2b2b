/* prof_mem.c -- memory for the profiler's own records (gctx, tdata, tctx,
 * thread records, per-thread tables, dump scratch).
 *
 * Why not base_alloc: the profiler frees records all the time (threads
 * exit, stacks go idle after a dump), and base_alloc keeps every freed
 * block on a free list of its size forever, so 10^5 short-lived threads
 * left 415 MB mapped and resident after everything was freed. Here small
 * blocks come from 64 KiB slabs, one size class per slab; a slab that
 * becomes empty is unmapped, except one per class kept for reuse (so a
 * thread that starts and exits in a loop does not map and unmap a slab
 * each time). Blocks above PROF_MEM_SLAB_MAX are mapped on their own and
 * unmapped when freed, but for the last tdata freed (big_spare).
 *
 * Blocks are zeroed (prof_mem_alloc_head: a head of them) and 64-byte
 * aligned (records keep their hot counters on cache lines of their own).
 * One lock, a leaf: any profiler lock may be held when calling in. Never
 * calls malloc. */
#include "prof_internal.h"

#include <string.h>

#define SLAB ((size_t)64 << 10)
#define SLAB_HDR 64
#define NCLASS 36

typedef struct slab_s {
  struct slab_s *next, *prev; /* the class's slabs with a free block */
  void *free;                 /* freed blocks */
  char *bump, *end;           /* never used yet */
  uint32_t cls, nfree, ntotal;
} slab_t;

static nlock_t mem_lock = NLOCK_INITIALIZER(LOCK_PROF_MEM);
static slab_t *partial[NCLASS]; /* mem_lock */
static slab_t *spare[NCLASS];   /* one empty slab per class, kept */
/* The last tdata freed (when a thread that sampled exits), kept mapped
 * for the next one: a thread that starts, samples and exits in a loop then
 * neither maps nor faults its tdata in each time (bench-threads: ~15 page
 * faults and an mmap/munmap pair a sampling thread). Zeroed again when
 * reused (only its head). Other big blocks (tables, dump scratch) are
 * unmapped when freed: kept here, the array a table had before it doubled
 * stayed resident to the end (the owner's tctx table of 48k stacks is
 * 512 KiB, the one before it 256 KiB) and put out a kept tdata. mem_lock. */
static void *big_spare;
static size_t big_spare_size;
static _Atomic size_t mem_mapped;
static _Atomic size_t mem_kind[PM_NKINDS];

/* 32-byte steps to 256, 64 to 1 KiB, 256 to 4 KiB, 1 KiB to 8 KiB. A
 * slab's blocks start at 64 and step by the class size, so a class that
 * is a multiple of 64 keeps its blocks on line boundaries (a sampled
 * tctx's counters) and the others are 32-aligned. The 32-byte steps are
 * for exact mode's 96-byte tctx (one per stack and thread: CPython's
 * tests make 48k, 1.5 MB less than at 128) and for the shorter tail
 * chunks and shallow stacks' gctxs. */
static unsigned cls_of(size_t n) {
  if (n <= 256) return (unsigned)((n + 31) / 32) - 1;
  if (n <= 1024) return 8 + (unsigned)((n - 256 + 63) / 64) - 1;
  if (n <= 4096) return 20 + (unsigned)((n - 1024 + 255) / 256) - 1;
  return 32 + (unsigned)((n - 4096 + 1023) / 1024) - 1;
}

static size_t cls_size(unsigned c) {
  if (c < 8) return (size_t)(c + 1) * 32;
  if (c < 20) return 256 + (size_t)(c - 7) * 64;
  if (c < 32) return 1024 + (size_t)(c - 19) * 256;
  return 4096 + (size_t)(c - 31) * 1024;
}

/* A slab aligned to its size, so that a block finds its header. */
static slab_t *slab_map(unsigned c) {
  char *raw = os_map(2 * SLAB);
  if (raw == NULL) return NULL;
  char *s = (char *)ALIGN_UP((uintptr_t)raw, SLAB);
  if (s > raw) os_unmap(raw, (size_t)(s - raw));
  if (s + SLAB < raw + 2 * SLAB) os_unmap(s + SLAB, (size_t)(raw + 2 * SLAB - (s + SLAB)));
  atomic_fetch_add_explicit(&mem_mapped, SLAB, memory_order_relaxed);
  slab_t *sl = (slab_t *)s;
  size_t sz = cls_size(c);
  sl->cls = c;
  sl->ntotal = (uint32_t)((SLAB - SLAB_HDR) / sz);
  sl->nfree = sl->ntotal;
  sl->bump = s + SLAB_HDR;
  sl->end = s + SLAB_HDR + (size_t)sl->ntotal * sz;
  return sl;
}

/* The starter slab: the first 64 KiB of records, of every class, bumped
 * out of one slab. A process with a few stacks has a gctx, its extension,
 * a tctx, the owner's table and the gctx table: five classes, and with a
 * slab each, five slabs with a page touched in each (and the slab header's
 * page is where the first blocks go). Here they share pages. Its header
 * keeps a free list per class and the class of each 32-byte grain where a
 * block starts (a block of the class is handed out again); it is never
 * unmapped. Only a class without a regular slab that has room takes from it
 * (so that regular slabs still fill up and empty). mem_lock. */
#define START_GRAIN 32
typedef struct {
  slab_t h;                               /* cls: NCLASS */
  void *free[NCLASS];
  uint8_t cls[SLAB / START_GRAIN];        /* of the block starting there */
} start_hdr_t;
/* set once (mem_lock); read without it by frees, to tell its blocks */
static _Atomic(start_hdr_t *) start_slab;

/* A block of class c from the starter slab, NULL if it has no room for
 * one (it is made the first time). *used: it was handed out before. */
static void *start_take(unsigned c, bool *used) {
  size_t sz = cls_size(c);
  start_hdr_t *start = atomic_load_explicit(&start_slab, memory_order_relaxed);
  if (start == NULL) {
    slab_t *s = slab_map(0);
    if (s == NULL) return NULL;
    start = (start_hdr_t *)s;
    s->cls = NCLASS;
    s->bump = (char *)start + ALIGN_UP(sizeof *start, CACHELINE);
    s->end = (char *)start + SLAB;
    atomic_store_explicit(&start_slab, start, memory_order_release);
  }
  void *p = start->free[c];
  if ((*used = p != NULL)) {
    start->free[c] = *(void **)p;
    return p;
  }
  /* classes that are multiples of 64 keep their blocks on lines, as in
   * their slabs (a sampled tctx's counters) */
  char *b = (char *)ALIGN_UP((uintptr_t)start->h.bump, sz % 64 == 0 ? 64 : 32);
  if (sz > (size_t)(start->h.end - b)) return NULL;
  start->cls[(size_t)(b - (char *)start) / START_GRAIN] = (uint8_t)c;
  start->h.bump = b + sz;
  return b;
}

static void list_del(slab_t *s) {
  if (s->prev) s->prev->next = s->next;
  else partial[s->cls] = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

static void list_push(slab_t *s) {
  s->prev = NULL;
  s->next = partial[s->cls];
  if (s->next) s->next->prev = s;
  partial[s->cls] = s;
}

void *prof_mem_alloc(size_t size, unsigned kind) {
  return prof_mem_alloc_head(size, kind, size, NULL);
}

/* A reused big block is zeroed only up to `zero`: a tdata's walk caches
 * (~170 KB of it) are written before they are read. */
void *prof_mem_alloc_head(size_t size, unsigned kind, size_t zero,
                          bool *reused) {
  if (reused != NULL) *reused = false;
  if (size == 0) size = 1;
  nalloc_assert(zero <= size);
  if (size > PROF_MEM_SLAB_MAX) {
    size_t n = ALIGN_UP(size, PAGE);
    void *p = NULL;
    nlock_lock(&mem_lock);
    if (big_spare != NULL && big_spare_size == n) {
      p = big_spare;
      big_spare = NULL;
    }
    nlock_unlock(&mem_lock);
    if (p != NULL) {
      memset(p, 0, zero);
      if (reused != NULL) *reused = true;
      atomic_fetch_add_explicit(&mem_kind[kind], n, memory_order_relaxed);
      return p;
    }
    p = os_map(n);
    if (p == NULL) return NULL;
    atomic_fetch_add_explicit(&mem_mapped, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&mem_kind[kind], n, memory_order_relaxed);
    return p; /* fresh pages read as zero */
  }
  unsigned c = cls_of(size);
  void *p;
  bool used;
  nlock_lock(&mem_lock);
  slab_t *s = partial[c];
  if (s == NULL && (p = start_take(c, &used)) != NULL) {
    nlock_unlock(&mem_lock);
    goto got;
  }
  if (s == NULL) {
    if ((s = spare[c]) != NULL) {
      spare[c] = NULL;
    } else if ((s = slab_map(c)) == NULL) {
      nlock_unlock(&mem_lock);
      return NULL;
    }
    list_push(s);
  }
  used = s->free != NULL;
  if (used) {
    p = s->free;
    s->free = *(void **)p;
  } else {
    p = s->bump;
    s->bump += cls_size(c);
  }
  if (--s->nfree == 0) list_del(s);
  nlock_unlock(&mem_lock);
got:
  /* Past the bump pointer a slab has never been written (a kept spare's
   * too): its pages read as zero, and zeroing them would fault them in
   * (the gctx table's first 8 KiB: three pages for one stack). */
  if (used) memset(p, 0, cls_size(c));
  if (reused != NULL) *reused = used;
  atomic_fetch_add_explicit(&mem_kind[kind], cls_size(c), memory_order_relaxed);
  return p;
}

void prof_mem_free(void *p, size_t size, unsigned kind) {
  if (p == NULL) return;
  if (size == 0) size = 1;
  if (size > PROF_MEM_SLAB_MAX) {
    size_t n = ALIGN_UP(size, PAGE);
    atomic_fetch_sub_explicit(&mem_kind[kind], n, memory_order_relaxed);
    if (kind != PM_TDATA) {
      os_unmap(p, n);
      atomic_fetch_sub_explicit(&mem_mapped, n, memory_order_relaxed);
      return;
    }
    nlock_lock(&mem_lock);
    void *old = big_spare;
    size_t old_n = big_spare_size;
    big_spare = p;
    big_spare_size = n;
    nlock_unlock(&mem_lock);
    if (old == NULL) return; /* kept: still mapped */
    p = old, n = old_n;
    os_unmap(p, n);
    atomic_fetch_sub_explicit(&mem_mapped, n, memory_order_relaxed);
    return;
  }
  slab_t *s = (slab_t *)((uintptr_t)p & ~(SLAB - 1)), *gone = NULL;
  start_hdr_t *start = atomic_load_explicit(&start_slab, memory_order_acquire);
  if ((void *)s == (void *)start) {
    nlock_lock(&mem_lock);
    unsigned c = start->cls[((uintptr_t)p - (uintptr_t)s) / START_GRAIN];
    nalloc_assert(c == cls_of(size));
    *(void **)p = start->free[c];
    start->free[c] = p;
    nlock_unlock(&mem_lock);
    atomic_fetch_sub_explicit(&mem_kind[kind], cls_size(c), memory_order_relaxed);
    return;
  }
  atomic_fetch_sub_explicit(&mem_kind[kind], cls_size(s->cls), memory_order_relaxed);
  nlock_lock(&mem_lock);
  *(void **)p = s->free;
  s->free = p;
  if (s->nfree++ == 0) list_push(s);
  if (s->nfree == s->ntotal) { /* empty: keep one per class, unmap the rest */
    list_del(s);
    if (spare[s->cls] == NULL) {
      spare[s->cls] = s;
    } else {
      gone = s;
    }
  }
  nlock_unlock(&mem_lock);
  if (gone != NULL) {
    os_unmap(gone, SLAB);
    atomic_fetch_sub_explicit(&mem_mapped, SLAB, memory_order_relaxed);
  }
}

size_t prof_mem_mapped(void) {
  return atomic_load_explicit(&mem_mapped, memory_order_relaxed);
}

size_t prof_mem_used(unsigned kind) {
  return atomic_load_explicit(&mem_kind[kind], memory_order_relaxed);
}

void prof_mem_prefork(void) { nlock_prefork(&mem_lock); }
void prof_mem_postfork_parent(void) { nlock_postfork_parent(&mem_lock); }
bool prof_mem_postfork_child(void) { return nlock_postfork_child(&mem_lock); }
