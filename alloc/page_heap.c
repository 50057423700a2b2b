/* page_heap.c -- free page runs of an arena: best-fit-by-bin search,
 * carving, coalescing inside one OS mapping, and staged decay.
 * The arena's heap_lock is held throughout (page_heap.h).
 *
 * A free run is in one of three stages (jemalloc's terms):
 *   dirty  freed, resident, reused as it is;
 *   muzzy  given back with MADV_FREE: still resident and reused without a
 *          fault unless the kernel reclaimed it meanwhile (it may, under
 *          memory pressure, without writing it anywhere);
 *   clean  given back with MADV_DONTNEED (or unmapped): out of the RSS,
 *          faults again (~11 us a page here) when reused.
 * A run freed at t is dirty until t + dirty_decay_ms - muzzy_decay_ms,
 * muzzy until t + dirty_decay_ms, clean after: whatever the stages, freed
 * memory leaves the resident set within dirty_decay_ms. A run also goes
 * muzzy early when free pages outnumber live ones (decay_by_amount). */
#include "page_heap.h"

#include <string.h>

#include "background.h"
#include "base.h"
#include "conf.h"
#include "node.h"
#include "os.h"
#include "pagemap.h"

ssize_t opt_dirty_decay_ms = 10000;
ssize_t opt_muzzy_decay_ms = -1;

