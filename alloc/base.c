/* base.c -- the metadata allocator: memory for nalloc's own structures
 * (spans, thread caches, arenas, profiler tables).
 *
 * It sits beside the user heap, never inside it, so metadata is never
 * profiled, never recursed into, and a user overrun cannot reach it by
 * walking off the end of a block. Blocks up to BASE_MAX come from 256 KiB
 * pieces carved by a bump pointer, with one free list per 16-byte size, so
 * freed blocks come back warm (a fresh page costs a fault); bigger blocks
 * are mapped directly. The bump pointer's pages are faulted in ahead of it,
 * a run at a time.
 *
 * base_alloc_purgeable's blocks of a page or more (to BASE_MAX) are page
 * runs: whole pages, carved from the top of the chunk down (so that they
 * leave no gap among the small blocks), kept when freed on one list per
 * length, through a
 * 16-byte node each (a run's own pages may be given back, so no link
 * lives in them). Freed runs stay resident up to BASE_WARM bytes in all;
 * past that a freed run's pages go back to the kernel (MADV_DONTNEED) and
 * it is reused as it is, its pages reading zero, faulted in as they are
 * written. These are mostly the sampled-slot arrays of exact profiling
 * (8 bytes a slot of every small span, 4-8 KiB for most spans, made and
 * freed with the span): kept resident on exact-size lists, freed arrays
 * held ~4.2 MB at the exit of CPython's tests against ~0.7 MB live.
 * Other metadata of a page or more stays on the small blocks' lists: a
 * thread heap's record (7.5 KiB) as a page-aligned run made bench-small
 * 9-14% slower at the same instruction count (CPU medians of 9 alternated
 * runs, -t 1: 0.57 -> 0.65 s).
 *
 * The first piece is the library's own .bss (base_first), which the loader
 * maps with the library anyway: a process whose metadata fits in it (a
 * shell, a `cat`: a few KiB) makes no system call for metadata, and its
 * untouched pages cost nothing. */
#include "base.h"

#include "lock.h"
#include "os.h"

#include <string.h>

#define BASE_CHUNK ((size_t)256 << 10)
#define BASE_MAX ((size_t)64 << 10) /* thread caches (~30 KiB) stay recycled */
#define BASE_NLISTS (BASE_MAX / 16)
#define BASE_NRUNS (BASE_MAX / PAGE)
/* Pages are faulted in ahead of the bump pointer up to this many bytes at
 * a time (os_populate): metadata is always written, and one call for 16
 * pages costs less than two faults. The window grows with what the bump
 * pointer has handed out, so a short-lived process (a shell's `cat`) that
 * needs a few pages of metadata faults in those and no more; a window
 * under BASE_POPULATE_MIN is left to fault on touch: a process is only
 * populated ahead once it has used as much (a `cat` uses a few KiB, and
 * a madvise for four pages it may never touch cost it a system call). */
#define BASE_POPULATE ((size_t)64 << 10)
#define BASE_POPULATE_MIN ((size_t)16 * PAGE)
/* Freed runs kept resident, at most (bytes): a program that frees and
 * remakes spans over and over (their slot arrays) reuses these without a
 * fault or a system call. */
#define BASE_WARM ((size_t)256 << 10)

typedef struct base_free_s {
  struct base_free_s *next;
} base_free_t;

/* A freed page run: its address, bit 0 set when its pages were purged. */
#define BASE_RUN_PURGED ((uintptr_t)1)
typedef struct base_run_s {
  struct base_run_s *next;
  uintptr_t addr;
} base_run_t;

/* pages to fault in once the lock is dropped */
typedef struct {
  char *from, *to;
} base_pop_t;

static nlock_t base_lock = NLOCK_INITIALIZER(LOCK_BASE);
static char *base_cur, *base_end; /* small blocks bump up, runs down */
static char *base_ready; /* the chunk is populated up to here */
NALLOC_BIG_BSS static base_free_t *base_lists[BASE_NLISTS + 1];
static base_run_t *base_runs[BASE_NRUNS + 1];
static _Atomic size_t base_mapped;
/* bytes purged: of freed runs, and the whole pages that the bump pointer
 * left at the end of a chunk (given up: bumping continues in a new one) */
