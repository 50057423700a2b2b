/* unit_page_heap.c -- the page heap (alloc/page_heap.c) of an arena of the
 * test's own, driven by a random sequence of pheap_alloc (page counts from
 * 1 to past a 4 MiB chunk, alignments up to 2 MiB), pheap_free,
 * pheap_take_at (in-place growth), pheap_move_grow and pheap_purge, and
 * checked against a model: the list of page runs the test holds.
 * - every run handed out is aligned as asked, lies inside the mapping
 *   pages_t names, overlaps no other live run, and is mapped and private:
 *   every page carries the test's tag for it and still does when freed;
 *   a run said to be zeroed reads as zero;
 * - take_at succeeds exactly when the model says the pages after the run
 *   are in its mapping and held by no one; move_grow exactly when the run
 *   starts its mapping and nothing live follows it; moved pages keep
 *   their contents;
 * - walking a->runs[]: free runs and live runs tile each mapping with no
 *   overlap and no two free runs adjacent (coalescing), the page map
 *   names each free run at both ends, and the mappings' sizes add up to
 *   a->mapped; a->npages_active is the model's live page count;
 *   a->npages_dirty the dirty free runs' pages, 0 after a full purge and
 *   always with dirty_decay_ms 0;
 * - after everything is freed each mapping is one free run, and a full
 *   purge unmaps them all (mapped 0).
 * Linked with the engine's objects; nalloc boots (nalloc_malloc) so that
 * the page map and base allocator are up, then the test's arena is set up
 * as arena_create does, and every call holds its heap_lock. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "lock.h"
#include "nalloc.h"
#include "os.h"
#include "page_heap.h"
#include "pagemap.h"

#include "../check_core.h"

static arena_t ar; /* the test's own arena: nothing else uses it */

typedef struct {
  pages_t pg;
  uint64_t tag; /* page i holds tag + i in its first and last word */
} live_t;
enum { MAXLIVE = 256 };
static live_t live[MAXLIVE];
static size_t nlive;
static uint64_t next_tag = 1;

#define END(pg) ((pg).start + (pg).npages * PAGE)

static void tag_pages(live_t *l, size_t from) {
  for (size_t i = from; i < l->pg.npages; i++) {
    uint64_t *p = (uint64_t *)(l->pg.start + i * PAGE);
    p[0] = l->tag + i;
    p[PAGE / 8 - 1] = ~(l->tag + i);
  }
}

static void check_tags(const live_t *l, const char *when) {
  for (size_t i = 0; i < l->pg.npages; i++) {
    const uint64_t *p = (const uint64_t *)(l->pg.start + i * PAGE);
    CHECKF(p[0] == l->tag + i && p[PAGE / 8 - 1] == ~(l->tag + i),
           "%s: page %zu of the run at %#lx (%zu pages) was overwritten", when, i,
           (unsigned long)l->pg.start, l->pg.npages);
  }
}

/* Whether [lo, hi) meets a live run other than `skip`. */
static bool overlaps_live(uintptr_t lo, uintptr_t hi, const live_t *skip) {
  for (size_t i = 0; i < nlive; i++)
    if (&live[i] != skip && live[i].pg.start < hi && lo < END(live[i].pg)) return true;
  return false;
}

static size_t model_pages(void) {
  size_t n = 0;
  for (size_t i = 0; i < nlive; i++) n += live[i].pg.npages;
  return n;
}

static void op_alloc_np(size_t np, size_t align);
static void op_alloc(void) {
  if (nlive == MAXLIVE) return;
  uint64_t r = check_rnd();
  size_t np;
  switch (r % 16) {
  case 0: np = 1100 + check_rnd() % 2000; break;   /* past a 4 MiB chunk */
  case 1: case 2: np = 129 + check_rnd() % 900; break; /* the power-of-two bins */
  default: np = 1 + check_rnd() % 128; break;      /* a bin per length */
  }
  if (model_pages() + np > 24000) return; /* ~100 MiB live at most */
  size_t align = (r >> 8) % 4 == 0 ? PAGE << (check_rnd() % 10) : PAGE; /* up to 2 MiB */
  op_alloc_np(np, align);
}

