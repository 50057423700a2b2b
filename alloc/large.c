/* large.c -- large blocks over the arena's page heap: allocation (zeroed
 * cheaply for calloc), free, and resizing in place. */
#include "large.h"

#include <errno.h>
#include <string.h>

#include "arena.h"
#include "background.h"
#include "lock.h"
#include "node.h"
#include "os.h"
#include "page_heap.h"
#include "pagemap.h"

/* calloc of a reused run this big drops its pages instead of writing
 * zeros: the parts the program never touches stay out of the RSS. */
#define LARGE_PURGE_ZERO_MIN ((size_t)1 << 20)

static void large_map(span_t *s) { pagemap_set_ends((void *)s->start, s->npages, s); }
static void large_unmap(span_t *s) { pagemap_set_ends((void *)s->start, s->npages, NULL); }

/* The arena whose page heap serves large blocks for threads of arena a:
 * the first of a's NUMA node. Large blocks are few and each costs far more
 * in page faults than in the lock, while one page heap per node lets a
 * block freed by any thread serve the next request of any other: with a
 * page heap per arena, 16 threads of `bench-large` over 2 arenas peaked
 * at 556 MiB resident, with one at 413 MiB, in less CPU time (the faults
 * of fresh mappings that a freed block elsewhere would have saved). */
static arena_t *large_arena(arena_t *a) {
  unsigned first = node_first_arena(a->index);
  arena_t *b = first == a->index ? a : arena_get(first);
  return b != NULL ? b : a;
}

void *large_alloc(arena_t *a, size_t size, size_t align, bool zero) {
  return large_alloc_in(large_arena(a), size, align, zero);
}

void *large_alloc_in(arena_t *a, size_t size, size_t align, bool zero) {
  size_t np = ALIGN_UP(size, PAGE) / PAGE;
  if (size > ((size_t)1 << ADDR_BITS) || np == 0) {
    errno = ENOMEM;
    return NULL;
  }
  a = arena_usable(a);
  pages_t pg;
  nlock_lock(&a->heap_lock);
  span_t *s = pheap_rec_new(a);
  if (s != NULL && !pheap_alloc(a, np, align, &pg)) {
    pheap_rec_delete(a, s);
    s = NULL;
  }
  if (s != NULL) {
    s->start = pg.start;
    s->npages = np;
    s->chunk_lo = pg.chunk_lo;
    s->chunk_hi = pg.chunk_hi;
    s->zeroed = pg.zeroed;
    s->kind = SPAN_LARGE;
    s->usize = np * PAGE;
    large_map(s);
    a->large_allocated += s->usize;
    a->nmalloc_large++;
  }
  nlock_unlock(&a->heap_lock);
  background_poll();
  if (s == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  if (zero && !s->zeroed) {
    if (size >= LARGE_PURGE_ZERO_MIN) os_purge((void *)s->start, np * PAGE);
    else memset((void *)s->start, 0, size);
  }
  return (void *)s->start;
}

void large_free(span_t *s) {
  arena_t *a = arena_get(s->arena);
  nalloc_assert(s->kind == SPAN_LARGE && pagemap_get((void *)s->start) == s);
  if (a->broken) return; /* fork child: its page heap may be mid-update */
  nlock_lock(&a->heap_lock);
  /* read under the lock: heap_gather may have moved the free rest of the
   * block's mapping away (chunk_hi) */
  pages_t pg = {s->start, s->npages, s->chunk_lo, s->chunk_hi, false};
  a->large_allocated -= s->usize;
  a->ndalloc_large++;
  large_unmap(s);
  pheap_rec_delete(a, s);
  pheap_free(a, &pg);
  nlock_unlock(&a->heap_lock);
  background_poll(); /* the page heap may have asked for the decay thread */
}

/* Entries move with the block's end: the old ends are cleared before the
 * new ones are set, so a one-page block (first page = last page) keeps its
 * entry. */
bool large_resize(span_t *s, size_t size) {
  size_t np = ALIGN_UP(size, PAGE) / PAGE;
  if (np == s->npages) return true;
  arena_t *a = arena_get(s->arena);
  if (a->broken) return false;
  bool ok = false;
  nlock_lock(&a->heap_lock);
  pages_t own = {s->start, s->npages, s->chunk_lo, s->chunk_hi, false}; /* as large_free */
  if (np < s->npages) {
    pages_t tail = {s->start + np * PAGE, s->npages - np, s->chunk_lo, s->chunk_hi, false};
    large_unmap(s);
    s->npages = np;
    large_map(s);
    pheap_free(a, &tail);
    ok = true;
  } else if (pheap_take_at(a, s->start + s->npages * PAGE, np - s->npages, &own)) {
    large_unmap(s);
    s->npages = np;
    large_map(s);
    ok = true;
  }
  if (ok) {
    a->large_allocated = a->large_allocated - s->usize + np * PAGE;
    s->usize = np * PAGE;
  }
  nlock_unlock(&a->heap_lock);
  background_poll();
  return ok;
}

void *large_move_grow(span_t *s, size_t size) {
  size_t np = ALIGN_UP(size, PAGE) / PAGE;
  arena_t *a = arena_get(s->arena);
  if (a->broken || np <= s->npages) return NULL;
  nlock_lock(&a->heap_lock);
  uintptr_t old_start = s->start;
  size_t old_np = s->npages;
  bool ok = pheap_move_grow(a, s, np);
  if (ok) {
    pagemap_set_ends((void *)old_start, old_np, NULL);
    large_map(s);
    a->large_allocated = a->large_allocated - s->usize + s->npages * PAGE;
    s->usize = s->npages * PAGE;
  }
  nlock_unlock(&a->heap_lock);
  return ok ? (void *)s->start : NULL;
}