static _Atomic size_t base_purged;
static size_t base_warm; /* bytes of freed runs kept resident */
static size_t base_bumped; /* bytes the bump pointer handed out, ever */
NALLOC_BIG_BSS static char base_first[BASE_CHUNK] __attribute__((aligned(PAGE)));
static bool base_first_used;

/* Puts small block p of `size` bytes (a multiple of 16, at most BASE_MAX)
 * on its free list. The lock is held. */
static void base_push(void *p, size_t size) {
  base_free_t *f = p;
  f->next = base_lists[size / 16];
  base_lists[size / 16] = f;
}

/* The lock is held: starts a new chunk. Of the rest of the current one,
 * the part before its first whole page goes on the free list of its size
 * (small requests are under a page), and its whole pages are given up:
 * purged where they were populated (no run's node is to be had here).
 * False when the OS has no memory for a chunk. */
static bool base_chunk(void) {
  uintptr_t cur = (uintptr_t)base_cur, end = (uintptr_t)base_end;
  uintptr_t lo = ALIGN_UP(cur, PAGE) < end ? ALIGN_UP(cur, PAGE) : end;
  if (lo - cur >= 16) base_push(base_cur, lo - cur);
  if (end > lo) {
    uintptr_t ready = (uintptr_t)base_ready; /* pages past it never touched */
    if (ready > lo) os_purge((void *)lo, (ready < end ? ready : end) - lo);
    atomic_fetch_add_explicit(&base_purged, end - lo, memory_order_relaxed);
  }
  base_cur = base_end;
  char *p = base_first; /* page aligned */
  if (base_first_used) p = os_map(BASE_CHUNK);
  if (p == NULL) return false;
  base_first_used = true;
  atomic_fetch_add_explicit(&base_mapped, BASE_CHUNK, memory_order_relaxed);
  base_cur = base_ready = p;
  base_end = p + BASE_CHUNK;
  return true;
}

/* A small block of `size` bytes from the bump pointer (the lock held),
 * NULL when the OS has no memory; the pages to populate in *pop.
 * Blocks whose size is a multiple of the cache line start on one: then a
 * structure that one thread writes all the time (a profiler counter set)
 * never shares a line with another thread's, and its updates do not
 * bounce between cores. The gap this leaves goes on the free list of its
 * size. Freed blocks keep their alignment, so a recycled block of such a
 * size is aligned too. */
static void *base_bump(size_t size, base_pop_t *pop) {
  size_t gap = size % CACHELINE == 0 ? -(uintptr_t)base_cur % CACHELINE : 0;
  if ((size_t)(base_end - base_cur) < gap + size) {
    if (!base_chunk()) return NULL;
    gap = 0;
  }
  if (gap != 0) {
    base_push(base_cur, gap);
    base_cur += gap;
  }
  char *r = base_cur;
  base_cur += size;
  base_bumped += size;
  if (base_cur > base_ready) {
    size_t ahead = base_bumped < BASE_POPULATE ? base_bumped : BASE_POPULATE;
    char *from = base_ready;
    char *to = (char *)ALIGN_UP((uintptr_t)base_cur + ahead, PAGE);
    if (to > base_end) to = base_end;
    base_ready = to;
    if ((size_t)(to - from) >= BASE_POPULATE_MIN) *pop = (base_pop_t){from, to};
  }
  return r; /* fresh mmap memory is already zero */
}

/* A small block (the lock held): from its free list, else bumped (*fresh:
 * zero already). */
static void *base_small(size_t size, base_pop_t *pop, bool *fresh) {
  base_free_t *f = base_lists[size / 16];
  *fresh = f == NULL;
  if (f == NULL) return base_bump(size, pop);
  base_lists[size / 16] = f->next;
  return f;
}

/* Faults in what base_bump left to populate, once the lock is dropped:
 * another thread that uses these pages meanwhile just faults them in
 * itself. */
static void base_populate(const base_pop_t *pop) {
  if (pop->from != NULL) os_populate(pop->from, (size_t)(pop->to - pop->from));
}

