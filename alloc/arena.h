/* arena.h -- arenas: per-class bins of small spans, and a page heap.
 *
 * Thread caches refill from and flush to an arena's bins (one lock per
 * bin). Bins get spans from the arena's page heap (one lock per arena),
 * which gets memory from the OS, bound to the arena's NUMA node. */
#ifndef NALLOC_ARENA_H
#define NALLOC_ARENA_H

#include "span.h"

#define ARENAS_MAX 1024
#define HEAP_NBINS 160
#define HEAP_CHUNK ((size_t)4 << 20)
#define HEAP_POPULATE ((size_t)64 << 10) /* see bin_new_span */

typedef struct bin_s {
  nlock_t lock;
  span_t *partial; /* spans with free slots */
  size_t nspans;
  size_t nout;     /* slots handed out (live or in thread caches) */
  uint64_t nmalloc, ndalloc;
} bin_t;

typedef struct arena_s {
  unsigned index, node;
  _Atomic unsigned nthreads;
  nlock_t heap_lock;
  span_t *runs[HEAP_NBINS]; /* free runs by size; dirty at the head */
  uint64_t runs_nonempty[(HEAP_NBINS + 63) / 64];
  span_t *span_cache;       /* recycled span_t records */
  size_t npages_active;     /* pages in small and large spans */
  size_t npages_dirty;      /* free pages that may be resident */
  size_t mapped;            /* bytes mapped for this arena */
  size_t large_allocated;   /* usable bytes of live large spans */
  uint64_t nmalloc_large, ndalloc_large, npurged;
  uint64_t last_decay_ns;
  uintptr_t pop_lo, pop_hi; /* the last run of fresh pages faulted in
                               ahead (bin_new_span) */
  bin_t bins[SC_NSMALL];
} arena_t;

extern _Atomic(arena_t *) arenas[ARENAS_MAX];
extern unsigned arenas_count; /* arenas in use (narenas) */

arena_t *arena_get(unsigned i); /* creates on first use; NULL on OOM */

/* Small objects. */
unsigned arena_refill(arena_t *a, unsigned cls, void **out, unsigned n);
void arena_flush(void *const *ptrs, unsigned n);
/* Large objects (> SC_SMALL_MAX, or alignment > PAGE). */
void *arena_alloc_large(arena_t *a, size_t size, size_t align, bool zero);
void arena_free_large(span_t *s);
/* Shrinks or grows a large span in place; true on success. */
bool arena_resize_large(span_t *s, size_t size);

/* Purges dirty pages now: all of them (all=true) or those past decay.
 * Returns the number of pages purged. */
size_t arena_purge(arena_t *a, bool all);

typedef struct arena_stats_s {
  size_t allocated, active, dirty, mapped;
  uint64_t nmalloc, ndalloc, npurged;
  unsigned nthreads;
} arena_stats_t;
void arena_stats(arena_t *a, arena_stats_t *out);

void arena_prefork(void);
void arena_postfork_parent(void);
void arena_postfork_child(void);

/* Called when a span's memory is mapped: bind it to the arena's node. */
void numa_bind_range(void *p, size_t size, unsigned node);

#endif
