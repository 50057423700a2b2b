/* page_heap.c -- free page runs of an arena: best-fit-by-bin search,
 * carving, coalescing inside one OS mapping, and decay-based purging.
 * The arena's heap_lock is held throughout (page_heap.h). */
#include "page_heap.h"

#include <string.h>

#include "base.h"
#include "conf.h"
#include "node.h"
#include "os.h"
#include "pagemap.h"

ssize_t opt_dirty_decay_ms = 10000;

static const conf_entry_t page_heap_conf_rows[] = {
    {"dirty_decay_ms", CONF_SSIZE, &opt_dirty_decay_ms, -1, (int64_t)1 << 40, NULL, 0,
     "ms before freed pages are returned to the OS (-1: never, 0: at once)"},
};
const conf_table_t page_heap_conf_table = {page_heap_conf_rows, ARRAY_LEN(page_heap_conf_rows)};

span_t *pheap_rec_new(arena_t *a) {
  span_t *r = a->rec_cache;
  if (r != NULL) {
    a->rec_cache = r->next;
    memset(r, 0, sizeof *r);
  } else if ((r = base_alloc(sizeof *r)) == NULL) {
    return NULL;
  }
  r->arena = (uint16_t)a->index;
  return r;
}

void pheap_rec_delete(arena_t *a, span_t *r) {
  r->kind = SPAN_NONE;
  atomic_store_explicit(&r->owner_fast, NULL, memory_order_relaxed);
  r->next = a->rec_cache;
  a->rec_cache = r;
}

/* Runs up to 128 pages have a bin per length; longer ones one per power
 * of two. */
static unsigned run_bin(size_t np) {
  if (np <= 128) return (unsigned)np - 1;
  unsigned b = 128 + (63u - (unsigned)__builtin_clzl(np)) - 7;
  return b < HEAP_NBINS ? b : HEAP_NBINS - 1;
}

static void run_insert(arena_t *a, span_t *r) {
  unsigned b = run_bin(r->npages);
  nalloc_assert(r->npages > 0 && r->start >= r->chunk_lo &&
                r->start + r->npages * PAGE <= r->chunk_hi);
  r->kind = SPAN_FREE;
  r->prev = NULL;
  if (r->dirty || a->runs[b] == NULL) { /* dirty first: reuse warm pages */
    r->next = a->runs[b];
    if (r->next) r->next->prev = r;
    a->runs[b] = r;
  } else {
    span_t *t = a->runs[b];
    while (t->next) t = t->next;
    t->next = r;
    r->prev = t;
    r->next = NULL;
  }
  a->runs_nonempty[b / 64] |= (uint64_t)1 << (b % 64);
  pagemap_set_ends((void *)r->start, r->npages, r);
}

static void run_remove(arena_t *a, span_t *r) {
  unsigned b = run_bin(r->npages);
  if (r->prev) r->prev->next = r->next;
  else a->runs[b] = r->next;
  if (r->next) r->next->prev = r->prev;
  if (a->runs[b] == NULL) a->runs_nonempty[b / 64] &= ~((uint64_t)1 << (b % 64));
}

/* Runs of one bin looked at for the best fit: bounds the search where a
 * bin holds many runs (bins up to 128 pages hold one length each). */
#define RUN_FIT_SCAN 32

static span_t *run_find(arena_t *a, size_t np) {
  for (unsigned b = run_bin(np); b < HEAP_NBINS; b++) {
    uint64_t w = a->runs_nonempty[b / 64] >> (b % 64);
    if (w == 0) {
      b = (b | 63); /* skip the rest of this word */
      continue;
    }
    b += (unsigned)__builtin_ctzll(w);
    if (b >= HEAP_NBINS) break;
    /* Best fit within the bin (a bin above 128 pages spans a doubling): a
     * run much longer than the request would leave a dirty remainder that
     * no request of this size can use. Dirty runs come first, and among
     * equal fits the first is kept, so warm pages are preferred. */
    span_t *best = NULL;
    unsigned seen = 0;
    for (span_t *r = a->runs[b]; r && seen < RUN_FIT_SCAN; r = r->next, seen++)
      if (r->npages >= np && (best == NULL || r->npages < best->npages)) {
        best = r;
        if (r->npages == np) break;
      }
    if (best != NULL) return best;
  }
  return NULL;
}

