/* arena.c -- arenas: small-object bins over spans, large objects, and the
 * page heap (free page runs, coalescing, decay-based purging).
 *
 * Lock order: a bin lock may be held while taking its arena's heap lock,
 * never the reverse, and never two bin locks at once. */
#include "arena.h"

#include <string.h>

#include "conf.h"
#include "pagemap.h"

#define CALLOC_PURGE_MIN ((size_t)1 << 20)

_Atomic(arena_t *) arenas[ARENAS_MAX];
unsigned arenas_count = 1;
static nlock_t arenas_lock = NLOCK_INITIALIZER;

unsigned numa_node_of_arena(unsigned i);

arena_t *arena_get(unsigned i) {
  arena_t *a = atomic_load_explicit(&arenas[i], memory_order_acquire);
  if (likely(a != NULL)) return a;
  nlock_lock(&arenas_lock);
  a = atomic_load_explicit(&arenas[i], memory_order_relaxed);
  if (a == NULL && (a = base_alloc(sizeof(arena_t))) != NULL) {
    a->index = i;
    a->node = numa_node_of_arena(i);
    nlock_init(&a->heap_lock);
    for (unsigned c = 0; c < SC_NSMALL; c++) nlock_init(&a->bins[c].lock);
    a->last_decay_ns = nalloc_now_ns();
    atomic_store_explicit(&arenas[i], a, memory_order_release);
  }
  nlock_unlock(&arenas_lock);
  return a;
}

/* ---- span records ------------------------------------------------------ */

static span_t *span_new(arena_t *a) {
  span_t *s = a->span_cache;
  if (s != NULL) {
    a->span_cache = s->next;
    memset(s, 0, sizeof *s);
  } else if ((s = base_alloc(sizeof *s)) == NULL) {
    return NULL;
  }
  s->arena = (uint16_t)a->index;
  return s;
}

static void span_delete(arena_t *a, span_t *s) {
  s->kind = 0;
  atomic_store_explicit(&s->free_fast, 0, memory_order_relaxed);
  s->next = a->span_cache;
  a->span_cache = s;
}

/* ---- page heap (caller holds a->heap_lock) ----------------------------- */

static unsigned run_bin(size_t np) {
  if (np <= 128) return (unsigned)np - 1;
  unsigned b = 128 + (63u - (unsigned)__builtin_clzl(np)) - 7;
  return b < HEAP_NBINS ? b : HEAP_NBINS - 1;
}

static void run_insert(arena_t *a, span_t *r) {
  unsigned b = run_bin(r->npages);
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
  pagemap_set((void *)r->start, r);
  pagemap_set((void *)(span_end(r) - PAGE), r);
}

static void run_remove(arena_t *a, span_t *r) {
  unsigned b = run_bin(r->npages);
  if (r->prev) r->prev->next = r->next;
  else a->runs[b] = r->next;
  if (r->next) r->next->prev = r->prev;
  if (a->runs[b] == NULL) a->runs_nonempty[b / 64] &= ~((uint64_t)1 << (b % 64));
}

