/* arena.c -- arenas: creation, abandoned spans, the shared heap, purging,
 * statistics and fork. The page heap itself is page_heap.c. */
#include "arena.h"

#include <limits.h>
#include <string.h>

#include "background.h"
#include "base.h"
#include "heap.h"
#include "lock.h"
#include "node.h"
#include "os.h"
#include "page_heap.h"

NALLOC_BIG_BSS _Atomic(arena_t *) arenas[ARENAS_MAX];
unsigned arenas_count = 1;
static nlock_t arenas_lock = NLOCK_INITIALIZER(LOCK_ARENAS);

/* At boot, and again when NUMA discovery (node_discover) sets the real
 * count; never fewer than a fork child's arena_usable already added. */
void arena_boot(void) {
  /* The table's first page is touched first by a write (a compare-exchange
   * of NULL for NULL writes even when it fails): one page fault, where
   * arena_get's load maps the zero page and its store copies it, two. */
  arena_t *none = NULL;
  atomic_compare_exchange_strong_explicit(&arenas[0], &none, NULL, memory_order_relaxed,
                                          memory_order_relaxed);
  unsigned n = node_arena_count();
  if (n > arenas_count) arenas_count = n;
}

static arena_t *arena_create(unsigned i) {
  arena_t *a = base_alloc(sizeof(arena_t));
  if (a == NULL) return NULL;
  a->index = i;
  a->node = node_of_arena(i);
  nlock_init(&a->heap_lock, LOCK_ARENA_HEAP);
  nlock_init(&a->abandon_lock, LOCK_ARENA_ABANDON);
  nlock_init(&a->shared_lock, LOCK_ARENA_SHARED);
  nlock_init(&a->reap_lock, 0); /* only ever tried, never waited for */
  a->decay_next_ns = a->reap_due_ns = UINT64_MAX; /* nothing to decay */
  return a; /* its shared heap: on first use (arena_shared_heap) */
}

arena_t *arena_get(unsigned i) {
  arena_t *a = atomic_load_explicit(&arenas[i], memory_order_acquire);
  if (likely(a != NULL)) return a;
  nlock_lock(&arenas_lock);
  a = atomic_load_explicit(&arenas[i], memory_order_relaxed);
  if (a == NULL && (a = arena_create(i)) != NULL)
    atomic_store_explicit(&arenas[i], a, memory_order_release);
  nlock_unlock(&arenas_lock);
  return a;
}

/* Arena j's thread count (an arena not made yet has none). */
static unsigned arena_nthreads(unsigned j) {
  arena_t *a = atomic_load_explicit(&arenas[j], memory_order_acquire);
  return a ? atomic_load_explicit(&a->nthreads, memory_order_relaxed) : 0;
}

/* Of the arenas of the node node_pick_arena chose, the one with the
 * fewest threads, the lowest index among equals. Threads that start one
 * after another then take the same arena, and adopt the spans the last
 * one left, hot in cache (round-robin sent each to the other arena, whose
 * spans had gone cold, and kept both arenas' spans resident). The count
 * is claimed with a compare-and-swap: threads that start together see
 * each other's claims and spread as round-robin spread them. */
arena_t *arena_pick(void) {
  unsigned i = node_pick_arena(), node = node_of_arena(i);
  for (;;) {
    unsigned best = i, least = UINT_MAX;
    for (unsigned j = node_first_arena(i); j < node_arena_count() && node_of_arena(j) == node;
         j++) {
      unsigned n = arena_nthreads(j);
      if (n < least) {
        least = n;
        best = j;
      }
    }
    arena_t *a = arena_get(best);
    if (a == NULL) return NULL;
    unsigned n = least == UINT_MAX ? 0 : least;
    if (atomic_compare_exchange_strong_explicit(&a->nthreads, &n, n + 1, memory_order_relaxed,
                                                memory_order_relaxed))
      return a;
  }
}

arena_t *arena_usable(arena_t *a) {
  if (likely(!a->broken)) return a;
  FOR_EACH_ARENA(b) if (!b->broken) return b;
  /* Every arena was mid-update in the forking thread: a fresh one. */
  if (arenas_count < ARENAS_MAX) {
    arena_t *n = arena_get(arenas_count);
    if (n != NULL) {
      arenas_count++;
      return n;
    }
  }
  return a; /* out of memory: fail in the caller's usual way */
}

/* ---- abandoned spans ------------------------------------------------------ */