static void run_purge(arena_t *a, span_t *r) {
  os_purge((void *)r->start, r->npages * PAGE);
  a->npages_dirty -= r->npages;
  a->npurged += r->npages;
  r->dirty = 0;
  r->zeroed = 1;
}

static bool run_whole_mapping(const span_t *r) {
  return r->start == r->chunk_lo && r->start + r->npages * PAGE == r->chunk_hi;
}

/* A free run that is its whole OS mapping goes back to the OS, address
 * space and all: purging it would keep the reservation (and, under strict
 * overcommit, its commit charge) for nothing. */
static void run_unmap(arena_t *a, span_t *r) {
  nalloc_assert(r->kind == SPAN_FREE && run_whole_mapping(r));
  size_t size = r->npages * PAGE;
  run_remove(a, r);
  pagemap_set_ends((void *)r->start, r->npages, NULL);
  if (r->dirty) {
    a->npages_dirty -= r->npages;
    a->npurged += r->npages;
  }
  a->mapped -= size;
  os_unmap((void *)r->start, size);
  pheap_rec_delete(a, r);
}

/* Returns a free run's pages: the mapping when the run is all of it, else
 * the pages (MADV_DONTNEED), keeping the addresses. */
static void run_release(arena_t *a, span_t *r) {
  if (run_whole_mapping(r)) run_unmap(a, r);
  else run_purge(a, r);
}

/* Record r covers the OS mapping [start, start + size) whole. */
static void rec_set_mapping(span_t *r, uintptr_t start, size_t size) {
  r->start = r->chunk_lo = start;
  r->chunk_hi = start + size;
  r->npages = size / PAGE;
}

/* Moves the mapping at `from` (`old` bytes) onto a fresh address range of
 * `size` bytes whose page-map leaves exist first, so that a move that
 * succeeds never leaves pages without entries. Its pages go along (no
 * copy) and it keeps its NUMA policy, the grown part with it. The new
 * start, or 0 (nothing changed) when the OS or metadata refuses. */
static uintptr_t heap_move_mapping(uintptr_t from, size_t old, size_t size) {
  void *p = os_reserve(size);
  if (p == NULL) return 0;
  if (!pagemap_reserve(p, size) || !os_move((void *)from, old, size, p)) {
    os_unmap(p, size);
    return 0;
  }
  return (uintptr_t)p;
}

/* Bytes of the mapping made for a request of np pages that no run fits. */
static size_t heap_grow_size(size_t np) {
  return np * PAGE > HEAP_CHUNK ? ALIGN_UP(np * PAGE, (size_t)2 << 20) : HEAP_CHUNK;
}

/* The largest dirty free run shorter than np pages that is a whole mapping
 * of its own, or NULL. */
static span_t *heap_remap_candidate(arena_t *a, size_t np) {
  unsigned lo = run_bin(HEAP_CHUNK / PAGE), b = run_bin(np);
  for (span_t *best = NULL;; b--) {
    for (span_t *r = a->runs[b]; r; r = r->next)
      if (r->dirty && r->npages < np && run_whole_mapping(r) &&
          (best == NULL || r->npages > best->npages))
        best = r;
    if (best != NULL || b == lo) return best;
  }
}

/* No free run holds np pages. Rather than map fresh memory beside dirty
 * runs too short to serve (the footprint would be the live blocks plus
 * every such run until decay), grow the largest dirty free mapping with
 * mremap: its resident pages serve the request where they are (moved, if
 * the kernel must, without a copy) and only the rest is new. A steady set
 * of large blocks replaced by others of other sizes then reuses its pages
 * instead of adding mappings. */
static bool heap_grow_remap(arena_t *a, size_t np) {
  if (np * PAGE <= HEAP_CHUNK) return false; /* a chunk of its own is as good */
  span_t *r = heap_remap_candidate(a, np);
  if (r == NULL) return false;
  size_t old = r->npages * PAGE, size = heap_grow_size(np);
  uintptr_t p = heap_move_mapping(r->start, old, size);
  if (p == 0) return false;
  run_remove(a, r);
  pagemap_set_ends((void *)r->start, r->npages, NULL);
  a->mapped += size - old;
  a->npages_dirty += (size - old) / PAGE; /* one run: dirty as a whole */
  rec_set_mapping(r, p, size);
  r->zeroed = 0;
  run_insert(a, r);
  return true;
}