/* A page run of `size` bytes (a multiple of PAGE, at most BASE_MAX). */
static void *base_alloc_run(size_t size) {
  nlock_lock(&base_lock);
  base_run_t *n = base_runs[size / PAGE];
  if (n == NULL) {
    if ((size_t)(base_end - base_cur) < size && !base_chunk()) {
      nlock_unlock(&base_lock);
      return NULL;
    }
    base_end -= size; /* page aligned: runs are whole pages */
    char *r = base_end;
    nlock_unlock(&base_lock);
    return r; /* never written: zero */
  }
  base_runs[size / PAGE] = n->next;
  uintptr_t a = n->addr;
  if (a & BASE_RUN_PURGED)
    atomic_fetch_sub_explicit(&base_purged, size, memory_order_relaxed);
  else
    base_warm -= size;
  base_push(n, sizeof *n);
  nlock_unlock(&base_lock);
  char *p = (char *)(a & ~BASE_RUN_PURGED);
  if (!(a & BASE_RUN_PURGED)) memset(p, 0, size);
  return p;
}

/* Frees page run p: kept resident while the freed runs are under
 * BASE_WARM bytes, else purged first (the lock not held: the run is
 * nobody's meanwhile). Its node is a small block. */
static void base_free_run(void *p, size_t size) {
  nlock_lock(&base_lock);
  uintptr_t a = (uintptr_t)p;
  if (base_warm + size <= BASE_WARM) {
    base_warm += size;
  } else {
    nlock_unlock(&base_lock);
    os_purge(p, size);
    a |= BASE_RUN_PURGED;
    atomic_fetch_add_explicit(&base_purged, size, memory_order_relaxed);
    nlock_lock(&base_lock);
  }
  base_pop_t pop = {NULL, NULL};
  bool fresh;
  base_run_t *n = base_small(sizeof *n, &pop, &fresh);
  if (n != NULL) {
    n->addr = a;
    n->next = base_runs[size / PAGE];
    base_runs[size / PAGE] = n;
  } else if (!(a & BASE_RUN_PURGED)) { /* no memory for a node: the run is lost */
    base_warm -= size;
  }
  nlock_unlock(&base_lock);
  base_populate(&pop);
}

void *base_alloc(size_t size) {
  size = ALIGN_UP(size ? size : 1, 16);
  if (size > BASE_MAX) {
    size = ALIGN_UP(size, PAGE);
    void *p = os_map(size);
    if (p) atomic_fetch_add_explicit(&base_mapped, size, memory_order_relaxed);
    return p;
  }
  base_pop_t pop = {NULL, NULL};
  bool fresh;
  nlock_lock(&base_lock);
  void *p = base_small(size, &pop, &fresh);
  nlock_unlock(&base_lock);
  base_populate(&pop);
  if (p != NULL && !fresh) memset(p, 0, size);
  return p;
}

void base_free(void *p, size_t size) {
  if (p == NULL) return;
  size = ALIGN_UP(size ? size : 1, 16);
  if (size > BASE_MAX) {
    size = ALIGN_UP(size, PAGE);
    os_unmap(p, size);
    atomic_fetch_sub_explicit(&base_mapped, size, memory_order_relaxed);
    return;
  }
  nlock_lock(&base_lock);
  base_push(p, size);
  nlock_unlock(&base_lock);
}

void *base_alloc_purgeable(size_t size) {
  if (size < PAGE || size > BASE_MAX) return base_alloc(size);
  return base_alloc_run(ALIGN_UP(size, PAGE));
}

void base_free_purgeable(void *p, size_t size) {
  if (size < PAGE || size > BASE_MAX) base_free(p, size);
  else if (p != NULL) base_free_run(p, ALIGN_UP(size, PAGE));
}

size_t base_stats_mapped(void) {
  return atomic_load_explicit(&base_mapped, memory_order_relaxed);
}

size_t base_stats_resident(void) {
  size_t purged = atomic_load_explicit(&base_purged, memory_order_relaxed);
  size_t mapped = base_stats_mapped();
  return mapped > purged ? mapped - purged : 0;
}

void base_prefork(void) { nlock_prefork(&base_lock); }
void base_postfork_parent(void) { nlock_postfork_parent(&base_lock); }
/* A fork that interrupted this thread inside base_alloc or base_free (from
 * a signal handler) leaves the bump pointer or a free list mid-update:
 * the child starts from a fresh chunk and empty lists (what they held is
 * lost to the child, which is all). */
void base_postfork_child(void) {
  if (!nlock_postfork_child(&base_lock)) return;
  base_cur = base_end = base_ready = NULL;
  base_warm = 0;
  for (size_t i = 0; i <= BASE_NLISTS; i++) base_lists[i] = NULL;
  for (size_t i = 0; i <= BASE_NRUNS; i++) base_runs[i] = NULL;
}