/* An empty span parked on the abandoned lists is given back to the page
 * heap by the next decay walk (arena_decay reaps before it purges), so the
 * walk must come: within dirty_decay_ms / 16, the page heap's own gap
 * between walks. Its pages then decay as any freed run. The time is kept
 * apart from the page heap's own (reap_due_ns): a page-heap walk made by
 * an allocation recomputes decay_next_ns from the free runs alone. */
static void arena_note_parked(arena_t *a) {
  uint64_t due = nalloc_now_ns() + (uint64_t)opt_dirty_decay_ms * 1000000u / 16;
  nlock_lock(&a->heap_lock);
  if (due < a->reap_due_ns) a->reap_due_ns = due;
  size_t npages = a->npages_dirty + a->npages_muzzy;
  due = a->reap_due_ns;
  nlock_unlock(&a->heap_lock);
  background_note_dirty(npages, due);
}

static void abandoned_link(arena_t *a, span_t *s) {
  a->nmoves++;
  s->list = SL_ABANDONED;
  s->prev = NULL;
  s->next = load_rlx(&a->abandoned[s->cls]);
  if (s->next) s->next->prev = s;
  store_rlx(&a->abandoned[s->cls], s);
}

/* Empty spans parked per class: a thread that exits parks about one a
 * class it used (its current span), and the next thread takes about one;
 * more only hold pages other classes could use (bench-threads' peak RSS). */
#define ARENA_PARK_MAX 1

void arena_abandon(arena_t *a, span_t *s) {
  s->next = NULL;
  arena_abandon_list(a, s);
}

void arena_abandon_list(arena_t *a, span_t *s) {
  if (a->broken) return; /* fork child: its lists may be mid-update */
  bool parked = false;
  nlock_lock(&a->abandon_lock);
  for (span_t *next; s != NULL; s = next) {
    next = s->next;
    nalloc_assert(s->arena == a->index);
    if (s->used == 0 && (opt_dirty_decay_ms == 0 || a->nparked[s->cls] >= ARENA_PARK_MAX)) {
      nlock_unlock(&a->abandon_lock);
      s->list = SL_NONE;
      span_destroy(s);
      nlock_lock(&a->abandon_lock);
      continue;
    }
    parked |= s->used == 0;
    abandoned_link(a, s);
    if (s->used == 0) {
      s->list = SL_PARKED;
      a->nparked[s->cls]++;
    }
  }
  nlock_unlock(&a->abandon_lock);
  if (parked && opt_dirty_decay_ms > 0) arena_note_parked(a);
}