/* Grows the large block s, which starts its own mapping, to np pages by
 * moving the mapping (what follows the block in it must be one free run,
 * or nothing): no copy, and the old pages do not stay beside the new
 * ones. The block gets the whole new mapping. False if it cannot. */
bool pheap_move_grow(arena_t *a, span_t *s, size_t np) {
  uintptr_t end = s->start + s->npages * PAGE;
  span_t *tail = end < s->chunk_hi ? pagemap_get((void *)end) : NULL;
  if (s->start != s->chunk_lo || np * PAGE <= HEAP_CHUNK ||
      (end < s->chunk_hi && (tail == NULL || tail->kind != SPAN_FREE || tail->start != end ||
                             tail->start + tail->npages * PAGE != s->chunk_hi)))
    return false;
  size_t old = s->chunk_hi - s->chunk_lo, size = heap_grow_size(np);
  /* A mapping that already holds np pages is not grown (pheap_take_at
   * serves that): "moving" it to a smaller one would cut its free tail,
   * and (size - old) / PAGE below would wrap. */
  if (size <= old) return false;
  uintptr_t p = heap_move_mapping(s->start, old, size);
  if (p == 0) return false;
  if (tail != NULL) { /* its pages are the block's now */
    run_remove(a, tail);
    pagemap_set_ends((void *)tail->start, tail->npages, NULL);
    if (tail->dirty) a->npages_dirty -= tail->npages;
    a->npages_active += tail->npages;
    pheap_rec_delete(a, tail);
  }
  a->mapped += size - old;
  a->npages_active += (size - old) / PAGE;
  rec_set_mapping(s, p, size);
  return true;
}

static bool heap_grow(arena_t *a, size_t np) {
  size_t size = heap_grow_size(np);
  void *p = os_map(size);
  if (p == NULL) return false;
  span_t *r = pheap_rec_new(a);
  if (r == NULL || !pagemap_reserve(p, size)) {
    if (r) pheap_rec_delete(a, r);
    os_unmap(p, size);
    return false;
  }
  node_bind_range(p, size, a->node);
  a->mapped += size;
  rec_set_mapping(r, (uintptr_t)p, size);
  r->zeroed = 1;
  run_insert(a, r);
  return true;
}

/* A free run of the same mapping as `like`, for what is left around a
 * carve. */
static bool run_rest(arena_t *a, const span_t *like, uintptr_t start, size_t np) {
  if (np == 0) return true;
  span_t *r = pheap_rec_new(a);
  if (r == NULL) return false;
  *r = (span_t){.start = start, .npages = np, .dirty = like->dirty,
                .zeroed = like->zeroed, .arena = like->arena,
                .dirty_since = like->dirty_since, .chunk_lo = like->chunk_lo,
                .chunk_hi = like->chunk_hi};
  run_insert(a, r);
  return true;
}

/* Cuts [start, start + np pages) out of free run r; what is left either
 * side goes back as free runs. */
static bool run_carve(arena_t *a, span_t *r, uintptr_t start, size_t np,
                      pages_t *out) {
  nalloc_assert(r->kind == SPAN_FREE && start >= r->start &&
                start + np * PAGE <= r->start + r->npages * PAGE);
  size_t lead = (start - r->start) / PAGE, trail = r->npages - lead - np;
  run_remove(a, r);
  if (!run_rest(a, r, r->start, lead) ||
      !run_rest(a, r, start + np * PAGE, trail)) {
    run_insert(a, r); /* out of metadata: leave it as it was */
    return false;
  }
  if (r->dirty) a->npages_dirty -= np;
  a->npages_active += np;
  *out = (pages_t){start, np, r->chunk_lo, r->chunk_hi, r->zeroed && !r->dirty};
  /* Pages handed out have no page-map entry (r's ends may have been among
   * them); the caller sets what it needs. */
  pagemap_set_ends((void *)start, np, NULL);
  pheap_rec_delete(a, r);
  return true;
}