static void op_alloc_np(size_t np, size_t align) {
  pages_t pg;
  nlock_lock(&ar.heap_lock);
  bool ok = pheap_alloc(&ar, np, align, &pg);
  nlock_unlock(&ar.heap_lock);
  CHECKF(ok, "pheap_alloc(%zu pages, align %zu) failed", np, align);
  CHECKF(pg.npages == np, "asked %zu pages, got %zu", np, pg.npages);
  CHECKF(pg.start % align == 0 && pg.start % PAGE == 0, "run at %#lx not aligned to %zu",
         (unsigned long)pg.start, align);
  CHECKF(pg.chunk_lo <= pg.start && END(pg) <= pg.chunk_hi,
         "run [%#lx, %#lx) outside its mapping [%#lx, %#lx)", (unsigned long)pg.start,
         (unsigned long)END(pg), (unsigned long)pg.chunk_lo, (unsigned long)pg.chunk_hi);
  CHECKF(!overlaps_live(pg.start, END(pg), NULL), "run [%#lx, %#lx) overlaps a live run",
         (unsigned long)pg.start, (unsigned long)END(pg));
  if (pg.zeroed)
    for (size_t i = 0; i < np; i++) {
      const uint64_t *p = (const uint64_t *)(pg.start + i * PAGE);
      CHECKF(p[0] == 0 && p[PAGE / 8 - 1] == 0 && p[check_rnd() % (PAGE / 8)] == 0,
             "run said zeroed has data on page %zu of %zu", i, np);
    }
  live_t *l = &live[nlive++];
  l->pg = pg;
  l->tag = next_tag;
  next_tag += 1u << 20;
  tag_pages(l, 0);
}

static void op_free(void) {
  if (nlive == 0) return;
  size_t i = check_rnd() % nlive;
  check_tags(&live[i], "at free");
  pages_t pg = live[i].pg;
  live[i] = live[--nlive];
  nlock_lock(&ar.heap_lock);
  size_t dirty = ar.npages_dirty;
  pheap_free(&ar, &pg);
  size_t after = ar.npages_dirty;
  nlock_unlock(&ar.heap_lock);
  if (opt_dirty_decay_ms == 0) CHECKF(after == 0, "decay 0: %zu dirty pages after a free", after);
  else if (opt_dirty_decay_ms < 0) /* a clean neighbour merged in counts as dirty too */
    CHECKF(after >= dirty + pg.npages, "dirty %zu -> %zu after freeing %zu pages", dirty,
           after, pg.npages);
}

/* In-place growth: the pages after a live run, if they are free. */
static void op_take_at(void) {
  if (nlive == 0) return;
  live_t *l = &live[check_rnd() % nlive];
  size_t k = 1 + check_rnd() % (check_rnd() % 4 == 0 ? 600 : 16);
  uintptr_t at = END(l->pg), end = at + k * PAGE;
  bool want = end <= l->pg.chunk_hi && !overlaps_live(at, end, NULL);
  nlock_lock(&ar.heap_lock);
  bool got = pheap_take_at(&ar, at, k, &l->pg);
  nlock_unlock(&ar.heap_lock);
  CHECKF(got == want, "take_at(%zu pages after [%#lx, %#lx) in [%#lx, %#lx)): %d, model says %d",
         k, (unsigned long)l->pg.start, (unsigned long)at, (unsigned long)l->pg.chunk_lo,
         (unsigned long)l->pg.chunk_hi, got, want);
  if (!got) return;
  size_t old = l->pg.npages;
  l->pg.npages += k;
  tag_pages(l, old);
}

/* Growth by moving a mapping: a run that starts its mapping, to more than
 * a chunk. */
static void move_grow_to(live_t *l, size_t np);
static void op_move_grow(void) {
  if (nlive == 0) return;
  live_t *l = &live[check_rnd() % nlive];
  size_t np = l->pg.npages + 1 + check_rnd() % 3000;
  if (model_pages() + np - l->pg.npages > 24000) return;
  move_grow_to(l, np);
}

