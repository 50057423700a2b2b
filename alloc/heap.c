/* heap.c -- a heap's slow paths: finding the next span of a class,
 * the owner's frees into spans off the fast path, the remote queue, and
 * giving every span back (thread exit, flush, arena move, fork child).
 *
 * Everything here runs in the owning thread (or under a shared heap's
 * lock) but heap_queue_push, which any thread calls, and heap_idle_sweep,
 * which the decay thread calls. Every change to the lists, and to spans
 * other than the current ones, is made between heap_enter and heap_leave
 * (`busy`): so that the decay thread can look at an idle heap's spans,
 * and a fork child can tell a heap that a signal handler's fork
 * interrupted mid-update. */
#include "heap.h"

#include <sched.h>
#include <string.h>

#include "arena.h"
#include "background.h"
#include "base.h"
#include "lock.h"
#include "os.h"
#include "sample_run.h"

/* Empty spans a heap keeps per class for its next allocations; the rest go
 * back to the page heap (where other classes and threads can use them). */
#define HEAP_EMPTY_KEEP 1
_Static_assert(HEAP_EMPTY_KEEP <= UINT8_MAX, "heap_bin_t.nempty is 8 bits");

/* Slow paths (a malloc that found its span's word dry) between two idle
 * sweeps of a heap (heap_gc), and the smallest span a sweep gives back: a
 * span of 1-3 pages (a class's first) holds little, and giving it back
 * leaves a hole of its size that only another first span fits (bench-random
 * -t 1 peak 42.7 -> 43.8 MB when every idle span went back, 41.9 with
 * this bound and run_find's preference for warm runs). */
#define HEAP_GC_EVERY 256
#define HEAP_GC_MIN_PAGES 4
/* New spans between two looks for holes outside the sweeps. */
#define HEAP_HOLES_GROW 16

/* A class that handed out no slot over a whole sweep interval has
 * stopped allocating for now: its available spans' free pages are purged
 * (heap_gc_holes), and looked at again every HEAP_HOLES_AGAIN sweeps
 * (frees trickling in). Each time such a span comes back into use, the
 * class must stay idle for twice as many sweeps first, up to
 * HEAP_HOLES_AFTER_MAX: a class that allocates in bursts would pay two
 * system calls and the zeroing for the same pages again and again. */
#define HEAP_HOLES_AGAIN 16
/* A current span's tail holes are counted back in and purged again after
 * this many times its mallocs may have reached them but did not keep a
 * slot there (gc_tail). */
#define HEAP_TAIL_AGAIN 8
/* Sweeps over which a class's slots in use (in its current span) are
 * watched: the tail is cut past twice the most it had in use at the sweeps
 * of the last whole window and of this one. A class whose blocks come and
 * go in bursts keeps its pages: cut past twice the slots in use at one
 * sweep, bench-random -t 1 took 15.5k page faults instead of 10.1k (past
 * twice the mallocs of the last interval, 31k). */
#define HEAP_TAIL_WINDOW 4
#define HEAP_HOLES_AFTER_MAX 64

bool opt_tcache = true;
size_t opt_tcache_max = SC_SMALL_MAX;

static const conf_entry_t heap_conf_rows[] = {
    {"tcache", CONF_BOOL, &opt_tcache, 0, 0, NULL, 0, "per-thread caches"},
    {"tcache_max", CONF_SIZE, &opt_tcache_max, 0, (int64_t)SC_SMALL_MAX, NULL, 0,
     "largest size kept in thread caches"},
};
const conf_table_t heap_conf_table = {heap_conf_rows, ARRAY_LEN(heap_conf_rows)};

heap_t heap_none = {.cur = {[0 ... SC_NSMALL - 1] = &span_none}};

static nlock_t heaps_lock = NLOCK_INITIALIZER(LOCK_HEAPS);
/* every heap ever made (heaps_lock to add; read without it by the decay
 * thread: records are never freed, and next_all is set before a record
 * is published) */
static _Atomic(heap_t *) heaps_all;
static heap_t *heaps_free; /* heaps of exited threads, for new ones */

/* ---- owner-private span lists ------------------------------------------ */

static void list_append(span_list_t *l, span_t *s) {
  s->next = NULL;
  s->prev = l->tail;
  if (l->tail) l->tail->next = s;
  else l->head = s;
  l->tail = s;
}

static void list_remove(span_list_t *l, span_t *s) {
  if (s->prev) s->prev->next = s->next;
  else l->head = s->next;
  if (s->next) s->next->prev = s->prev;
  else l->tail = s->prev;
  s->next = s->prev = NULL;
}

/* The lists are in SL_* order in heap_bin_t: no branches. */
_Static_assert(offsetof(heap_bin_t, full) == offsetof(heap_bin_t, avail) + sizeof(span_list_t) &&
                   offsetof(heap_bin_t, empty) == offsetof(heap_bin_t, full) + sizeof(span_list_t) &&
                   SL_FULL == SL_AVAIL + 1 && SL_EMPTY == SL_FULL + 1,
               "heap_list indexes the lists by SL_*");
