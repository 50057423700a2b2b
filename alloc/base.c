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
 * length through a node each (a run's own pages may be given back, so no
 * link lives in them). A freed run stays resident -- the next run of its
 * length is the most recently freed -- until it has been free for a second
 * (BASE_DECAY_MS; dirty_decay_ms if shorter, 0: at once, -1: never:
 * base_decay), and then its pages go back to the kernel (MADV_DONTNEED):
 * it is reused as it is, its pages reading zero, faulted in as they are
 * written. Up to BASE_WARM bytes of freed runs stay resident whatever
 * their age; past them, a run carved while others sit free sends as many
 * of them back at once (base_purge_due's swap). These are mostly the
 * sampled-slot arrays of exact profiling (8 bytes a slot of every small
 * span, 4-8 KiB for most spans, made and freed with the span): kept
 * resident on exact-size lists, freed arrays held ~4.2 MB at the exit of
 * CPython's tests against ~0.7 MB live. Purged at once past BASE_WARM
 * instead, a program that gives spans back and makes new ones within
 * seconds (bench-list in exact mode) faulted its arrays in again and
 * again: 10.7k -> 84k page faults, 1.42 -> 1.61 s. Kept for all of
 * dirty_decay_ms (10 s) like user pages, they raised the peak of CPython's
 * tests in exact mode by ~2 MB (medians of 5, 68.4 -> 70.5 MB); a second,
 * 69.7 MB: a span remade within a second gets its array back warm.
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
#include "page_heap.h" /* opt_dirty_decay_ms */

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
/* Freed runs kept resident whatever their age (bytes). */
#define BASE_WARM ((size_t)256 << 10)
/* ms a freed run past BASE_WARM stays resident, at most: the arrays are
 * the profiler's overhead, worth keeping only for spans remade soon */
#define BASE_DECAY_MS 1000

/* How long a freed run past BASE_WARM stays resident (ns). */
static uint64_t base_decay_ns(void) {
  ssize_t ms = opt_dirty_decay_ms < BASE_DECAY_MS ? opt_dirty_decay_ms : BASE_DECAY_MS;
  return (uint64_t)ms * 1000000u;
}

typedef struct base_free_s {
  struct base_free_s *next;
} base_free_t;

/* A freed page run. Resident ones are on their length's warm list, newest
 * first (prev links it both ways, so the oldest is purged from the tail);
 * purged ones on its cold list. */
typedef struct base_run_s {
  struct base_run_s *next, *prev;
  char *addr;
  uint64_t freed_ns; /* when it was freed (warm runs) */
} base_run_t;

typedef struct {
  base_run_t *head, *tail;
} base_runq_t;

/* pages to fault in once the lock is dropped */
typedef struct {
  char *from, *to;
} base_pop_t;

static nlock_t base_lock = NLOCK_INITIALIZER(LOCK_BASE);
static char *base_cur, *base_end; /* small blocks bump up, runs down */
static char *base_ready; /* the chunk is populated up to here */
NALLOC_BIG_BSS static base_free_t *base_lists[BASE_NLISTS + 1];
static base_runq_t base_warm_runs[BASE_NRUNS + 1];
static base_run_t *base_cold_runs[BASE_NRUNS + 1];
static _Atomic size_t base_mapped;
/* bytes purged: of freed runs, and the whole pages that the bump pointer
 * left at the end of a chunk (given up: bumping continues in a new one) */
static _Atomic size_t base_purged;
static size_t base_warm; /* bytes of freed runs resident */
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

/* Takes warm run n (of `len` pages) off its list. The lock is held. */
static void base_warm_unlink(base_run_t *n, size_t len) {
  base_runq_t *q = &base_warm_runs[len];
  if (n->prev != NULL) n->prev->next = n->next;
  else q->head = n->next;
  if (n->next != NULL) n->next->prev = n->prev;
  else q->tail = n->prev;
  base_warm -= len * PAGE;
}

/* The warm run that has been free longest (its length in *len), or NULL.
 * The lock is held. */
static base_run_t *base_oldest(size_t *len) {
  base_run_t *old = NULL;
  for (size_t l = 1; l <= BASE_NRUNS; l++) {
    base_run_t *t = base_warm_runs[l].tail;
    if (t != NULL && (old == NULL || t->freed_ns < old->freed_ns)) old = t, *len = l;
  }
  return old;
}

/* The warm run that has been free longest, if it is due to be purged at
 * `now` (all: whatever its age, down to no warm run at all); else NULL.
 * Past BASE_WARM a run is due once it has been free for base_decay_ns,
 * or at once while *swap bytes are owed (taken off). The lock is held. */
static base_run_t *base_due(uint64_t now, bool all, size_t *swap, size_t *len) {
  if (!all && (base_warm <= BASE_WARM || opt_dirty_decay_ms < 0)) return NULL;
  base_run_t *old = base_oldest(len);
  if (old == NULL || all) return old;
  if (*swap > 0) {
    *swap = *swap > *len * PAGE ? *swap - *len * PAGE : 0;
    return old;
  }
  uint64_t decay = base_decay_ns();
  return old->freed_ns <= now && now - old->freed_ns >= decay ? old : NULL;
}

/* Purges the warm runs that are due (base_due; swap: bytes of them to
 * purge whatever their age, oldest first), in batches: taken off
 * their lists under the lock, purged without it (they are nobody's
 * meanwhile), then put on their cold lists. The lock is held on entry
 * and on return. */
#define BASE_PURGE_BATCH 16
static void base_purge_due(uint64_t now, bool all, size_t swap) {
  for (;;) {
    base_run_t *b[BASE_PURGE_BATCH];
    size_t lens[BASE_PURGE_BATCH], k = 0;
    while (k < BASE_PURGE_BATCH && (b[k] = base_due(now, all, &swap, &lens[k])) != NULL) {
      base_warm_unlink(b[k], lens[k]);
      k++;
    }
    if (k == 0) return;
    nlock_unlock(&base_lock);
    for (size_t i = 0; i < k; i++) os_purge(b[i]->addr, lens[i] * PAGE);
    nlock_lock(&base_lock);
    for (size_t i = 0; i < k; i++) {
      b[i]->next = base_cold_runs[lens[i]];
      base_cold_runs[lens[i]] = b[i];
      atomic_fetch_add_explicit(&base_purged, lens[i] * PAGE, memory_order_relaxed);
    }
    if (k < BASE_PURGE_BATCH) return;
  }
}

/* A page run of `size` bytes (a multiple of PAGE, at most BASE_MAX): the
 * most recently freed one of its length, else a purged one (no memset:
 * its pages read zero), else carved. */
static void *base_alloc_run(size_t size) {
  size_t len = size / PAGE;
  nlock_lock(&base_lock);
  base_run_t *n = base_warm_runs[len].head;
  bool warm = n != NULL;
  if (warm) {
    base_warm_unlink(n, len);
  } else {
    /* this run's pages will be faulted in: as many resident ones of other
     * lengths, unused, go back, so a shift in the lengths asked for does
     * not make the runs' resident pages grow */
    if (base_warm > BASE_WARM) base_purge_due(nalloc_now_ns(), false, size);
    if ((n = base_cold_runs[len]) != NULL) {
      base_cold_runs[len] = n->next;
      atomic_fetch_sub_explicit(&base_purged, size, memory_order_relaxed);
    } else {
      if ((size_t)(base_end - base_cur) < size && !base_chunk()) {
        nlock_unlock(&base_lock);
        return NULL;
      }
      base_end -= size; /* page aligned: runs are whole pages */
      char *r = base_end;
      nlock_unlock(&base_lock);
      return r; /* never written: zero */
    }
  }
  char *p = n->addr;
  base_push(n, sizeof *n);
  nlock_unlock(&base_lock);
  if (warm) memset(p, 0, size);
  return p;
}

/* Frees page run p: resident, newest on its length's list; then whatever
 * has become due is purged. Its node is a small block: with no memory for
 * one, the run is purged and lost (its address space stays mapped). */
static void base_free_run(void *p, size_t size) {
  uint64_t now = nalloc_now_ns();
  base_pop_t pop = {NULL, NULL};
  bool fresh;
  nlock_lock(&base_lock);
  base_run_t *n = base_small(sizeof *n, &pop, &fresh);
  if (n != NULL) {
    base_runq_t *q = &base_warm_runs[size / PAGE];
    *n = (base_run_t){q->head, NULL, p, now};
    if (q->head != NULL) q->head->prev = n;
    else q->tail = n;
    q->head = n;
    base_warm += size;
    base_purge_due(now, false, 0);
  }
  nlock_unlock(&base_lock);
  base_populate(&pop);
  if (n == NULL) {
    os_purge(p, size);
    atomic_fetch_add_explicit(&base_purged, size, memory_order_relaxed);
  }
}

void base_decay(bool all) {
  uint64_t now = nalloc_now_ns();
  nlock_lock(&base_lock);
  base_purge_due(now, all, 0);
  nlock_unlock(&base_lock);
}

uint64_t base_decay_next(void) {
  if (opt_dirty_decay_ms < 0) return UINT64_MAX;
  size_t len;
  nlock_lock(&base_lock);
  base_run_t *old = base_warm > BASE_WARM ? base_oldest(&len) : NULL;
  uint64_t next = old != NULL ? old->freed_ns + base_decay_ns() : UINT64_MAX;
  nlock_unlock(&base_lock);
  return next;
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
  for (size_t i = 0; i <= BASE_NRUNS; i++) {
    base_warm_runs[i] = (base_runq_t){NULL, NULL};
    base_cold_runs[i] = NULL;
  }
}