static const conf_entry_t page_heap_conf_rows[] = {
    {"dirty_decay_ms", CONF_SSIZE, &opt_dirty_decay_ms, -1, (int64_t)1 << 40, NULL, 0,
     "ms before freed pages are returned to the OS (-1: never, 0: at once)"},
    {"muzzy_decay_ms", CONF_SSIZE, &opt_muzzy_decay_ms, -1, (int64_t)1 << 40, NULL, 0,
     "the last ms of dirty_decay_ms during which freed pages are MADV_FREE'd "
     "(-1: half of it, 0: none)"},
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
/* Requests up to this many pages (small spans) take a dirty run of a
 * higher bin before a clean best fit: pages a span gave back are resident,
 * fresh ones would be faulted in on top. */
#define RUN_WARM_MAX 64

/* Best fit within bin b (a bin above 128 pages spans a doubling): a run
 * much longer than the request would leave a dirty remainder that no
 * request of this size can use. Dirty runs come first, and among equal
 * fits the first is kept, so warm pages are preferred. */
static span_t *run_best(arena_t *a, unsigned b, size_t np) {
  span_t *best = NULL;
  unsigned seen = 0;
  for (span_t *r = a->runs[b]; r && seen < RUN_FIT_SCAN; r = r->next, seen++)
    if (r->npages >= np && (best == NULL || r->npages < best->npages)) {
      best = r;
      if (r->npages == np) break;
    }
  return best;
}

static span_t *run_dirty(arena_t *a, unsigned b, size_t np) {
  unsigned seen = 0;
  for (span_t *r = a->runs[b]; r && seen < RUN_FIT_SCAN; r = r->next, seen++)
    if (r->dirty && r->npages >= np) return r;
  return NULL;
}

/* The best fit of the first bin that has one; for a small span whose best
 * fit is clean, the first dirty run that fits, of any bin, before it. */
static span_t *run_find(arena_t *a, size_t np) {
  span_t *clean = NULL, *r;
  for (unsigned b = run_bin(np); b < HEAP_NBINS; b++) {
    uint64_t w = a->runs_nonempty[b / 64] >> (b % 64);
    if (w == 0) {
      b = (b | 63); /* skip the rest of this word */
      continue;
    }
    b += (unsigned)__builtin_ctzll(w);
    if (b >= HEAP_NBINS) break;
    if (clean == NULL) {
      if ((r = run_best(a, b, np)) == NULL) continue;
      if (r->dirty || np > RUN_WARM_MAX) return r;
      clean = r;
    }
    if ((r = run_dirty(a, b, np)) != NULL) return r;
  }
  return clean;
}

/* Adds (or takes away) a free run's resident pages to its arena's total
 * of its stage: dirty or muzzy (clean pages are not counted). */
static void run_account(arena_t *a, const span_t *r, bool add) {
  if (!r->dirty) return;
  size_t *n = r->muzzy ? &a->npages_muzzy : &a->npages_dirty;
  nalloc_assert(r->nres <= r->npages && (add || *n >= r->nres));
  *n = add ? *n + r->nres : *n - r->nres;
}

static void run_purge(arena_t *a, span_t *r) {
  os_purge((void *)r->start, r->npages * PAGE);
  run_account(a, r, false);
  a->npurged += r->nres;
  r->nres = 0;
  a->npurge_calls++;
  r->dirty = 0;
  r->muzzy = 0;
  r->zeroed = 1;
}

/* Dirty to muzzy: the pages stay where they are for a reuse that costs no
 * fault, but the kernel may take them. */
static void run_muzzy(arena_t *a, span_t *r) {
  nalloc_assert(r->dirty && !r->muzzy);
  if (!os_purge_lazy((void *)r->start, r->npages * PAGE)) return;
  run_account(a, r, false);
  r->muzzy = 1;
  run_account(a, r, true);
  a->nmuzzied += r->nres;
  a->npurge_calls++;
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
    run_account(a, r, false);
    a->npurged += r->nres;
  }
  a->npurge_calls++;
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
 * start, or 0 (nothing changed) when the OS or metadata refuses. A
 * mapping the kernel cannot grow as it moves it (one put together from
 * pieces, heap_gather: several kernel mappings) is moved as it is beside
 * fresh pages mapped first (with split: one more kernel mapping). */
static uintptr_t heap_move_mapping(uintptr_t from, size_t old, size_t size, bool split) {
  void *p = os_reserve(size);
  if (p == NULL) return 0;
  if (!pagemap_reserve(p, size)) {
    os_unmap(p, size);
    return 0;
  }
  if (os_move((void *)from, old, size, p)) return (uintptr_t)p;
  if (!split || !os_map_at((char *)p + old, size - old) || !os_move((void *)from, old, old, p)) {
    os_unmap(p, size);
    return 0;
  }
  return (uintptr_t)p;
}

/* Bytes of the mapping made for a request of np pages that no run fits. */
static size_t heap_grow_size(size_t np) {
  return np * PAGE > HEAP_CHUNK ? ALIGN_UP(np * PAGE, (size_t)2 << 20) : HEAP_CHUNK;
}

/* The kind of a run next to one this arena's lock covers: a sampled
 * block's page run (sample_run.c) turns SPAN_LARGE <-> SPAN_KEPT without
 * the lock, so the read is atomic (either is "not free" here). */
static inline unsigned run_kind(const span_t *r) {
  return __atomic_load_n(&r->kind, __ATOMIC_RELAXED);
}

/* Pieces moved under one request at most (each is one more kernel
 * mapping until it is freed and moved again), and the fewest resident
 * pages worth a move. */
#define GATHER_MAX 8
#define GATHER_MIN_PAGES ((size_t)64)

/* The large block that starts free run r's mapping when r is the rest of
 * it (the mapping holds these two records only), else NULL. Sampled
 * blocks' runs change kind without the lock: never theirs. */
static span_t *run_tail_of(const span_t *r) {
  if (r->start == r->chunk_lo || r->start + r->npages * PAGE != r->chunk_hi) return NULL;
  span_t *b = pagemap_get((void *)(r->start - PAGE));
  if (b == NULL || run_kind(b) != SPAN_LARGE || b->sample_run || b->start != r->chunk_lo ||
      b->start + b->npages * PAGE != r->start)
    return NULL;
  return b;
}

/* A dirty run whose resident pages can go elsewhere with mremap (page
 * tables move; no copy, no fault) without a hole inside anyone's mapping:
 * a whole mapping, or the rest of one after the large block at its start.
 * Its resident pages are taken to be its first nres (a freed block and
 * the untouched rest of its mapping, or what a carve from the start left). */
static bool run_movable(const span_t *r) {
  return r->dirty && r->nres >= GATHER_MIN_PAGES &&
         (run_whole_mapping(r) || run_tail_of(r) != NULL);
}

/* Each piece moved by heap_gather stays a kernel mapping (VMA) of its
 * own until its mapping is unmapped: the kernel joins moved pages with no
 * neighbour. So gathering stops while the process holds an eighth of the
 * mappings it may have (vm.max_map_count, 65530 by default), well short
 * of the limit where mmap, and malloc with it, would fail. The count is
 * read from /proc/self/maps again after GATHER_VMA_STEP pieces, or after
 * GATHER_VMA_STEP requests gathering refused. */
#define GATHER_VMA_STEP 1024
static _Atomic size_t gather_budget; /* pieces left before the next count */
static _Atomic unsigned gather_refused;

static bool gather_allowed(unsigned n) {
  size_t b = atomic_load_explicit(&gather_budget, memory_order_relaxed), need = n + 2;
  while (b >= need)
    if (atomic_compare_exchange_weak_explicit(&gather_budget, &b, b - need,
                                              memory_order_relaxed, memory_order_relaxed))
      return true;
  if (atomic_load_explicit(&gather_refused, memory_order_relaxed) > 0) {
    atomic_fetch_sub_explicit(&gather_refused, 1, memory_order_relaxed);
    return false;
  }
  size_t lim = os_vma_max() / 8, cnt = os_vma_count();
  if (cnt == SIZE_MAX || cnt + need >= lim) {
    atomic_store_explicit(&gather_refused, GATHER_VMA_STEP, memory_order_relaxed);
    return false;
  }
  lim -= cnt + need;
  atomic_store_explicit(&gather_budget, lim < GATHER_VMA_STEP ? lim : GATHER_VMA_STEP,
                        memory_order_relaxed);
  return true;
}

/* Page-weighted mean of two free times (n1, n2 pages). */
static uint64_t age_mean(uint64_t t1, size_t n1, uint64_t t2, size_t n2) {
  if (n1 + n2 == 0) return t2;
  if (t2 < t1) return t1 - (uint64_t)((t1 - t2) * (unsigned __int128)n2 / (n1 + n2));
  return t1 + (uint64_t)((t2 - t1) * (unsigned __int128)n2 / (n1 + n2));
}

/* Up to GATHER_MAX movable runs, most resident pages first, as few as
 * hold np pages. Their count. */
static unsigned gather_pick(arena_t *a, size_t np, span_t **pick) {
  unsigned n = 0;
  for (unsigned b = HEAP_NBINS; b-- > run_bin(GATHER_MIN_PAGES);) {
    unsigned seen = 0;
    for (span_t *r = a->runs[b]; r && seen < RUN_FIT_SCAN; r = r->next, seen++) {
      if (!run_movable(r) || (n == GATHER_MAX && r->nres <= pick[n - 1]->nres)) continue;
      unsigned i = n < GATHER_MAX ? n++ : n - 1;
      for (; i > 0 && pick[i - 1]->nres < r->nres; i--) pick[i] = pick[i - 1];
      pick[i] = r;
    }
  }
  size_t sum = 0;
  for (unsigned i = 0; i < n; i++)
    if ((sum += pick[i]->nres) >= np) return i + 1;
  return n;
}

/* The first k pages of movable run r have moved away: the block before
 * it (if any) now ends its mapping, and the rest of r, a mapping of its
 * own, stays a free run without resident pages counted (not known zero:
 * the counts are an estimate). */
static void gather_take(arena_t *a, span_t *r, size_t k) {
  span_t *blk = run_tail_of(r);
  run_remove(a, r);
  pagemap_set_ends((void *)r->start, r->npages, NULL);
  run_account(a, r, false);
  a->mapped -= k * PAGE;
  if (blk != NULL) blk->chunk_hi = r->start;
  if (k == r->npages) {
    pheap_rec_delete(a, r);
    return;
  }
  r->start += k * PAGE;
  r->chunk_lo = r->start;
  r->npages -= k;
  r->nres = 0;
  r->muzzy = 0;
  run_insert(a, r);
}

/* No free run holds np pages. Rather than map fresh memory beside dirty
 * runs too short to serve (the footprint would be the live blocks plus
 * every such run until decay), move the resident pages of the largest
 * movable dirty runs side by side onto a new address range with mremap,
 * fresh pages after them if they are not enough, and serve the request
 * from that. Whatever dirty pages the page heap holds in whole mappings
 * or after a block then serve a request larger than any of them, and a
 * set of large blocks replaced by others of other sizes keeps its
 * footprint at its live bytes. True when a run of np pages was made. */
static bool heap_gather(arena_t *a, size_t np) {
  span_t *pick[GATHER_MAX];
  if (np * PAGE <= HEAP_CHUNK) return false; /* a chunk of its own is as good */
  unsigned n = gather_pick(a, np, pick);
  if (n == 0 || !gather_allowed(n)) return false;
  size_t moved = 0, size;
  for (unsigned i = 0; i < n; i++) moved += pick[i]->nres;
  size = moved >= np ? moved * PAGE : heap_grow_size(np);
  span_t *g = pheap_rec_new(a);
  void *p = g != NULL ? os_reserve(size) : NULL;
  if (p == NULL || !pagemap_reserve(p, size)) {
    if (p != NULL) os_unmap(p, size);
    if (g != NULL) pheap_rec_delete(a, g);
    return false;
  }
  uint64_t since = 0;
  size_t off = 0;
  for (unsigned i = 0; i < n; i++) {
    span_t *r = pick[i];
    size_t k = r->nres;
    if (!os_move((void *)r->start, k * PAGE, k * PAGE, (char *)p + off)) break;
    since = age_mean(since, off / PAGE, r->dirty_since, k);
    gather_take(a, r, k);
    off += k * PAGE;
  }
  if (off < size && !os_map_at((char *)p + off, size - off)) {
    os_unmap((char *)p + off, size - off);
    size = off;
  }
  if (size == 0) {
    pheap_rec_delete(a, g);
    return false;
  }
  if (size > off) node_bind_range((char *)p + off, size - off, a->node);
  a->mapped += size;
  background_note_mapped(a->mapped);
  rec_set_mapping(g, (uintptr_t)p, size);
  g->nres = off / PAGE;
  g->dirty = off > 0;
  g->dirty_since = since;
  run_account(a, g, true);
  run_insert(a, g);
  return size >= np * PAGE;
}

/* The largest dirty (or muzzy) free run shorter than np pages that is a
 * whole mapping of its own, or NULL. */
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

/* Where heap_gather may not add kernel mappings (gather_allowed), the
 * largest dirty free mapping is grown with mremap, which adds none: its
 * resident pages serve the request where they are and only the rest is
 * new. (Before heap_gather, the only reuse across sizes: bench-replace
 * -t 1 peaked at 476 MB for 380 live; with neither, 584 at -s 3.) */
static bool heap_grow_remap(arena_t *a, size_t np) {
  if (np * PAGE <= HEAP_CHUNK) return false; /* a chunk of its own is as good */
  span_t *r = heap_remap_candidate(a, np);
  if (r == NULL) return false;
  size_t old = r->npages * PAGE, size = heap_grow_size(np);
  uintptr_t p = heap_move_mapping(r->start, old, size, false);
  if (p == 0) return false;
  run_remove(a, r);
  pagemap_set_ends((void *)r->start, r->npages, NULL);
  a->mapped += size - old;
  run_account(a, r, false);
  rec_set_mapping(r, p, size);
  r->zeroed = 0;
  r->muzzy = 0; /* one run: dirty as a whole */
  run_account(a, r, true);
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
      (end < s->chunk_hi && (tail == NULL || run_kind(tail) != SPAN_FREE || tail->start != end ||
                             tail->start + tail->npages * PAGE != s->chunk_hi)))
    return false;
  size_t old = s->chunk_hi - s->chunk_lo, size = heap_grow_size(np);
  /* A mapping that already holds np pages is not grown (pheap_take_at
   * serves that): "moving" it to a smaller one would cut its free tail,
   * and (size - old) / PAGE below would wrap. */
  if (size <= old) return false;
  uintptr_t p = heap_move_mapping(s->start, old, size, true);
  if (p == 0) return false;
  if (tail != NULL) { /* its pages are the block's now */
    run_remove(a, tail);
    pagemap_set_ends((void *)tail->start, tail->npages, NULL);
    run_account(a, tail, false); /* resident or not, the block's now */
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
  background_note_mapped(a->mapped);
  rec_set_mapping(r, (uintptr_t)p, size);
  r->zeroed = 1;
  run_insert(a, r);
  return true;
}

/* A free run of the same mapping as `like`, for what is left around a
 * carve, with nres of its pages counted as resident. */
static bool run_rest(arena_t *a, const span_t *like, uintptr_t start, size_t np,
                     size_t nres) {
  if (np == 0) return true;
  span_t *r = pheap_rec_new(a);
  if (r == NULL) return false;
  *r = (span_t){.start = start, .npages = np, .nres = nres, .dirty = like->dirty,
                .zeroed = like->zeroed, .muzzy = like->muzzy, .arena = like->arena,
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
  /* Which pages of a partly resident run are resident is not known: the
   * carved pages are counted first (warm pages are what reuse is for),
   * the rest as far as it goes. The totals stay exact sums. */
  size_t res = r->dirty ? r->nres : 0, take = res < np ? res : np;
  size_t lead_res = res - take < lead ? res - take : lead;
  run_remove(a, r);
  if (!run_rest(a, r, r->start, lead, lead_res) ||
      !run_rest(a, r, start + np * PAGE, trail, res - take - lead_res)) {
    run_insert(a, r); /* out of metadata: leave it as it was */
    return false;
  }
  if (r->dirty) *(r->muzzy ? &a->npages_muzzy : &a->npages_dirty) -= take;
  a->npages_active += np;
  *out = (pages_t){start, np, r->chunk_lo, r->chunk_hi, r->zeroed && !r->dirty};
  /* Pages handed out have no page-map entry (r's ends may have been among
   * them); the caller sets what it needs. */
  pagemap_set_ends((void *)start, np, NULL);
  pheap_rec_delete(a, r);
  return true;
}

static void heap_decay(arena_t *a, uint64_t now, bool all);

bool pheap_alloc(arena_t *a, size_t np, size_t align, pages_t *out) {
  size_t extra = align > PAGE ? align / PAGE - 1 : 0;
  /* allocation drives decay too, for programs that free little later */
  if (a->decay_next_ns != UINT64_MAX) heap_decay(a, nalloc_now_ns(), false);
  if (np + extra < np) return false;
  span_t *r = run_find(a, np + extra);
  if (r == NULL) {
    if (!heap_gather(a, np + extra) && !heap_grow_remap(a, np + extra) &&
        !heap_grow(a, np + extra))
      return false;
    r = run_find(a, np + extra);
    if (r == NULL) return false;
  }
  uintptr_t start = align > PAGE ? ALIGN_UP(r->start, align) : r->start;
  return run_carve(a, r, start, np, out);
}

bool pheap_take_at(arena_t *a, uintptr_t at, size_t np, const pages_t *owner) {
  if (at >= owner->chunk_hi) return false;
  span_t *r = pagemap_get((void *)at);
  if (r == NULL || run_kind(r) != SPAN_FREE || r->start != at || r->npages < np)
    return false;
  pages_t got;
  return run_carve(a, r, at, np, &got);
}

/* Decay times in ns. A run's stage changes somewhere in [deadline - gap,
 * deadline]: the page heap is walked at most once per gap (a walk visits
 * every free run), and a change due within the gap is made at the walk
 * before, so that no page stays resident past dirty_decay_ms. */
typedef struct decay_times_s {
  uint64_t gap;   /* dirty_decay_ms / 16 */
  uint64_t muzzy; /* age at which a dirty run goes muzzy (UINT64_MAX: never) */
  uint64_t clean; /* age at which a run goes clean */
} decay_times_t;

static decay_times_t decay_times(void) {
  uint64_t d = (uint64_t)opt_dirty_decay_ms * 1000000u;
  ssize_t mms = opt_muzzy_decay_ms < 0 ? opt_dirty_decay_ms / 2 : opt_muzzy_decay_ms;
  uint64_t m = (uint64_t)(mms < opt_dirty_decay_ms ? mms : opt_dirty_decay_ms) * 1000000u;
  decay_times_t t = {d / 16, UINT64_MAX, d - d / 16};
  if (m > 0) t.muzzy = d - m > t.gap ? d - m - t.gap : 0;
  return t;
}

/* Free pages outnumbering live ones by this much (and this many pages at
 * least) send dirty runs that have not been reused for a quarter of
 * dirty_decay_ms to muzzy before their time: the kernel may then take them
 * under memory pressure, while a reuse still costs no fault. */
#define DECAY_AMOUNT_MIN_PAGES ((size_t)(4u << 20) / PAGE)

static bool decay_by_amount(const arena_t *a) {
  return a->npages_dirty >= DECAY_AMOUNT_MIN_PAGES && a->npages_dirty > a->npages_active;
}

/* Moves runs on to their next stage when it is due (every run, at once,
 * with all); sets a->decay_next_ns to when the next walk is worth making. */
static void heap_decay(arena_t *a, uint64_t now, bool all) {
  if (!all && (opt_dirty_decay_ms < 0 || now < a->decay_next_ns)) return;
  decay_times_t t = decay_times();
  uint64_t next = UINT64_MAX, early = (t.gap + t.clean) / 4;
  bool amount = !all && t.muzzy != UINT64_MAX && decay_by_amount(a);
  for (unsigned b = 0; b < HEAP_NBINS; b++)
    for (span_t *r = a->runs[b], *nx; r; r = nx) {
      nx = r->next; /* run_release may recycle r */
      if (!r->dirty) {
        if (all && run_whole_mapping(r)) run_unmap(a, r);
        continue;
      }
      uint64_t age = now - r->dirty_since;
      if (all || age >= t.clean) {
        run_release(a, r);
        continue;
      }
      if (!r->muzzy && (age >= t.muzzy || (amount && age >= early))) run_muzzy(a, r);
      uint64_t due = r->dirty_since + (r->muzzy ? t.clean : t.muzzy < t.clean ? t.muzzy : t.clean);
      if (due < next) next = due;
    }
  a->decay_next_ns = next == UINT64_MAX ? UINT64_MAX : next > now + t.gap ? next : now + t.gap;
}

/* Free run s takes in the resident pages of o, a neighbour it merges
 * with: its age becomes the page-weighted mean of both, so that a few
 * pages freed now do not restart the clock of a large run freed long ago
 * (a thread's last spans reaped after its big ones went back would keep
 * them all resident for another dirty_decay_ms). */
static void run_merge_age(span_t *s, const span_t *o) {
  if (!o->dirty || o->nres == 0) return;
  uint64_t a = s->dirty ? s->nres : 0, b = o->nres;
  if (a == 0) {
    s->dirty_since = o->dirty_since;
  } else if (o->dirty_since < s->dirty_since) {
    s->dirty_since -= (s->dirty_since - o->dirty_since) * b / (a + b);
  } else {
    s->dirty_since += (o->dirty_since - s->dirty_since) * b / (a + b);
  }
}

/* Merges free run s with the free run that ends where it starts and the
 * one that starts where it ends, inside s's mapping. Page-map invariant: a
 * page has an entry only if it is an end of a free run or large block, or
 * any page of a small span; junctions become interior and lose theirs. */
static void run_coalesce(arena_t *a, span_t *s) {
  span_t *l = s->start > s->chunk_lo ? pagemap_get((void *)(s->start - PAGE)) : NULL;
  if (l && run_kind(l) == SPAN_FREE && l->start + l->npages * PAGE == s->start) {
    run_remove(a, l);
    pagemap_set((void *)(s->start - PAGE), NULL); /* the junction is interior */
    pagemap_set((void *)s->start, NULL);
    run_account(a, l, false); /* its resident pages join s's stage: dirty */
    run_merge_age(s, l);
    if (l->dirty) {
      a->npages_dirty += l->nres;
      s->nres += l->nres;
    }
    s->start = l->start;
    s->npages += l->npages;
    pheap_rec_delete(a, l);
  }
  uintptr_t end = s->start + s->npages * PAGE;
  span_t *r = end < s->chunk_hi ? pagemap_get((void *)end) : NULL;
  if (r && run_kind(r) == SPAN_FREE && r->start == end) {
    run_remove(a, r);
    pagemap_set((void *)(end - PAGE), NULL);
    pagemap_set((void *)end, NULL);
    run_account(a, r, false);
    run_merge_age(s, r);
    if (r->dirty) {
      a->npages_dirty += r->nres;
      s->nres += r->nres;
    }
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
  s->npages = s->nres = pg->npages;
  s->chunk_lo = pg->chunk_lo;
  s->chunk_hi = pg->chunk_hi;
  s->kind = SPAN_FREE;
  s->dirty = 1;
  s->dirty_since = now;
  run_coalesce(a, s);
  run_insert(a, s);
  if (opt_dirty_decay_ms == 0 || (run_whole_mapping(s) && s->npages * PAGE >= HEAP_UNMAP_MIN)) {
    run_release(a, s);
    return;
  }
  if (opt_dirty_decay_ms < 0) return;
  /* s's first stage change is the earliest one its merge can bring (its
   * age is its pages' mean: it may be due already) */
  decay_times_t t = decay_times();
  uint64_t due = s->dirty_since + (t.muzzy < t.clean ? t.muzzy : t.clean);
  if (due < a->decay_next_ns) a->decay_next_ns = due;
  heap_decay(a, now, false);
  background_note_dirty(a->npages_dirty + a->npages_muzzy, a->decay_next_ns);
}

size_t pheap_purge(arena_t *a, bool all) {
  uint64_t before = a->npurged;
  heap_decay(a, nalloc_now_ns(), all);
  return (size_t)(a->npurged - before);
}

uint64_t pheap_decay_next(const arena_t *a) { return a->decay_next_ns; }