static span_list_t *heap_list(heap_bin_t *b, uint8_t list) {
  nalloc_assert(list == SL_AVAIL || list == SL_FULL || list == SL_EMPTY);
  return &b->avail + (list - SL_AVAIL);
}

/* A thread heap's spans take fast frees; a shared heap's never do (no
 * thread's tsd.heap is a shared heap). */
static heap_t *heap_fast(heap_t *h) { return h->lock == NULL ? h : NULL; }

static unsigned heap_holes_after(const heap_bin_t *b) {
  return b->holes_after ? b->holes_after : 1;
}

static void heap_put(heap_t *h, span_t *s, uint8_t list) {
  heap_bin_t *b = &h->bins[s->cls];
  nalloc_assert(s->list == SL_NONE && atomic_load(&s->owner) == h);
  span_check(s);
  s->list = list;
  list_append(heap_list(b, list), s);
  if (list == SL_EMPTY) b->nempty++;
  if (list == SL_FULL) span_set_full(s, heap_fast(h));
  else span_set_fast(s, heap_fast(h));
}

static void heap_take(heap_t *h, span_t *s) {
  heap_bin_t *b = &h->bins[s->cls];
  nalloc_assert(s->list != SL_EMPTY || b->nempty > 0);
  if (s->list == SL_EMPTY) b->nempty--;
  list_remove(heap_list(b, s->list), s);
  s->list = SL_NONE;
}

/* A span with holes becomes current again: its class waits twice as many
 * idle sweeps before the next purge. */
static void heap_holes_back(heap_t *h, span_t *s) {
  heap_bin_t *b = &h->bins[s->cls];
  span_forget_holes(s);
  if (heap_holes_after(b) < HEAP_HOLES_AFTER_MAX)
    b->holes_after = (uint8_t)(2 * heap_holes_after(b));
}

/* The current span of a class carries one phantom allocation (used + 1),
 * so that free's fast path never sees it empty: a malloc/free pair on an
 * otherwise idle class stays on the fast path. */
static void heap_set_cur(heap_t *h, span_t *s) {
  nalloc_assert(s->list == SL_NONE && h->cur[s->cls] == &span_none);
  s->list = SL_CUR;
  s->used++;
  if (s->nholes) heap_holes_back(h, s);

  span_set_fast(s, heap_fast(h));
  h->cur[s->cls] = s;
}

static void heap_clear_cur(heap_t *h, span_t *s) {
  nalloc_assert(s->list == SL_CUR && s->used > 0 && h->cur[s->cls] == s);
  span_check(s);
  /* holes of its free tail that a malloc may have reached count back in
   * (intact ones stay holes, as an available span's) */
  if (s->nholes && !span_tail_intact(s)) span_forget_holes(s);
  h->cur[s->cls] = &span_none;
  s->list = SL_NONE;
  s->used--;
}

/* s ran dry as h's current span and stays h's: notes the sweep interval
 * of its last malloc, for gc_one once it is kept empty: this one, unless
 * it was current at the last sweep (gc_nmalloc) and has handed out no
 * slot since. (A span that leaves h, or is given back, needs no note.) */
static void heap_cur_done(heap_t *h, span_t *s) {
  s->gc_sweep = (uint16_t)(h->nsweeps - ((uint32_t)s->nmalloc == s->gc_nmalloc));
}

/* ---- registry ---------------------------------------------------------- */

/* Enters a slow path of h: its lists and its spans other than the current
 * ones may change until heap_leave. The decay thread's look at an idle
 * heap (heap_idle_sweep) is kept out the same way: each side marks
 * itself, then reads the other's mark (Dekker's pattern), so they never
 * both go on. The owner's side is plain stores and loads with a compiler
 * barrier between: the decay thread, which looks once per heap every few
 * seconds, pays for the fence of both (os_fence_all, between its mark
 * and its read), so a slow path costs no locked instruction. The decay
 * thread gives way when it sees the owner; the owner waits out a look in
 * progress (the free pages of a heap that had been idle). `busy` counts,
 * so that a slow path of a signal handler inside another leaves it set. */
static NALLOC_NOINLINE void heap_wait_look(heap_t *h) {
  while (atomic_load_explicit(&h->sweeping, memory_order_acquire)) sched_yield();
}

static NALLOC_ALWAYS_INLINE void heap_enter(heap_t *h) {
  store_rlx(&h->busy, (uint8_t)(load_rlx(&h->busy) + 1));
  atomic_signal_fence(memory_order_seq_cst);
  if (unlikely(atomic_load_explicit(&h->sweeping, memory_order_acquire))) heap_wait_look(h);
  store_rlx(&h->nslow, load_rlx(&h->nslow) + 1);
}