bool pheap_alloc(arena_t *a, size_t np, size_t align, pages_t *out) {
  size_t extra = align > PAGE ? align / PAGE - 1 : 0;
  if (np + extra < np) return false;
  span_t *r = run_find(a, np + extra);
  if (r == NULL) {
    if (!heap_grow_remap(a, np + extra) && !heap_grow(a, np + extra)) return false;
    r = run_find(a, np + extra);
    if (r == NULL) return false;
  }
  uintptr_t start = align > PAGE ? ALIGN_UP(r->start, align) : r->start;
  return run_carve(a, r, start, np, out);
}

bool pheap_take_at(arena_t *a, uintptr_t at, size_t np, const pages_t *owner) {
  if (at >= owner->chunk_hi) return false;
  span_t *r = pagemap_get((void *)at);
  if (r == NULL || r->kind != SPAN_FREE || r->start != at || r->npages < np)
    return false;
  pages_t got;
  return run_carve(a, r, at, np, &got);
}

static void heap_decay(arena_t *a, uint64_t now, bool all) {
  uint64_t decay = (uint64_t)opt_dirty_decay_ms * 1000000u;
  if (!all && opt_dirty_decay_ms < 0) return;
  if (!all && now - a->last_decay_ns < decay / 8 + 1000000u) return;
  a->last_decay_ns = now;
  for (unsigned b = 0; b < HEAP_NBINS; b++)
    for (span_t *r = a->runs[b], *next; r; r = next) {
      next = r->next; /* run_release may recycle r */
      if (r->dirty && (all || now - r->dirty_since >= decay)) run_release(a, r);
      else if (all && run_whole_mapping(r)) run_unmap(a, r);
    }
}

/* Merges free run s with the free run that ends where it starts and the
 * one that starts where it ends, inside s's mapping. Page-map invariant: a
 * page has an entry only if it is an end of a free run or large block, or
 * any page of a small span; junctions become interior and lose theirs. */
static void run_coalesce(arena_t *a, span_t *s) {
  span_t *l = s->start > s->chunk_lo ? pagemap_get((void *)(s->start - PAGE)) : NULL;
  if (l && l->kind == SPAN_FREE && l->start + l->npages * PAGE == s->start) {
    run_remove(a, l);
    pagemap_set((void *)(s->start - PAGE), NULL); /* the junction is interior */
    pagemap_set((void *)s->start, NULL);
    if (!l->dirty) a->npages_dirty += l->npages;
    s->start = l->start;
    s->npages += l->npages;
    pheap_rec_delete(a, l);
  }
  uintptr_t end = s->start + s->npages * PAGE;
  span_t *r = end < s->chunk_hi ? pagemap_get((void *)end) : NULL;
  if (r && r->kind == SPAN_FREE && r->start == end) {
    run_remove(a, r);
    pagemap_set((void *)(end - PAGE), NULL);
    pagemap_set((void *)end, NULL);
    if (!r->dirty) a->npages_dirty += r->npages;
    s->npages += r->npages;
    pheap_rec_delete(a, r);
  }
}

void pheap_free(arena_t *a, const pages_t *pg) {
  uint64_t now = nalloc_now_ns();
  span_t *s = pheap_rec_new(a);
  a->npages_active -= pg->npages;
  a->npages_dirty += pg->npages;
  if (s == NULL) return; /* out of metadata: the pages stay unusable */
  s->start = pg->start;
  s->npages = pg->npages;
  s->chunk_lo = pg->chunk_lo;
  s->chunk_hi = pg->chunk_hi;
  s->kind = SPAN_FREE;
  s->dirty = 1;
  s->dirty_since = now;
  run_coalesce(a, s);
  run_insert(a, s);
  if (opt_dirty_decay_ms == 0 || (run_whole_mapping(s) && s->npages * PAGE >= HEAP_UNMAP_MIN))
    run_release(a, s);
  else
    heap_decay(a, now, false);
}

size_t pheap_purge(arena_t *a, bool all) {
  uint64_t before = a->npurged;
  heap_decay(a, nalloc_now_ns(), all);
  return (size_t)(a->npurged - before);
}