static void move_grow_to(live_t *l, size_t np) {
  /* it can when the run starts its mapping, the request is more than a
   * chunk and more than the mapping (else take_at is the way), and
   * nothing live follows the run in its mapping */
  bool want = l->pg.start == l->pg.chunk_lo && np * PAGE > HEAP_CHUNK &&
              np * PAGE > l->pg.chunk_hi - l->pg.chunk_lo &&
              !overlaps_live(END(l->pg), l->pg.chunk_hi, l);
  span_t s;
  memset(&s, 0, sizeof s);
  s.kind = SPAN_LARGE;
  s.start = l->pg.start;
  s.npages = l->pg.npages;
  s.chunk_lo = l->pg.chunk_lo;
  s.chunk_hi = l->pg.chunk_hi;
  nlock_lock(&ar.heap_lock);
  bool got = pheap_move_grow(&ar, &s, np);
  nlock_unlock(&ar.heap_lock);
  CHECKF(got == want, "move_grow of [%#lx, +%zu pages) in [%#lx, %#lx) to %zu pages: %d, "
         "model says %d", (unsigned long)l->pg.start, l->pg.npages,
         (unsigned long)l->pg.chunk_lo, (unsigned long)l->pg.chunk_hi, np, got, want);
  if (!got) return;
  CHECKF(s.npages >= np && s.start == s.chunk_lo && s.start + s.npages * PAGE == s.chunk_hi,
         "moved block [%#lx, +%zu pages) is not its mapping [%#lx, %#lx)",
         (unsigned long)s.start, s.npages, (unsigned long)s.chunk_lo, (unsigned long)s.chunk_hi);
  size_t old = l->pg.npages;
  l->pg.start = s.start;
  l->pg.npages = s.npages;
  l->pg.chunk_lo = s.chunk_lo;
  l->pg.chunk_hi = s.chunk_hi;
  CHECKF(!overlaps_live(l->pg.start, END(l->pg), l), "moved block overlaps a live run");
  size_t keep = l->pg.npages;
  l->pg.npages = old;
  check_tags(l, "after move_grow"); /* the old pages moved, contents and all */
  l->pg.npages = keep;
  tag_pages(l, old);
}

static void op_purge(void) {
  bool all = check_rnd() % 2;
  nlock_lock(&ar.heap_lock);
  size_t dirty = ar.npages_dirty + ar.npages_muzzy;
  size_t n = pheap_purge(&ar, all);
  size_t after = ar.npages_dirty + ar.npages_muzzy;
  nlock_unlock(&ar.heap_lock);
  if (all) CHECKF(after == 0 && n == dirty, "full purge: %zu of %zu purged, %zu left", n, dirty,
                  after);
}

/* ---- the heap's own structure against the model ---- */
typedef struct {
  uintptr_t lo, hi;
  bool live;
  uint8_t dirty;
} piece_t;
static piece_t pieces[MAXLIVE + 8192];

