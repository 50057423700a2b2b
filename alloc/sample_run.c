/* sample_run.c -- page runs of sampled small blocks (sample_run.h).
 *
 * At the default rate a sampled small block under SAMPLE_SPAN_MIN (4 KiB;
 * larger ones stay in their spans: sample.h) gets a page run of its own,
 * so that spans of small classes never hold a sample and free's fast path
 * need not ask (alloc.c, malloc_sampled); such runs are one page, unless
 * a realloc grew them in place. (Before the 4 KiB limit, runs of every
 * small size:) Through large_alloc and large_free every
 * such run cost ~1,100 instructions (arena lock, run search and carving,
 * four page-map writes, decay bookkeeping, two clock reads): half of a
 * sample's cost on bench-random. A freed run is kept instead in the
 * freeing thread's heap, at most one of each length of 1 to
 * SAMPLE_RUN_PAGES pages and SAMPLE_RUN_KEEP pages in all, and a later
 * sample of n pages takes the shortest kept run of n to 2n pages (60% of
 * bench-random's samples). A kept run keeps its record and page-map
 * entries; only its kind changes (SPAN_KEPT), so that a free of it is a
 * bad pointer.
 *
 * New runs come from the page heap of the thread's own arena, whose small
 * spans the sampled block would otherwise have used (large blocks go to
 * the node's first arena: large.c), so that freed runs go back where
 * spans can take them and threads of other arenas do not share a lock
 * for them.
 *
 * The kept pages stay in the arena's large_allocated (as jemalloc's
 * tcache counts its cached blocks as allocated) until the heap is flushed
 * (thread.tcache.flush, thread exit, a move to another arena). */
#include "sample_run.h"

#include <errno.h>
#include <string.h>

#include "arena.h"
#include "heap.h"
#include "large.h"
#include "pagemap.h"
#include "tsd.h"

_Static_assert(SAMPLE_RUN_PAGES * PAGE >= SC_SMALL_MAX,
               "every small request fits a kept run");

/* A run's kind changes here without its arena's lock, while another
 * thread's page heap may read it as the neighbour of a run it frees or
 * takes (page_heap.c, run_kind): an atomic store (TSan saw the race in
 * alloc_fork_signal_prof_sampled, 2 runs in 6). */
static void sample_run_set_kind(span_t *s, uint8_t kind) {
  __atomic_store_n(&s->kind, kind, __ATOMIC_RELAXED);
}

void *sample_run_alloc(tsd_t *tsd, size_t size, bool zero) {
  nalloc_assert(size <= SC_SMALL_MAX);
  size_t np = size ? ALIGN_UP(size, PAGE) / PAGE : 1;
  heap_t *h = tsd->heap;
  /* the shortest kept run of np to 2 np pages: its tail is resident
   * already (it was kept), and taking it leaves room for a new one */
  size_t top = np * 2 < SAMPLE_RUN_PAGES ? np * 2 : SAMPLE_RUN_PAGES, n = np;
  span_t *s = NULL;
  if (h != &heap_none && h->srun_pages != 0)
    for (; n <= top && (s = h->sruns[n - 1]) == NULL; n++) {
    }
  if (s != NULL) {
    nalloc_assert(s->kind == SPAN_KEPT && s->npages == n && s->sample_run);
    h->sruns[n - 1] = NULL;
    h->srun_pages -= (uint16_t)n;
    sample_run_set_kind(s, SPAN_LARGE);
    if (zero) memset((void *)s->start, 0, size);
    return (void *)s->start;
  }
  arena_t *a = arena_get(tsd->state == TSD_NOMINAL ? tsd->arena : 0);
  if (a == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = large_alloc_in(a, size ? size : 1, 0, zero);
  if (p != NULL) pagemap_get(p)->sample_run = 1;
  return p;
}

bool sample_run_keep(span_t *s) {
  nalloc_assert(s->kind == SPAN_LARGE && s->sample_run && s->large_tctx == NULL);
  tsd_t *tsd = tsd_get();
  heap_t *h = tsd->heap;
  size_t np = s->npages;
  if (h == &heap_none || tsd->state != TSD_NOMINAL || np > SAMPLE_RUN_PAGES ||
      h->sruns[np - 1] != NULL || h->srun_pages + np > SAMPLE_RUN_KEEP)
    return false;
  sample_run_set_kind(s, SPAN_KEPT);
  s->zeroed = 0;
  h->sruns[np - 1] = s;
  h->srun_pages += (uint16_t)np;
  return true;
}

void sample_run_flush(heap_t *h) {
  for (unsigned i = 0; i < SAMPLE_RUN_PAGES && h->srun_pages != 0; i++) {
    span_t *s = h->sruns[i];
    if (s == NULL) continue;
    h->sruns[i] = NULL;
    h->srun_pages -= (uint16_t)s->npages;
    sample_run_set_kind(s, SPAN_LARGE);
    large_free(s);
  }
}