static void abandoned_unlink(arena_t *a, span_t *s) {
  if (s->list == SL_PARKED) {
    nalloc_assert(a->nparked[s->cls] > 0);
    a->nparked[s->cls]--;
  }
  if (s->prev) s->prev->next = s->next;
  else store_rlx(&a->abandoned[s->cls], s->next);
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

span_t *arena_adopt(arena_t *a, unsigned cls, heap_t *h) {
  if (a->broken || load_rlx(&a->abandoned[cls]) == NULL) return NULL; /* a peek */
  nlock_lock(&a->abandon_lock);
  span_t *s = load_rlx(&a->abandoned[cls]);
  if (s != NULL) {
    abandoned_unlink(a, s);
    a->nmoves++;
  }
  nlock_unlock(&a->abandon_lock);
  if (s != NULL) span_adopt(s, h);
  return s;
}

/* Abandoned spans whose blocks were all freed since (by other threads)
 * go back to the page heap. The lock makes the arena their owner, so with
 * `holes` it also purges the free pages of the others (span_purge_holes:
 * `always` for malloc_trim and arena.<i>.purge, where everything free goes
 * back now); not in decay, as the next thread of the arena adopts them to
 * fill them, unless none came or went for a while (arena_idle_look). */
static void arena_reap_abandoned(arena_t *a, bool holes, bool always) {
  os_batch_t purge; /* flushed while the lock keeps s ours */
  os_batch_init(&purge);
  nlock_lock(&a->abandon_lock);
  for (unsigned c = 0; c < SC_NSMALL; c++)
    for (span_t *s = load_rlx(&a->abandoned[c]), *next; s != NULL; s = next) {
      next = s->next;
      span_collect(s);
      if (s->used != 0 && holes) span_purge_holes(s, always, &purge);
      if (s->used != 0) continue;
      abandoned_unlink(a, s);
      s->list = SL_NONE;
      span_destroy(s);
    }
  os_purge_flush(&purge);
  nlock_unlock(&a->abandon_lock);
}

/* Frees into abandoned spans between two looks for emptied ones: the look
 * walks every abandoned span, so it is paid for by this many frees. */
#define ARENA_REAP_EVERY 1024

void arena_note_orphan_free(arena_t *a) {
  if (atomic_fetch_add_explicit(&a->orphan_frees, 1, memory_order_relaxed) %
          ARENA_REAP_EVERY != ARENA_REAP_EVERY - 1 ||
      a->broken)
    return;
  if (!nlock_trylock(&a->reap_lock)) return; /* someone is at it */
  arena_reap_abandoned(a, false, false);
  nlock_unlock(&a->reap_lock);
}

void arena_idle_look(arena_t *a) {
  if (a->broken) return;
  nlock_lock(&a->abandon_lock);
  /* every span on the lists has been there since the last look */
  bool idle = a->nmoves == a->look_moves;
  a->look_moves = a->nmoves;
  nlock_unlock(&a->abandon_lock);
  if (idle) arena_reap_abandoned(a, true, false);
}

/* ---- the shared heap --------------------------------------------------- */

/* The arena's shared heap, made on first use (under shared_lock): most
 * processes never use it (a thread with a heap of its own allocates
 * there), and its 7.5 KiB record made with the arena put one or two more
 * pages of metadata in every process's start-up (a `cat`: 138 page faults,
 * 136-137 without). */
static heap_t *arena_shared_heap(arena_t *a) {
  heap_t *h = a->shared;
  if (likely(h != NULL) || (h = base_alloc(sizeof(heap_t))) == NULL) return h;
  for (unsigned c = 0; c < SC_NSMALL; c++) h->cur[c] = &span_none;
  h->arena = a;
  h->lock = &a->shared_lock;
  h->live = 1;
  a->shared = h;
  return h;
}

void *arena_shared_alloc(arena_t *a, unsigned cls) {
  a = arena_usable(a);
  nlock_lock(&a->shared_lock);
  heap_t *h = arena_shared_heap(a);
  void *p = NULL;
  if (h != NULL && (p = span_pop(h->cur[cls])) == NULL) p = heap_alloc_slow(h, cls);
  nlock_unlock(&a->shared_lock);
  return p;
}

/* ---- purge and statistics --------------------------------------------------- */

size_t arena_purge(arena_t *a, bool all) {
  if (a->broken) return 0;
  nlock_lock(&a->shared_lock);
  if (a->shared != NULL) heap_trim(a->shared);
  nlock_unlock(&a->shared_lock);
  nlock_lock(&a->heap_lock);
  a->reap_due_ns = UINT64_MAX; /* before the reap: a span parked after it is due again */
  nlock_unlock(&a->heap_lock);
  arena_reap_abandoned(a, all, all);
  nlock_lock(&a->heap_lock);
  size_t n = pheap_purge(a, all);
  nlock_unlock(&a->heap_lock);
  base_decay(all); /* the metadata of spans the reap gave back, among others */
  return n;
}

uint64_t arena_decay(arena_t *a) {
  if (a->broken) return UINT64_MAX;
  arena_purge(a, false);
  return arena_decay_next(a);
}

uint64_t arena_decay_next(arena_t *a) {
  if (a->broken) return UINT64_MAX;
  nlock_lock(&a->heap_lock);
  uint64_t next = pheap_decay_next(a);
  if (a->reap_due_ns < next) next = a->reap_due_ns;
  nlock_unlock(&a->heap_lock);
  uint64_t b = base_decay_next();
  return b < next ? b : next;
}

/* Live slots of a small span: used counts remote frees not yet collected.
 * Reads another thread's counters as they are (statistics are a snapshot
 * of a moving heap): a racy read, on purpose, of plain fields. */
__attribute__((no_sanitize("thread"))) static uint32_t span_live(span_t *s) {
  uint32_t pending = 0;
  for (unsigned w = 0; w < s->nwords; w++)
    pending += (uint32_t)__builtin_popcountll(load_rlx(&span_rbits(s)[w]));
  /* the current span of a heap carries a phantom allocation (heap.c) */
  uint32_t used = *(volatile uint16_t *)&s->used - (*(volatile uint8_t *)&s->list == SL_CUR);
  return used > pending && used < (1u << 31) ? used - pending : 0;
}

__attribute__((no_sanitize("thread"))) static uint64_t span_nmalloc(span_t *s) {
  return *(volatile uint64_t *)&s->nmalloc;
}

void arena_stats(arena_t *a, arena_stats_t *st) {
  memset(st, 0, sizeof *st);
  uint64_t live = 0;
  nlock_lock(&a->heap_lock);
  /* fork child: the list may be mid-update; its counters are just numbers */
  for (span_t *s = a->broken ? NULL : a->small_all; s != NULL; s = s->anext) {
    uint32_t n = span_live(s);
    live += n;
    st->allocated += (size_t)n * s->slot_size;
    st->nmalloc += span_nmalloc(s);
  }
  st->nmalloc += a->nmalloc_small_gone + a->nmalloc_large;
  live += a->nmalloc_large - a->ndalloc_large;
  st->ndalloc = st->nmalloc - live;
  st->allocated += a->large_allocated;
  /* holes: pages of live spans their owners purged, in active still */
  size_t holes = atomic_load_explicit(&a->npages_holes, memory_order_relaxed);
  st->active = (a->npages_active - (holes < a->npages_active ? holes : 0)) * PAGE;
  st->dirty = a->npages_dirty * PAGE;
  st->muzzy = a->npages_muzzy * PAGE;
  st->mapped = a->mapped;
  st->npurged = a->npurged;
  st->nmuzzied = a->nmuzzied;
  st->npurge_calls = a->npurge_calls;
  nlock_unlock(&a->heap_lock);
  st->npurged += atomic_load_explicit(&a->nholes_purged, memory_order_relaxed);
  st->npurge_calls += atomic_load_explicit(&a->nholes_calls, memory_order_relaxed);
  st->nthreads = atomic_load_explicit(&a->nthreads, memory_order_relaxed);
}

/* ---- ctl ---------------------------------------------------------------- */

/* arena.<i>.purge with this index means every arena, as in jemalloc
 * (MALLCTL_ARENAS_ALL). */
#define ARENA_CTL_ALL 4096

/* arena.<i>.purge; i == narenas (or ARENA_CTL_ALL) purges every arena. */
static int arena_ctl_purge(const size_t *idx, void *oldp, size_t *oldlenp, void *newp,
                           size_t newlen) {
  (void)oldp, (void)oldlenp, (void)newp, (void)newlen; /* none: a command */
  size_t i = idx[0];
  if (i < arenas_count) {
    arena_t *a = arena_get((unsigned)i);
    if (a == NULL) return ENOMEM;
    arena_purge(a, true);
    return 0;
  }
  if (i != arenas_count && i != ARENA_CTL_ALL) return ENOENT;
  FOR_EACH_ARENA(a) arena_purge(a, true);
  return 0;
}

static const ctl_row_t arena_ctl_rows[] = {
    {"arenas.narenas", CTL_UNSIGNED, CTL_RO, CTL_SNAPSHOT, .v.u = &arenas_count},
    {"arena.#.purge", CTL_NONE, CTL_WO, 0, .fn = arena_ctl_purge},
};
const ctl_table_t arena_ctl_table = {arena_ctl_rows, ARRAY_LEN(arena_ctl_rows)};

/* ---- fork ---------------------------------------------------------------
 * Locks in rank order: every arena's shared heap, then abandoned lists,
 * then page heaps, then the arena table. */

void arena_prefork(void) {
  FOR_EACH_ARENA(a) nlock_prefork(&a->shared_lock);
  FOR_EACH_ARENA(a) nlock_prefork(&a->abandon_lock);
  FOR_EACH_ARENA(a) nlock_prefork(&a->heap_lock);
  nlock_prefork(&arenas_lock);
}

void arena_postfork_parent(void) {
  nlock_postfork_parent(&arenas_lock);
  FOR_EACH_ARENA(a) nlock_postfork_parent(&a->heap_lock);
  FOR_EACH_ARENA(a) nlock_postfork_parent(&a->abandon_lock);
  FOR_EACH_ARENA(a) nlock_postfork_parent(&a->shared_lock);
}

/* An arena whose lock the forking thread held (fork from a signal handler
 * that interrupted it) may be mid-update: the child leaves it alone. */
void arena_postfork_child(void) {
  (void)nlock_postfork_child(&arenas_lock);
  FOR_EACH_ARENA(a) {
    bool broken = nlock_postfork_child(&a->heap_lock);
    broken |= nlock_postfork_child(&a->abandon_lock);
    broken |= nlock_postfork_child(&a->shared_lock);
    a->broken |= broken;
    nlock_init(&a->reap_lock, 0);
    atomic_store_explicit(&a->nthreads, 0, memory_order_relaxed);
  }
  background_postfork_child();
}