static int piece_cmp(const void *a, const void *b) {
  const piece_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Returns the number of free runs. */
static size_t check_structure(const char *when) {
  size_t n = 0, nfree = 0, dirty = 0, muzzy = 0;
  for (size_t i = 0; i < nlive; i++) {
    check_tags(&live[i], when);
    pieces[n++] = (piece_t){live[i].pg.start, END(live[i].pg), true, 0};
  }
  /* every free run, with the mapping it says it is in */
  typedef struct { uintptr_t lo, hi; } map_t;
  static map_t maps[8192];
  size_t nmaps = 0;
  for (unsigned b = 0; b < HEAP_NBINS; b++) {
    bool nonempty = (ar.runs_nonempty[b / 64] >> (b % 64)) & 1;
    CHECKF(nonempty == (ar.runs[b] != NULL), "%s: bin %u nonempty bit %d", when, b, nonempty);
    for (span_t *r = ar.runs[b]; r; r = r->next) {
      CHECKF(r->kind == SPAN_FREE && r->npages > 0, "%s: run of kind %d, %zu pages in bin %u",
             when, r->kind, r->npages, b);
      CHECKF(r->next == NULL || r->next->prev == r, "%s: bin %u list links broken", when, b);
      CHECKF(pagemap_get((void *)r->start) == r &&
                 pagemap_get((void *)(r->start + (r->npages - 1) * PAGE)) == r,
             "%s: the page map does not name the free run at %#lx at both ends", when,
             (unsigned long)r->start);
      CHECKF(nfree < 8192, "too many free runs");
      nfree++;
      CHECKF(!r->dirty || r->nres <= r->npages, "%s: run of %zu pages with %zu resident", when,
             r->npages, r->nres);
      CHECKF(r->dirty || !r->muzzy, "%s: a clean run marked muzzy", when);
      if (r->dirty && !r->muzzy) dirty += r->nres;
      if (r->dirty && r->muzzy) muzzy += r->nres;
      pieces[n++] = (piece_t){r->start, r->start + r->npages * PAGE, false, r->dirty};
      size_t m = 0;
      while (m < nmaps && maps[m].lo != r->chunk_lo) m++;
      if (m == nmaps) maps[nmaps++] = (map_t){r->chunk_lo, r->chunk_hi};
      CHECKF(maps[m].hi == r->chunk_hi, "%s: two runs disagree on a mapping's end", when);
      CHECKF(r->chunk_lo <= r->start && r->start + r->npages * PAGE <= r->chunk_hi,
             "%s: free run outside its mapping", when);
    }
  }
  for (size_t i = 0; i < nlive; i++) {
    size_t m = 0;
    while (m < nmaps && maps[m].lo != live[i].pg.chunk_lo) m++;
    if (m == nmaps) maps[nmaps++] = (map_t){live[i].pg.chunk_lo, live[i].pg.chunk_hi};
    CHECKF(maps[m].hi == live[i].pg.chunk_hi, "%s: a live run disagrees on its mapping's end",
           when);
  }
  /* the pieces tile the mappings: sorted, each mapping starts with a
   * piece, every piece begins where the previous ended until the mapping
   * ends, and no two free pieces touch */
  qsort(pieces, n, sizeof *pieces, piece_cmp);
  size_t total = 0;
  for (size_t m = 0; m < nmaps; m++) total += maps[m].hi - maps[m].lo;
  size_t i = 0;
  for (size_t cnt = 0; cnt < nmaps; cnt++) {
    size_t m = 0;
    while (maps[m].lo != pieces[i].lo) {
      m++;
      CHECKF(m < nmaps, "%s: piece at %#lx does not start a mapping after the last one ended",
             when, (unsigned long)pieces[i].lo);
    }
    uintptr_t at = maps[m].lo;
    bool prev_free = false;
    while (at < maps[m].hi) {
      CHECKF(i < n && pieces[i].lo == at, "%s: a gap or overlap at %#lx in mapping [%#lx, %#lx)",
             when, (unsigned long)at, (unsigned long)maps[m].lo, (unsigned long)maps[m].hi);
      CHECKF(!(prev_free && !pieces[i].live),
             "%s: two adjacent free runs at %#lx not coalesced", when, (unsigned long)at);
      prev_free = !pieces[i].live;
      at = pieces[i].hi;
      i++;
    }
    CHECKF(at == maps[m].hi, "%s: a piece runs past the end of its mapping", when);
  }
  CHECKF(i == n, "%s: %zu pieces outside every mapping", when, n - i);
  CHECKF(ar.mapped == total, "%s: mapped %zu, the mappings add up to %zu", when, ar.mapped,
         total);
  CHECKF(ar.npages_active == model_pages(), "%s: npages_active %zu, the model holds %zu", when,
         ar.npages_active, model_pages());
  CHECKF(ar.npages_dirty == dirty, "%s: npages_dirty %zu, dirty free runs hold %zu", when,
         ar.npages_dirty, dirty);
  CHECKF(ar.npages_muzzy == muzzy, "%s: npages_muzzy %zu, muzzy free runs hold %zu", when,
         ar.npages_muzzy, muzzy);
  return nfree;
}

static unsigned check_every = 64; /* the structure walk, every so many operations */
static unsigned last_op;
static const char *const op_names[] = {"after an alloc", "after a free", "after a take_at",
                                       "after a move_grow", "after a purge"};

/* move_grow's edges, directed (the random sequence meets them by chance):
 * a block that starts a mapping bigger than itself. Growing it within the
 * mapping is take_at's work: move_grow must refuse it, and leave the
 * heap as it was; past the mapping it must move it, contents and all. */
static void move_grow_edges(void) {
  opt_dirty_decay_ms = -1;
  nlive = 0;
  op_alloc_np(1100, PAGE); /* a fresh mapping of 6 MiB (1536 pages) */
  live_t *l = &live[0];
  CHECKF(l->pg.start == l->pg.chunk_lo && l->pg.chunk_hi - l->pg.chunk_lo > 1200 * PAGE,
         "1100 pages from an empty heap do not start a mapping of more than 1200 pages");
  move_grow_to(l, 1200); /* within the mapping: refused */
  check_structure("after move_grow within the mapping");
  move_grow_to(l, (l->pg.chunk_hi - l->pg.chunk_lo) / PAGE + 1); /* past it: moved */
  check_structure("after move_grow past the mapping");
  op_free();
}

static void run(unsigned nops, ssize_t decay) {
  opt_dirty_decay_ms = decay;
  for (unsigned op = 0; op < nops; op++) {
    unsigned r = (unsigned)(check_rnd() % 100);
    last_op = r < 40 ? 0 : r < 75 ? 1 : r < 88 ? 2 : r < 92 ? 3 : 4;
    switch (last_op) {
    case 0: op_alloc(); break;
    case 1: op_free(); break;
    case 2: op_take_at(); break;
    case 3: op_move_grow(); break;
    default: op_purge(); break;
    }
    if (op % check_every == 0) check_structure(op_names[last_op]);
  }
  check_structure("at the end of the run");
  /* free everything: each mapping must be one free run again */
  while (nlive) op_free();
  size_t nfree = check_structure("after freeing everything");
  size_t nmaps = 0;
  for (unsigned b = 0; b < HEAP_NBINS; b++)
    for (span_t *r = ar.runs[b]; r; r = r->next) {
      CHECKF(r->start == r->chunk_lo && r->start + r->npages * PAGE == r->chunk_hi,
             "a mapping is more than one free run after everything was freed");
      nmaps++;
    }
  CHECKF(nmaps == nfree, "runs counted twice");
  nlock_lock(&ar.heap_lock);
  pheap_purge(&ar, true);
  nlock_unlock(&ar.heap_lock);
  CHECKF(ar.mapped == 0 && ar.npages_dirty == 0 && ar.npages_active == 0,
         "after a full purge of an empty heap: mapped %zu dirty %zu active %zu", ar.mapped,
         ar.npages_dirty, ar.npages_active);
  for (unsigned b = 0; b < HEAP_NBINS; b++)
    CHECKF(ar.runs[b] == NULL, "a free run survived the full purge of an empty heap");
  printf("decay %zd: %u operations, %zu mappings at the end\n", decay, nops, nmaps);
}

int main(int argc, char **argv) {
  /* [seed [check-every]]: replay a failure, walk the heap after each op */
  if (argc > 1) check_rng = strtoull(argv[1], NULL, 0);
  if (argc > 2) check_every = (unsigned)strtoul(argv[2], NULL, 0);
  nalloc_free(nalloc_malloc(1)); /* boots the page map and base allocator */
  /* as arena_create sets one up; an index no real arena has */
  ar.index = ARENAS_MAX - 1;
  ar.node = 0;
  nlock_init(&ar.heap_lock, LOCK_ARENA_HEAP);
  ar.decay_next_ns = UINT64_MAX;
  move_grow_edges();
  run(6000, -1); /* dirty runs stay until purged: dirty counts exact */
  run(3000, 0);  /* every free purges at once */
  run(3000, 1);  /* decay past 1 ms, as time passes (muzzy at once) */
  opt_muzzy_decay_ms = 4;
  run(3000, 8);  /* dirty, then muzzy for the last 4 ms, then clean */
  printf("ok\n");
  return 0;
}