static NALLOC_ALWAYS_INLINE void heap_leave(heap_t *h) {
  nalloc_assert(load_rlx(&h->busy) > 0);
  atomic_store_explicit(&h->busy, (uint8_t)(load_rlx(&h->busy) - 1), memory_order_release);
}

heap_t *heap_create(arena_t *a) {
  nlock_lock(&heaps_lock);
  heap_t *h = heaps_free;
  if (h != NULL) heaps_free = h->next_free;
  nlock_unlock(&heaps_lock);
  bool recycled = h != NULL;
  if (h == NULL) {
    if ((h = base_alloc(sizeof *h)) == NULL) return NULL;
    nlock_lock(&heaps_lock);
    h->next_all = load_rlx(&heaps_all);
    atomic_store_explicit(&heaps_all, h, memory_order_release);
    nlock_unlock(&heaps_lock);
  }
  heap_enter(h); /* the decay thread may be looking at the record */
  if (recycled) {  /* base_alloc's memory is zero: its pages stay untouched */
    memset(h->bins, 0, sizeof h->bins);
    memset(h->sruns, 0, sizeof h->sruns);
    h->srun_pages = 0;
    memset(h->touched, 0, sizeof h->touched);
  }
  for (unsigned c = 0; c < SC_NSMALL; c++) h->cur[c] = &span_none;
  atomic_store_explicit(&h->rqueue, NULL, memory_order_relaxed);
  h->arena = a; /* lock stays NULL: only arenas' shared heaps have one */
  h->live = 1;
  h->gc_countdown = HEAP_GC_EVERY;
  h->holes_countdown = HEAP_HOLES_GROW;
  heap_leave(h);
  return h;
}

void heap_destroy(heap_t *h) {
  heap_enter(h);
  heap_flush(h);
  h->live = 0;
  heap_leave(h);
  nlock_lock(&heaps_lock);
  h->next_free = heaps_free;
  heaps_free = h;
  nlock_unlock(&heaps_lock);
}

/* ---- the remote queue -------------------------------------------------- */

void heap_queue_push(heap_t *h, span_t *s) {
  span_t *head = atomic_load_explicit(&h->rqueue, memory_order_relaxed);
  do {
    s->rnext = head;
  } while (!atomic_compare_exchange_weak_explicit(&h->rqueue, &head, s,
                                                  memory_order_release,
                                                  memory_order_relaxed));
}

/* An empty span: kept for the class's next allocations, or given back. */
static void heap_keep_or_destroy(heap_t *h, span_t *s) {
  heap_bin_t *b = &h->bins[s->cls];
  if (b->nempty < HEAP_EMPTY_KEEP) {
    heap_put(h, s, SL_EMPTY);
    return;
  }
  nalloc_assert(b->nspans > 0);
  b->nspans--;
  span_destroy(s);
}

/* Full spans announced by remote frees become available again (or empty).
 * A span a local free already took off the full list is skipped. The
 * list was taken whole, so every entry is complete and ours. */
static bool heap_drain(heap_t *h) {
  span_t *s = atomic_exchange_explicit(&h->rqueue, NULL, memory_order_acquire);
  bool any = false;
  while (s != NULL) {
    span_t *next = s->rnext;
    span_dequeued(s);
    if (s->list == SL_FULL) {
      heap_take(h, s);
      span_collect(s);
      if (s->used == 0) heap_keep_or_destroy(h, s);
      else heap_put(h, s, SL_AVAIL);
      any = true;
    }
    s = next;
  }
  return any;
}

/* ---- allocation -------------------------------------------------------- */

static void heap_gc_holes(heap_t *h, bool sweep, os_batch_t *purge);

/* A look for holes between sweeps (heap_next); out of line, so the batch
 * on its stack is no part of heap_next's frame (inlined into
 * heap_alloc_span, +0.9% instructions on bench-threads when it was). */
static NALLOC_NOINLINE void heap_look_holes(heap_t *h) {
  os_batch_t purge;
  os_batch_init(&purge);
  heap_gc_holes(h, false, &purge);
  os_purge_flush(&purge);
}

/* The next span for class cls, taken off every list. */
static span_t *heap_next(heap_t *h, unsigned cls) {
  heap_bin_t *b = &h->bins[cls];
  span_t *s = b->avail.head;
  if (s == NULL && atomic_load_explicit(&h->rqueue, memory_order_relaxed) && heap_drain(h))
    s = b->avail.head;
  if (s == NULL) s = b->empty.head;
  if (s != NULL) {
    heap_take(h, s);
    return s;
  }
  arena_t *a = arena_usable(h->arena);
  h->touched[cls / 64] |= (uint64_t)1 << (cls % 64);
  if ((s = arena_adopt(a, cls, h)) != NULL) {
    b->nspans++;
    return s;
  }
  /* new pages: a heap that grows while it holds idle free pages looks
   * for holes sooner than its next sweep */
  if (--h->holes_countdown == 0) heap_look_holes(h);
  s = span_create(a, cls, sc_npages(cls, b->nspans));
  if (s == NULL) return NULL;
  b->nspans++;
  atomic_store_explicit(&s->owner, h, memory_order_release);
  return s;
}