static span_t *run_find(arena_t *a, size_t np) {
  for (unsigned b = run_bin(np); b < HEAP_NBINS; b++) {
    uint64_t w = a->runs_nonempty[b / 64] >> (b % 64);
    if (w == 0) {
      b = (b | 63); /* skip the rest of this word */
      continue;
    }
    b += (unsigned)__builtin_ctzll(w);
    if (b >= HEAP_NBINS) break;
    for (span_t *r = a->runs[b]; r; r = r->next)
      if (r->npages >= np) return r;
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

static bool heap_grow(arena_t *a, size_t np) {
  size_t size = np * PAGE > HEAP_CHUNK ? ALIGN_UP(np * PAGE, (size_t)2 << 20)
                                       : HEAP_CHUNK;
  void *p = os_map(size);
  if (p == NULL) return false;
  if (!pagemap_reserve(p, size)) {
    os_unmap(p, size);
    return false;
  }
  span_t *r = span_new(a);
  if (r == NULL) {
    os_unmap(p, size);
    return false;
  }
  numa_bind_range(p, size, a->node);
  a->mapped += size;
  r->start = r->chunk_lo = (uintptr_t)p;
  r->npages = size / PAGE;
  r->chunk_hi = r->start + size;
  r->zeroed = 1;
  run_insert(a, r);
  return true;
}

/* Cuts [start, start+np) out of free run r; returns it as a detached span
 * (kind unset, pagemap entries of its pages untouched) and puts the rest
 * back as free runs. */
static span_t *run_carve(arena_t *a, span_t *r, uintptr_t start, size_t np) {
  run_remove(a, r);
  atomic_store_explicit(&r->free_fast, 0, memory_order_relaxed);
  size_t lead = (start - r->start) / PAGE, trail = r->npages - lead - np;
  span_t *lead_run = NULL, *trail_run = NULL;
  if (lead && (lead_run = span_new(a)) == NULL) goto fail;
  if (trail && (trail_run = span_new(a)) == NULL) goto fail;
  if (r->dirty) a->npages_dirty -= np; /* the carved part stops being free */
  if (lead_run) {
    *lead_run = (span_t){.start = r->start, .npages = lead, .dirty = r->dirty,
                         .zeroed = r->zeroed, .arena = r->arena,
                         .dirty_since = r->dirty_since, .chunk_lo = r->chunk_lo,
                         .chunk_hi = r->chunk_hi};
    run_insert(a, lead_run);
  }
  if (trail_run) {
    *trail_run = (span_t){.start = start + np * PAGE, .npages = trail,
                          .dirty = r->dirty, .zeroed = r->zeroed,
                          .arena = r->arena, .dirty_since = r->dirty_since,
                          .chunk_lo = r->chunk_lo, .chunk_hi = r->chunk_hi};
    run_insert(a, trail_run);
  }
  r->start = start;
  r->npages = np;
  r->kind = 0;
  r->next = r->prev = NULL;
  a->npages_active += np;
  return r;
fail:
  if (lead_run) span_delete(a, lead_run);
  run_insert(a, r);
  return NULL;
}

static span_t *heap_alloc(arena_t *a, size_t np, size_t align) {
  size_t extra = align > PAGE ? align / PAGE - 1 : 0;
  if (np + extra < np) return NULL;
  span_t *r = run_find(a, np + extra);
  if (r == NULL) {
    if (!heap_grow(a, np + extra)) return NULL;
    r = run_find(a, np + extra);
    if (r == NULL) return NULL;
  }
  uintptr_t start = align > PAGE ? ALIGN_UP(r->start, align) : r->start;
  bool dirty = r->dirty, zeroed = r->zeroed;
  span_t *s = run_carve(a, r, start, np);
  if (s != NULL) {
    s->dirty = dirty;
    s->zeroed = zeroed && !dirty;
  }
  return s;
}

static void heap_decay(arena_t *a, uint64_t now, bool all) {
  uint64_t decay = (uint64_t)opt_dirty_decay_ms * 1000000u;
  if (!all && opt_dirty_decay_ms < 0) return;
  if (!all && now - a->last_decay_ns < decay / 8 + 1000000u) return;
  a->last_decay_ns = now;
  for (unsigned b = 0; b < HEAP_NBINS; b++)
    for (span_t *r = a->runs[b]; r; r = r->next)
      if (r->dirty && (all || now - r->dirty_since >= decay)) run_purge(a, r);
}

/* Returns span s (detached, its pages already cleared in the page map but
 * for the first and last) to the heap, merging with free neighbours. */
static void heap_free(arena_t *a, span_t *s) {
  uint64_t now = nalloc_now_ns();
  a->npages_active -= s->npages;
  s->kind = SPAN_FREE;
  atomic_store_explicit(&s->free_fast, 0, memory_order_relaxed);
  s->dirty = 1;
  s->zeroed = 0;
  s->dirty_since = now;
  a->npages_dirty += s->npages;
  span_t *l = s->start > s->chunk_lo ? pagemap_get((void *)(s->start - PAGE)) : NULL;
  if (l && l->kind == SPAN_FREE && span_end(l) == s->start) {
    run_remove(a, l);
    if (!l->dirty) a->npages_dirty += l->npages;
    pagemap_set((void *)(span_end(l) - PAGE), NULL);
    pagemap_set((void *)s->start, NULL);
    s->start = l->start;
    s->npages += l->npages;
    span_delete(a, l);
  }
  span_t *r = span_end(s) < s->chunk_hi ? pagemap_get((void *)span_end(s)) : NULL;
  if (r && r->kind == SPAN_FREE && r->start == span_end(s)) {
    run_remove(a, r);
    if (!r->dirty) a->npages_dirty += r->npages;
    pagemap_set((void *)(span_end(s) - PAGE), NULL);
    pagemap_set((void *)r->start, NULL);
    s->npages += r->npages;
    span_delete(a, r);
  }
  run_insert(a, s);
  if (opt_dirty_decay_ms == 0) run_purge(a, s);
  else heap_decay(a, now, false);
}

size_t arena_purge(arena_t *a, bool all) {
  nlock_lock(&a->heap_lock);
  uint64_t before = a->npurged;
  heap_decay(a, nalloc_now_ns(), all);
  size_t n = (size_t)(a->npurged - before);
  nlock_unlock(&a->heap_lock);
  return n;
}

/* ---- small objects ------------------------------------------------------ */

/* A new small span. Everything the page heap's neighbour checks read is
 * set while the heap lock is held. */
static span_t *bin_new_span(arena_t *a, unsigned cls) {
  const sc_info_t *sc = &sc_info[cls];
  nlock_lock(&a->heap_lock);
  span_t *s = heap_alloc(a, sc->npages, 0);
  if (s != NULL) {
    s->kind = SPAN_SMALL;
    s->cls = (uint8_t)cls;
    s->nfree = sc->nslots;
    s->slot_size = sc->size;
    s->div_mul = sc->div_mul;
    for (unsigned w = 0; w < SC_MAX_SLOTS / 64; w++) {
      unsigned lo = w * 64; /* slots lo..lo+63: all, some or none exist */
      s->bitmap[w] = lo + 64 <= sc->nslots ? ~(uint64_t)0
                     : lo < sc->nslots      ? ((uint64_t)1 << (sc->nslots - lo)) - 1
                                            : 0;
    }
    atomic_store_explicit(&s->prof, NULL, memory_order_relaxed);
    pagemap_set_range((void *)s->start, s->npages, s);
    atomic_store_explicit(&s->free_fast, 1, memory_order_relaxed);
  }
  /* Pages that read as zero were never touched or were purged. With four
   * or more slots to a page, a refill hands out runs of neighbours that
   * will soon be written, and the next spans are carved right after this
   * one: fault HEAP_POPULATE bytes in with one call instead of a fault a
   * page. Bigger slots, and large blocks, fault as the program touches
   * them, so untouched memory stays out of the RSS; what this leaves
   * faulted in but unused is at most one window per arena. */
  uintptr_t from = 0, to = 0;
  if (s != NULL && s->zeroed && sc->size <= PAGE / 4 &&
      (s->start < a->pop_lo || span_end(s) > a->pop_hi)) {
    from = s->start;
    to = from + HEAP_POPULATE < s->chunk_hi ? from + HEAP_POPULATE : s->chunk_hi;
    if (to < span_end(s)) to = span_end(s);
    a->pop_lo = from;
    a->pop_hi = to;
  }
  nlock_unlock(&a->heap_lock);
  if (to != 0) os_populate((void *)from, to - from);
  return s;
}

static void bin_list_push(bin_t *b, span_t *s) {
  s->prev = NULL;
  s->next = b->partial;
  if (s->next) s->next->prev = s;
  b->partial = s;
}

static void bin_list_remove(bin_t *b, span_t *s) {
  if (s->prev) s->prev->next = s->next;
  else b->partial = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

unsigned arena_refill(arena_t *a, unsigned cls, void **out, unsigned n) {
  bin_t *b = &a->bins[cls];
  const sc_info_t *sc = &sc_info[cls];
  unsigned got = 0;
  nlock_lock(&b->lock);
  while (got < n) {
    span_t *s = b->partial;
    if (s == NULL) {
      if ((s = bin_new_span(a, cls)) == NULL) break;
      b->nspans++;
      bin_list_push(b, s);
    }
    const uintptr_t size = sc->size;
    for (unsigned w = 0; w < SC_MAX_SLOTS / 64 && got < n && s->nfree; w++) {
      uint64_t bits = s->bitmap[w];
      const uintptr_t base = s->start + (uintptr_t)w * 64 * size;
      const unsigned from = got;
      while (bits && got < n) {
        out[got++] = (void *)(base + (uintptr_t)__builtin_ctzll(bits) * size);
        bits &= bits - 1;
      }
      s->bitmap[w] = bits;
      s->nfree -= got - from;
    }
    if (s->nfree == 0) bin_list_remove(b, s);
  }
  b->nout += got;
  b->nmalloc += got;
  nlock_unlock(&b->lock);
  return got;
}

static _Noreturn void bad_free(const void *p, const char *why) {
  nalloc_fatal("free(%p): %s", p, why);
}

/* Gives `n` slots back to span s, whose bitmap bits the caller already
 * set; the caller holds the span's bin lock. A span that was full goes
 * back on the bin's list; an empty one that is not the bin's only span
 * goes back to the heap. */
static void span_slots_returned(arena_t *a, bin_t *b, span_t *s, uint32_t n) {
  const sc_info_t *sc = &sc_info[s->cls];
  b->nout -= n;
  b->ndalloc += n;
  if (s->nfree == 0) bin_list_push(b, s);
  s->nfree += n;
  if (s->nfree == sc->nslots && (b->partial != s || s->next != NULL)) {
    /* Empty and not the bin's only span: give the pages back. */
    bin_list_remove(b, s);
    b->nspans--;
    prof_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_relaxed);
    if (ps) base_free(ps, sizeof(prof_slot_t) * sc->nslots);
    atomic_store_explicit(&s->prof, NULL, memory_order_relaxed);
    if (s->npages > 2)
      pagemap_set_range((void *)(s->start + PAGE), s->npages - 2, NULL);
    nlock_lock(&a->heap_lock);
    heap_free(a, s);
    nlock_unlock(&a->heap_lock);
  }
}

/* Every pointer reaching here was checked to start a slot by free (fast or
 * slow path), so only the double free is left to catch. Pointers come in
 * runs from one span (a thread frees what it allocated together), so the
 * page map is asked only when a pointer leaves the current span, and the
 * span's counts move once per run. */
void arena_flush(void *const *ptrs, unsigned n) {
  bin_t *held = NULL;
  arena_t *ha = NULL;
  span_t *s = NULL;
  uintptr_t lo = 0, hi = 0; /* s's pages */
  uint32_t run = 0;         /* slots of s returned in this run */
  for (unsigned k = 0; k < n; k++) {
    void *p = ptrs[k];
    if ((uintptr_t)p - lo >= hi - lo) {
      if (run) span_slots_returned(ha, held, s, run);
      run = 0;
      s = pagemap_get(p);
      /* p started a slot of a small span when free took it; if its span
       * has gone since, the block was freed twice and the span emptied */
      if (unlikely(s == NULL || s->kind != SPAN_SMALL || !span_slot_ok(s, p)))
        bad_free(p, "double free (its span was already given back)");
      arena_t *a = atomic_load_explicit(&arenas[s->arena], memory_order_relaxed);
      bin_t *b = &a->bins[s->cls];
      if (b != held) {
        if (held) nlock_unlock(&held->lock);
        nlock_lock(&b->lock);
        held = b;
        ha = a;
      }
      lo = s->start;
      hi = span_end(s);
    }
    uint32_t i = span_slot_index(s, p);
    uint64_t bit = (uint64_t)1 << (i % 64);
    if (s->bitmap[i / 64] & bit) bad_free(p, "double free");
    s->bitmap[i / 64] |= bit;
    run++;
  }
  if (run) span_slots_returned(ha, held, s, run);
  if (held) nlock_unlock(&held->lock);
}

/* ---- large objects ------------------------------------------------------ */

void *arena_alloc_large(arena_t *a, size_t size, size_t align, bool zero) {
  size_t np = ALIGN_UP(size, PAGE) / PAGE;
  if (size > ((size_t)1 << PM_ADDR_BITS) || np == 0) {
    errno = ENOMEM;
    return NULL;
  }
  nlock_lock(&a->heap_lock);
  span_t *s = heap_alloc(a, np, align);
  if (s != NULL) {
    s->kind = SPAN_LARGE;
    atomic_store_explicit(&s->free_fast, 0, memory_order_relaxed);
    s->usize = np * PAGE;
    s->large_tctx = NULL;
    pagemap_set((void *)s->start, s);
    pagemap_set((void *)(span_end(s) - PAGE), s);
    a->large_allocated += s->usize;
    a->nmalloc_large++;
  }
  nlock_unlock(&a->heap_lock);
  if (s == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  if (zero && !s->zeroed) {
    /* A big reused run: dropping its pages zeroes it without touching
     * (and making resident) the parts the program may never use. */
    if (size >= CALLOC_PURGE_MIN) os_purge((void *)s->start, np * PAGE);
    else memset((void *)s->start, 0, size);
  }
  return (void *)s->start;
}

void arena_free_large(span_t *s) {
  arena_t *a = atomic_load_explicit(&arenas[s->arena], memory_order_relaxed);
  nlock_lock(&a->heap_lock);
  a->large_allocated -= s->usize;
  a->ndalloc_large++;
  if (s->npages > 1) pagemap_set((void *)(span_end(s) - PAGE), NULL);
  heap_free(a, s);
  nlock_unlock(&a->heap_lock);
}

bool arena_resize_large(span_t *s, size_t size) {
  size_t np = ALIGN_UP(size, PAGE) / PAGE;
  if (np == s->npages) return true;
  arena_t *a = atomic_load_explicit(&arenas[s->arena], memory_order_relaxed);
  bool ok = false;
  nlock_lock(&a->heap_lock);
  if (np < s->npages) {
    span_t *t = span_new(a);
    if (t != NULL) {
      size_t cut = s->npages - np;
      pagemap_set((void *)(span_end(s) - PAGE), NULL);
      *t = (span_t){.start = s->start + np * PAGE, .npages = cut, .arena = s->arena,
                    .chunk_lo = s->chunk_lo, .chunk_hi = s->chunk_hi};
      s->npages = np;
      a->large_allocated -= s->usize - np * PAGE;
      s->usize = np * PAGE;
      pagemap_set((void *)(span_end(s) - PAGE), s);
      pagemap_set((void *)t->start, t);
      pagemap_set((void *)(span_end(t) - PAGE), t);
      heap_free(a, t);
      ok = true;
    }
  } else {
    span_t *r = span_end(s) < s->chunk_hi ? pagemap_get((void *)span_end(s)) : NULL;
    size_t need = np - s->npages;
    if (r && r->kind == SPAN_FREE && r->start == span_end(s) && r->npages >= need) {
      span_t *g = run_carve(a, r, r->start, need);
      if (g != NULL) {
        /* the old last page stops being one, unless it is also the first */
        if (s->npages > 1) pagemap_set((void *)(span_end(s) - PAGE), NULL);
        if (g->npages > 0) pagemap_set((void *)g->start, NULL);
        s->npages += need;
        a->large_allocated += need * PAGE;
        s->usize = s->npages * PAGE;
        pagemap_set((void *)(span_end(s) - PAGE), s);
        span_delete(a, g);
        ok = true;
      }
    }
  }
  nlock_unlock(&a->heap_lock);
  return ok;
}

/* ---- stats and fork ------------------------------------------------------ */

void arena_stats(arena_t *a, arena_stats_t *st) {
  memset(st, 0, sizeof *st);
  for (unsigned c = 0; c < SC_NSMALL; c++) {
    bin_t *b = &a->bins[c];
    nlock_lock(&b->lock);
    st->allocated += b->nout * sc_info[c].size;
    st->nmalloc += b->nmalloc;
    st->ndalloc += b->ndalloc;
    nlock_unlock(&b->lock);
  }
  nlock_lock(&a->heap_lock);
  st->allocated += a->large_allocated;
  st->active = a->npages_active * PAGE;
  st->dirty = a->npages_dirty * PAGE;
  st->mapped = a->mapped;
  st->nmalloc += a->nmalloc_large;
  st->ndalloc += a->ndalloc_large;
  st->npurged = a->npurged;
  nlock_unlock(&a->heap_lock);
  st->nthreads = atomic_load_explicit(&a->nthreads, memory_order_relaxed);
}

#define FOR_EACH_ARENA(a)                                                   \
  for (unsigned _i = 0; _i < ARENAS_MAX; _i++)                              \
    for (arena_t *a = atomic_load_explicit(&arenas[_i], memory_order_acquire); \
         a; a = NULL)

void arena_prefork(void) {
  nlock_prefork(&arenas_lock);
  FOR_EACH_ARENA(a) {
    for (unsigned c = 0; c < SC_NSMALL; c++) nlock_prefork(&a->bins[c].lock);
    nlock_prefork(&a->heap_lock);
  }
}

void arena_postfork_parent(void) {
  FOR_EACH_ARENA(a) {
    nlock_postfork_parent(&a->heap_lock);
    for (unsigned c = 0; c < SC_NSMALL; c++) nlock_postfork_parent(&a->bins[c].lock);
  }
  nlock_postfork_parent(&arenas_lock);
}

void arena_postfork_child(void) {
  FOR_EACH_ARENA(a) {
    nlock_postfork_child(&a->heap_lock);
    for (unsigned c = 0; c < SC_NSMALL; c++) nlock_postfork_child(&a->bins[c].lock);
    atomic_store_explicit(&a->nthreads, 0, memory_order_relaxed);
  }
  nlock_postfork_child(&arenas_lock);
}
