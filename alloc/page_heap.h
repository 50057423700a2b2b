/* page_heap.h -- an arena's pages: free runs, carved for small spans and
 * large blocks and merged back when freed, returned to the OS after
 * dirty_decay_ms (decay) or at once (purge).
 *
 * Every function here is called with the arena's heap_lock held. A free
 * run is a span_t of kind SPAN_FREE found in the page map by its first
 * and last page; the pages a caller gets are its own to map. */
#ifndef NALLOC_PAGE_HEAP_H
#define NALLOC_PAGE_HEAP_H

#include "conf.h"
#include "types.h"

/* ms a freed page stays dirty before decay purges it (-1: never, 0: at
 * once): read here and by the background thread. */
extern ssize_t opt_dirty_decay_ms;
extern const conf_table_t page_heap_conf_table;

#define HEAP_CHUNK ((size_t)4 << 20)   /* bytes mapped at a time */
#define HEAP_POPULATE ((size_t)64 << 10) /* fresh bytes faulted in at once */
/* A freed block that had a mapping of its own this big is unmapped at
 * once rather than kept for reuse until decay: glibc unmaps blocks this
 * big at free too (its mmap threshold never exceeds 32 MiB), and faulting
 * them back in is small beside the work of filling them. */
#define HEAP_UNMAP_MIN ((size_t)32 << 20)

/* A run of pages handed out by the page heap. */
typedef struct pages_s {
  uintptr_t start;
  size_t npages;
  uintptr_t chunk_lo, chunk_hi; /* the OS mapping it lies in */
  bool zeroed;                  /* the pages read as zero */
} pages_t;

/* np pages aligned to `align` (a power of two; PAGE or less: no
 * constraint), mapping more memory when no free run fits. False when the
 * OS refuses. */
bool pheap_alloc(arena_t *a, size_t np, size_t align, pages_t *out);
/* Gives pages back (their page-map entries are no longer the caller's:
 * interior entries must be NULL). Merges with free neighbours, then runs
 * decay. */
void pheap_free(arena_t *a, const pages_t *pg);
/* Takes `np` pages starting exactly at `at` if a free run begins there and
 * is long enough (growing a large block in place). */
bool pheap_take_at(arena_t *a, uintptr_t at, size_t np, const pages_t *owner);
/* Grows large block s, which starts a mapping of its own, to at least np
 * pages by moving that mapping (mremap: no copy). s->start changes; the
 * caller moves its page-map entries. False if it cannot. */
bool pheap_move_grow(arena_t *a, span_t *s, size_t np);
/* Purges dirty runs now: all of them, or those past decay; a run that is
 * a whole OS mapping is unmapped (with all, also a clean one). Returns
 * the pages purged. */
size_t pheap_purge(arena_t *a, bool all);

/* Header-only records (free runs, large blocks), recycled per arena. */
span_t *pheap_rec_new(arena_t *a);
void pheap_rec_delete(arena_t *a, span_t *r);

#endif