static void heap_gc(heap_t *h);

/* heap_alloc_slow when the current span has no free slot in its free
 * bitmap, or a sweep is due. */
static NALLOC_NOINLINE void *heap_alloc_span(heap_t *h, unsigned cls) {
  void *p = NULL;
  heap_enter(h);
  if (h->gc_countdown == 0) heap_gc(h);
  for (;;) {
    span_t *s = h->cur[cls];
    if (s != &span_none) {
      if (span_find(s)) {
        p = span_pop(s);
        break;
      }
      if (!span_want(s)) continue; /* remote frees came in: usable */
      heap_clear_cur(h, s);
      heap_cur_done(h, s);
      heap_put(h, s, SL_FULL);
    }
    if ((s = heap_next(h, cls)) == NULL) break;
    heap_set_cur(h, s);
  }
  heap_leave(h);
  return p;
}

void heap_tick(heap_t *h) {
  if (--h->gc_countdown != 0) return;
  heap_enter(h);
  heap_gc(h);
  heap_leave(h);
}

/* Most often another word of the current span's free bitmap has a free
 * slot: no list changes (so `busy` stays clear), only the cursor moves. */
void *heap_alloc_slow(heap_t *h, unsigned cls) {
  span_t *s = h->cur[cls];
  if (likely(--h->gc_countdown != 0) && s->used <= s->nslots && span_find_local(s))
    return span_pop(s);
  return heap_alloc_span(h, cls);
}

/* ---- the owner's frees off the fast path ---------------------------- */

static void heap_span_empty_busy(heap_t *h, span_t *s) {
  nalloc_assert(s->list != SL_CUR); /* its phantom allocation */
  heap_take(h, s);
  (void)span_quiet(s); /* no announcement from now on... */
  /* ...but it may sit on the remote queue (announced while it was full):
   * drain first, so the queue never holds a span given back */
  if (atomic_load_explicit(&h->rqueue, memory_order_relaxed)) heap_drain(h);
  heap_keep_or_destroy(h, s);
}

void heap_span_empty(heap_t *h, span_t *s) {
  heap_enter(h);
  heap_span_empty_busy(h, s);
  heap_leave(h);
  background_poll(); /* pages given back may have asked for the decay thread */
}

/* heap_free_full and heap_free_full_live: s goes back to the available
 * list with owner_fast `fast`. */
static NALLOC_ALWAYS_INLINE bool heap_free_full_as(heap_t *h, span_t *s, uint32_t i,
                                                   heap_t *fast) {
  nalloc_assert(s->list == SL_FULL && h->lock == NULL);
  heap_enter(h);
  int r = span_push(s, i);
  if (r != PUSH_DOUBLE) {
    heap_bin_t *b = &h->bins[s->cls];
    span_unwant(s);
    list_remove(&b->full, s);
    s->list = SL_AVAIL;
    list_append(&b->avail, s);
    store_rlx(&s->owner_fast, fast);
    if (r == PUSH_EMPTY) heap_span_empty_busy(h, s);
  }
  heap_leave(h);
  return r != PUSH_DOUBLE;
}

bool heap_free_full(heap_t *h, span_t *s, uint32_t i) {
  /* as span_set_fast: no live sample (span_full_tag), and only h
   * samples in its spans */
  nalloc_assert(span_unsampled(s));
  return heap_free_full_as(h, s, i, h);
}

bool heap_free_full_live(heap_t *h, span_t *s, uint32_t i) {
  /* as span_set_fast (only h samples in its spans, and other threads
   * only lower prof_live: a tag read too early is put right by the next
   * free that reads 0, free_slot_tagged) */
  nalloc_assert(load_rlx(&s->prof_births));
  return heap_free_full_as(h, s, i, span_unsampled(s) ? h : span_fast_tag(h));
}

bool heap_free_owned(heap_t *h, span_t *s, uint32_t i) {
  heap_enter(h);
  int r = span_push(s, i);
  if (r != PUSH_DOUBLE) {
    if (s->list == SL_FULL) { /* a slot again: back to the available list */
      span_unwant(s);
      heap_take(h, s);
      heap_put(h, s, SL_AVAIL);
    }
    if (r == PUSH_EMPTY) heap_span_empty_busy(h, s);
  }
  heap_leave(h);
  return r != PUSH_DOUBLE;
}

/* ---- giving spans back ------------------------------------------------- */

static void heap_each_class(heap_t *h, unsigned c, void (*fn)(span_t *s, void *arg),
                            void *arg, bool unlink) {
  heap_bin_t *b = &h->bins[c];
  span_t *lists[3] = {b->avail.head, b->full.head, b->empty.head};
  for (int k = 0; k < 3; k++)
    for (span_t *s = lists[k], *next; s != NULL; s = next) {
      next = s->next;
      if (unlink) s->next = s->prev = NULL;
      fn(s, arg);
    }
  if (h->cur[c] != &span_none) fn(h->cur[c], arg);
  if (unlink) {
    memset(b, 0, sizeof *b);
    h->cur[c] = &span_none;
  }
}

/* Runs the statement after it for every class c the heap took spans of
 * (`touched`), lowest first: what the walks over a heap's classes visit
 * instead of all SC_NSMALL bins (a short-lived thread touches a few). The
 * innermost loop runs once, to name the class. */
#define HEAP_FOR_TOUCHED(h, c)                                              \
  for (unsigned c##_w = 0; c##_w < ARRAY_LEN((h)->touched); c##_w++)        \
    for (uint64_t c##_m = (h)->touched[c##_w]; c##_m != 0; c##_m &= c##_m - 1) \
      for (unsigned c = c##_w * 64 + (unsigned)__builtin_ctzll(c##_m), c##_1 = 1; c##_1; \
           c##_1 = 0)

/* Calls fn on every span of h (current ones included), unlinking each
 * first. */
static void heap_each(heap_t *h, void (*fn)(span_t *s, void *arg), void *arg,
                      bool unlink) {
  HEAP_FOR_TOUCHED(h, c) heap_each_class(h, c, fn, arg, unlink);
  if (unlink) memset(h->touched, 0, sizeof h->touched);
}

/* heap_each's argument for trim_one: the heap, and the batch its holes
 * go into, flushed before a span goes back to the page heap (where
 * another thread may carve and write its pages: a sweep may have purged
 * the current span's tail before it gives the span back). */
typedef struct {
  heap_t *h;
  os_batch_t *purge;
} heap_trim_arg_t;

static void trim_one(span_t *s, void *varg) {
  heap_trim_arg_t *arg = varg;
  heap_t *h = arg->h;
  span_collect(s);
  if (s->used != (s->list == SL_CUR)) {
    if (s->list == SL_AVAIL) span_purge_holes(s, true, arg->purge);
    return;
  }
  if (!span_quiet(s)) return; /* announced since the drain: the next trim */
  if (arg->purge->n) os_purge_flush(arg->purge);
  if (s->list == SL_CUR) heap_clear_cur(h, s);
  else heap_take(h, s);
  nalloc_assert(h->bins[s->cls].nspans > 0);
  h->bins[s->cls].nspans--;
  span_destroy(s);
}

void heap_trim(heap_t *h) {
  os_batch_t purge;
  os_batch_init(&purge);
  heap_trim_arg_t arg = {h, &purge};
  heap_enter(h);
  heap_drain(h);
  heap_each(h, trim_one, &arg, false);
  os_purge_flush(&purge);
  heap_leave(h);
}

/* The idle sweep, every HEAP_GC_EVERY slow paths, per class the heap
 * touched:
 *
 * - An empty span (the current one or a kept one) of HEAP_GC_MIN_PAGES or
 *   more that handed out no slot since the last sweep goes back to the
 *   page heap, where any class, large block or thread can carve its pages.
 *   Not an available span that remote frees emptied: those are the spans
 *   the heap turns to next (bench-xmix -t 2 peak 21.5 -> 22.9 MB when they
 *   went back too). Without it a class a thread stops using keeps its
 *   touched pages for good: CPython's threading tests held 1.75 MiB
 *   resident in such spans at their peak (mostly 4-64 KiB classes of
 *   short-lived buffers). A class in use hands out slots between two
 *   sweeps and keeps its spans.
 * - Holes: the available spans of a class that handed out no slot over a
 *   whole interval hold pages with no live slot that nothing will write
 *   soon (bench-frag: after 9 of 10 blocks of 16 B-1 KiB are freed, about
 *   45% of their spans' pages, which its next phase's 1-4 KiB blocks
 *   cannot use). Only the owner may purge them (span_purge_holes); they
 *   fault back in as it writes there once the span is current again. A
 *   class still allocating is left alone: its available spans are the
 *   next it takes. A heap that makes new spans looks for holes every
 *   HEAP_HOLES_GROW of them too, between sweeps: it grows while it may
 *   hold idle free pages.
 */
static void gc_one(heap_t *h, span_t *s, os_batch_t *purge) {
  nalloc_assert(s->list == SL_CUR || s->list == SL_EMPTY);
  bool idle;
  if (s->list == SL_EMPTY) { /* its last malloc was before the last sweep */
    idle = s->gc_sweep != h->nsweeps;
  } else { /* gc_holes reads the mark of every current span */
    uint32_t seen = s->gc_nmalloc;
    s->gc_nmalloc = (uint32_t)s->nmalloc;
    idle = (uint32_t)s->nmalloc == seen;
  }
  if (idle && s->npages >= HEAP_GC_MIN_PAGES) {
    heap_trim_arg_t arg = {h, purge};
    trim_one(s, &arg);
  }
}

/* `sweep`: an idle sweep, which counts a class's idle sweeps. Else a look
 * between two sweeps as the heap grows: a class idle since the last sweep
 * has its holes purged now if the next sweep would purge them, and so has
 * a class idle since the previous look that never took a purged span back
 * (holes_after 1). The looks come every HEAP_HOLES_GROW new spans, so a
 * program that frees most of its blocks and then allocates other sizes
 * finds its free pages within a few new spans, not after a sweep interval
 * (HEAP_GC_EVERY slow paths, which its new spans' mallocs take long to
 * reach): bench-frag's second phase (1-4 KiB blocks after 9 of 10 blocks
 * of 16 B-1 KiB were freed) peaked 8.4 MB above its first at one thread. */
static void gc_holes(heap_bin_t *b, const span_t *cur, bool sweep, os_batch_t *purge) {
  uint32_t seen = b->look_nmalloc;
  b->look_nmalloc = (uint32_t)cur->nmalloc;
  /* span_none reads as idle, and a class that changed current spans
   * since the last sweep as busy */
  if ((uint32_t)cur->nmalloc != cur->gc_nmalloc) {
    if (sweep) b->idle_sweeps = 0;
    if (sweep || seen != (uint32_t)cur->nmalloc || heap_holes_after(b) > 1) return;
  } else if (sweep && b->idle_sweeps < UINT16_MAX) {
    b->idle_sweeps++;
  }
  unsigned idle = b->idle_sweeps + !sweep, after = heap_holes_after(b);
  if (idle < after || (idle - after) % HEAP_HOLES_AGAIN) return;
  for (span_t *s = b->avail.head; s != NULL; s = s->next) span_purge_holes(s, false, purge);
}

/* The holes of every class go into one batch: bench-frag's second phase
 * found them a few pages at a time, 11.5k madvise calls a thread, and at
 * two threads each one's TLB flush interrupted the other core. */
static void heap_gc_holes(heap_t *h, bool sweep, os_batch_t *purge) {
  h->holes_countdown = HEAP_HOLES_GROW;
  HEAP_FOR_TOUCHED(h, c) gc_holes(&h->bins[c], h->cur[c], sweep, purge);
}

/* The current span's free tail (span_purge_tail): keeps free, for the
 * next mallocs, twice the slots its class had in use at the recent sweeps
 * (HEAP_TAIL_WINDOW) and an eighth of the span, and purges the free pages
 * past them. Once its mallocs may have passed those slots
 * (span_tail_intact) without any slot past them in use, the holes stay
 * and the count starts again, and every HEAP_TAIL_AGAIN such times they
 * are counted back in and purged again (pages a malloc touched and a free
 * emptied between two sweeps go back with them). When a slot past them
 * is in use, the class waits as a class whose holes came back
 * (heap_holes_after) before its tail is purged again. */
static void gc_tail(heap_bin_t *b, span_t *s, os_batch_t *purge) {
  if (s == &span_none || s->npages < 2) return;
  uint16_t live = (uint16_t)(s->used - 1); /* `used` has the phantom */
  if (live > b->tail_peak) b->tail_peak = live;
  if (++b->tail_sweeps == HEAP_TAIL_WINDOW) {
    b->tail_prev = b->tail_peak;
    b->tail_peak = live;
    b->tail_sweeps = 0;
  }
  if (s->nholes) {
    if (span_tail_intact(s)) return;
    if (!span_tail_reached(s)) {
      if (++b->tail_passes % HEAP_TAIL_AGAIN) {
        span_tail_renew(s);
        return;
      }
      span_forget_holes(s);
    } else {
      span_forget_holes(s);
      if (heap_holes_after(b) < HEAP_HOLES_AFTER_MAX)
        b->holes_after = (uint8_t)(2 * heap_holes_after(b));
      b->tail_wait = (uint8_t)heap_holes_after(b);
      return;
    }
  } else if (b->tail_wait) {
    b->tail_wait--;
    return;
  }
  uint32_t peak = b->tail_prev > b->tail_peak ? b->tail_prev : b->tail_peak;
  uint32_t keep = 2 * peak + s->nslots / 8u + 1;
  span_purge_tail(s, keep < s->nslots ? keep : s->nslots, purge);
}

/* A class's part of the sweep: its current span's tail, then the spans
 * gc_one may give back, the kept empty ones and the current one. The
 * available and full spans are not walked. They hand out no slot, so a
 * sweep only copied their nmalloc into gc_nmalloc, for the one question
 * asked of them once they are kept empty: any malloc since the previous
 * sweep? heap_cur_done answers it when a span stops being current (its
 * mallocs are over until it is current again): gc_sweep. bench-random
 * -t 1 -s 0.05 walked 194 spans of those lists a sweep besides 92 current
 * ones: 0.7% of its instructions (cgall.sh: random -0.68%, list -0.46%,
 * larson -t 1 -0.06%, the rest within 0.2%; peak RSS unchanged). */
static void gc_class(heap_t *h, unsigned c, os_batch_t *purge) {
  heap_bin_t *b = &h->bins[c];
  gc_tail(b, h->cur[c], purge);
  for (span_t *s = b->empty.head, *next; s != NULL; s = next) {
    next = s->next;
    gc_one(h, s, purge);
  }
  if (h->cur[c] != &span_none) gc_one(h, h->cur[c], purge);
}

static NALLOC_NOINLINE void heap_gc(heap_t *h) {
  os_batch_t purge;
  os_batch_init(&purge);
  h->gc_countdown = HEAP_GC_EVERY;
  heap_gc_holes(h, true, &purge); /* before gc_one moves gc_nmalloc on */
  HEAP_FOR_TOUCHED(h, c) gc_class(h, c, &purge);
  os_purge_flush(&purge);
  h->nsweeps++; /* wraps: a span then kept one sweep more at worst */
}

static void orphan_one(span_t *s, void *alone) { span_orphan(s, *(bool *)alone); }

/* The spans a flush gives back to the heap's arena, handed over under one
 * lock at the end. */
typedef struct give_back_s {
  heap_t *h;
  span_t *head, *tail; /* in the order visited: each class's current span
                          last, so that it is the first one adopted */
} give_back_t;

/* Every span goes onto its arena's abandoned lists, empty ones too: the
 * next thread of the arena takes them with their bitmaps as they are,
 * instead of the page heap carving new ones (a short-lived thread touches
 * many classes: bench-threads -t 1 -s 0.1 made 52,086 spans with
 * every empty one sent back to the page heap, 10,612 with them parked). */
static void give_back_one(span_t *s, void *vg) {
  give_back_t *g = vg;
  if (s->list == SL_CUR) heap_clear_cur(g->h, s);
  s->list = SL_NONE;
  span_collect(s);
  if (s->arena != g->h->arena->index) { /* adopted from another (fork child) */
    arena_abandon(arena_get(s->arena), s);
    return;
  }
  s->next = NULL;
  if (g->tail) g->tail->next = s;
  else g->head = s;
  g->tail = s;
}

/* Every span is orphaned before any is given back, and the queue is
 * emptied in between: no announcement can be in flight once the first
 * span leaves. */
static void heap_flush_as(heap_t *h, bool alone) {
  heap_enter(h);
  heap_each(h, orphan_one, &alone, false);
  atomic_store_explicit(&h->rqueue, NULL, memory_order_relaxed);
  give_back_t g = {h, NULL, NULL};
  heap_each(h, give_back_one, &g, true);
  if (g.head != NULL) arena_abandon_list(h->arena, g.head);
  sample_run_flush(h);
  heap_leave(h);
}

void heap_flush(heap_t *h) { heap_flush_as(h, false); }

void heap_move(heap_t *h, arena_t *to) {
  heap_flush(h);
  h->arena = to;
}

/* ---- fork ---------------------------------------------------------------- */

void heap_prefork(void) { nlock_prefork(&heaps_lock); }
void heap_postfork_parent(void) { nlock_postfork_parent(&heaps_lock); }

/* ---- the decay thread's look at idle heaps ----------------------------- */

/* Claims h for the decay thread (heap_enter's other side): false, and
 * nothing claimed, while its owner is in a slow path. */
static bool heap_claim(heap_t *h) {
  store_rlx(&h->sweeping, 1);
  atomic_signal_fence(memory_order_seq_cst); /* the system call is the fence */
  if (!os_fence_all()) { /* cannot happen once registered; give way */
    store_rlx(&h->sweeping, 0);
    return false;
  }
  if (atomic_load_explicit(&h->busy, memory_order_acquire) == 0) return true;
  atomic_store_explicit(&h->sweeping, 0, memory_order_release);
  return false;
}

static void heap_unclaim(heap_t *h) {
  atomic_store_explicit(&h->sweeping, 0, memory_order_release);
}

/* Class c of a claimed idle heap: the free pages of its available spans
 * and of its kept empty one. Not the current span, which the owner's fast
 * path takes slots of without entering the heap, nor full ones, whose
 * free slots (remote frees) only the owner may collect. */
static void idle_class(heap_t *h, unsigned c, os_batch_t *purge) {
  heap_bin_t *b = &h->bins[c];
  for (span_t *s = b->avail.head; s != NULL; s = s->next) span_purge_idle(s, purge);
  for (span_t *s = b->empty.head; s != NULL; s = s->next) span_purge_idle(s, purge);
}

/* A heap the decay thread finds with no slow path since its last look is
 * idle: its thread may be blocked, or busy with its own work, and call
 * nalloc again in a second or never. Its owner purges holes in its own
 * sweeps (heap_gc_holes), so without this an idle thread would keep every
 * free page of its spans (bench-idle: a thread that frees 90% of 500 MiB
 * at random and sleeps kept 277 MiB of them). A heap looked at stays idle
 * until its next slow path, and is looked at again every
 * HEAP_LOOK_AGAIN walks (its fast-path frees may have freed more pages).
 * `idle_seen`, `look_seen` and `look_walks` are the decay thread's own. */
#define HEAP_LOOK_AGAIN 8

void heap_idle_sweep(void) {
  for (heap_t *h = atomic_load_explicit(&heaps_all, memory_order_acquire); h != NULL;
       h = h->next_all) {
    uint32_t n = load_rlx(&h->nslow);
    bool idle = n == h->idle_seen;
    h->idle_seen = n;
    if (!idle || (n == h->look_seen && ++h->look_walks % HEAP_LOOK_AGAIN != 0)) continue;
    if (!heap_claim(h)) continue;
    /* a heap made anew, or one its owner came back to, is not idle */
    if (h->live && load_rlx(&h->nslow) == n) {
      os_batch_t purge; /* flushed while h is claimed */
      os_batch_init(&purge);
      HEAP_FOR_TOUCHED(h, c) idle_class(h, c, &purge);
      os_purge_flush(&purge);
      h->look_seen = n;
      h->look_walks = 0;
    }
    heap_unclaim(h);
  }
}

static bool heap_queued(heap_t *h, span_t *s) {
  for (span_t *q = atomic_load_explicit(&h->rqueue, memory_order_relaxed); q; q = q->rnext)
    if (q == s) return true;
  return false;
}

/* The forking thread's own heap, when fork did not interrupt one of its
 * slow paths (heap.busy clear): its lists are whole, but two things may be
 * half done.
 *
 * The fast paths (span_take, span_push) write a slot's bit and then the
 * span's `used` count, with no flag around them (they are the 27- and
 * 38-instruction paths): a fork from a signal handler between the two
 * leaves `used` one off. The bitmaps are the truth (a free slot has its bit
 * set in one of them, `used` counts the rest: remote frees not yet
 * collected, and the current span's phantom allocation), so the child
 * counts again. A slot an interrupted malloc took stays taken: that block
 * is never returned in the child, and leaks there. A move of a current
 * span's cursor to another word (heap_alloc_slow's, outside `busy` too)
 * may have stopped between the cursor and its word base: the child sets
 * both from the cursor again.
 *
 * A remote free of a thread that is gone (or of this thread, interrupted)
 * may have stopped between claiming a span (PUSHING) and storing QUEUED:
 * nothing will finish that. A span that made it onto the queue is marked
 * QUEUED, as the push would have (the drain expects it); one that did not
 * goes back to the available list itself. */
static void recount_one(span_t *s, void *unused) {
  (void)unused;
  span_set_cursor(s, (unsigned)(s->cursor - s->bits));
  s->used = s->nslots - span_count_free(s) + (s->list == SL_CUR);
}

static void repair_one(span_t *s, void *vh) {
  heap_t *h = vh;
  recount_one(s, NULL);
  if (atomic_load(&s->notify) != SN_PUSHING) return;
  if (heap_queued(h, s)) {
    atomic_store(&s->notify, SN_QUEUED);
    return;
  }
  atomic_store(&s->notify, SN_NONE);
  if (s->list == SL_FULL) {
    heap_take(h, s);
    heap_put(h, s, SL_AVAIL);
  }
}

void heap_postfork_child(heap_t *mine) {
  bool broken = nlock_postfork_child(&heaps_lock);
  if (mine != &heap_none && !mine->busy) heap_each(mine, repair_one, mine, false);
  if (broken) heaps_free = NULL; /* mid-update: what it held is lost */
  for (heap_t *h = load_rlx(&heaps_all); h != NULL; h = h->next_all) {
    /* the decay thread is gone, maybe in the middle of a look (the span it
     * looked at may count fewer holes than it has purged: stats only) */
    atomic_store_explicit(&h->sweeping, 0, memory_order_relaxed);
    if (h == mine || !h->live || h->lock != NULL) continue;
    h->live = 0;
    if (h->busy) continue; /* mid-update in a thread that is gone: dropped */
    /* that thread may have stopped inside a fast path too (any fork) */
    heap_each(h, recount_one, NULL, false);
    heap_flush_as(h, true);
    if (!broken) {
      h->next_free = heaps_free;
      heaps_free = h;
    }
  }
}
