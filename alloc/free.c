/* free.c -- free beyond the fast path, and the checks that stop a bad
 * pointer before it can reach a span: a pointer that is not a block
 * nalloc handed out, or a block already freed, aborts with a message
 * naming the call and the pointer. */
#include "entry.h"
#include "lock.h"
#include "large.h"
#include "log.h"
#include "sample.h"
#include "sample_run.h"
#include "../prof/prof_hook.h"

static const char *const fn_names[FN_N] = {"free", "operator delete", "realloc",
                                           "malloc_usable_size"};

static NALLOC_COLD _Noreturn void bad_pointer(int fn, const void *p) {
  nalloc_fatal("%s(%p): invalid pointer: not a block nalloc returned, or already "
               "freed", fn_names[fn], p);
}

static NALLOC_COLD _Noreturn void double_free(int fn, const void *p) {
  nalloc_fatal("%s(%p): double free (the block is already free)", fn_names[fn], p);
}

span_t *span_checked(int fn, void *p, uint32_t *slot) {
  span_t *s = pagemap_get(p);
  if (s == NULL || (uintptr_t)p < s->start || (uintptr_t)p >= span_end(s))
    bad_pointer(fn, p);
  if (s->kind == SPAN_SMALL) {
    bool ok;
    *slot = span_slot(s, p, &ok);
    if (!ok) bad_pointer(fn, p);
    if (!span_slot_live(s, *slot)) double_free(fn, p);
  } else if (s->kind != SPAN_LARGE || (uintptr_t)p != s->start) {
    bad_pointer(fn, p);
  }
  return s;
}

/* A small block: into the thread's own span; under the lock of a shared
 * heap's span (shared heaps never see remote frees, so an idle one gives
 * its empty spans back at once); or through the remote bitmap. A shared
 * heap never gives a span away while it holds a live block, so the owner
 * read before the lock is still the owner under it. */
static bool free_small(span_t *s, uint32_t i) {
  heap_t *me = tsd_get()->heap;
  heap_t *owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  if (owner == me && me != &heap_none) return heap_free_owned(me, s, i);
  if (owner == NULL || owner->lock == NULL) return span_push_remote(s, i);
  if (owner->arena->broken) return true; /* fork child: the shared heap may be
                                            mid-update; the block leaks */
  nlock_lock(owner->lock);
  bool ok = heap_free_owned(owner, s, i);
  nlock_unlock(owner->lock);
  return ok;
}

void free_slow(void *p, int fn) {
  if (p == NULL) return;
  uint32_t i = 0;
  span_t *s = span_checked(fn, p, &i);
  sample_release(s, p);
  if (s->kind == SPAN_LARGE) {
    if (!s->sample_run || !sample_run_keep(s)) large_free(s);
    return;
  }
  if (!free_small(s, i)) double_free(fn, p);
}

/* The owner h frees slot i of its span s, which is on its lists and not
 * full (the push's double-free check, and an emptied span to the heap). */
static inline void free_push_own(void *p, span_t *s, uint32_t i, int fn, heap_t *h) {
  int r = span_push(s, i);
  if (likely(r == PUSH_OK)) return;
  if (r != PUSH_EMPTY) double_free(fn, p);
  heap_span_empty(h, s);
}

/* span_push's answer other than PUSH_OK for the owner h. */
static NALLOC_NOINLINE void free_push_rest(void *p, span_t *s, int r, int fn,
                                           heap_t *h) {
  if (r != PUSH_EMPTY) double_free(fn, p);
  heap_span_empty(h, s);
}

/* The owner's push of slot i with no profiler record to hear of it;
 * the rare rest (an emptied span, a double free) out of line, so that
 * the caller needs no stack frame. */
static inline void free_push_tail(void *p, span_t *s, uint32_t i, int fn, heap_t *h) {
  int r = span_push(s, i);
  if (likely(r == PUSH_OK)) return;
  free_push_rest(p, s, r, fn, h);
}

/* free_tagged_sample's push, when the span emptied (the sample was its
 * last block) or a double free: the profiler hears of the sample first.
 * Six arguments (the owner is the calling thread's heap), all in
 * registers, so that the caller's call is a jump. */
static NALLOC_NOINLINE void free_sample_rest(void *p, span_t *s, int r, int fn,
                                             sample_slot_t v, uint64_t birth) {
  prof_sample_free(sample_tctx(v), sample_size(v), p, birth);
  free_push_rest(p, s, r, fn, tsd_get()->heap);
}

/* The owner's push of slot i whose record v (born at `birth`) is already
 * cleared, then the profiler hears of the record, last, in a tail call
 * (only the owner takes slots of s, so the slot cannot be handed out
 * meanwhile). */
static inline void free_push_sample(void *p, span_t *s, uint32_t i, int fn,
                                    sample_slot_t v, uint64_t birth) {
  int r = span_push(s, i);
  if (likely(r == PUSH_OK)) {
    prof_sample_free(sample_tctx(v), sample_size(v), p, birth);
    return;
  }
  free_sample_rest(p, s, r, fn, v, birth);
}

/* The owner h frees the sample in slot i of its span s, tagged (s is on
 * h's lists and not full): the record goes, the slot is pushed, and the
 * profiler hears of it last, in a tail call (only h takes slots of s, so
 * the slot cannot be handed out meanwhile): no stack frame on the way. */
static inline void free_tagged_sample(void *p, span_t *s, uint32_t i,
                                      int fn, heap_t *h, sample_slot_t v) {
  uint64_t birth = sample_clear_rec(s, i, v);
  if (atomic_load_explicit(&s->prof_live, memory_order_acquire) == 0)
    store_rlx(&s->owner_fast, h);
  free_push_sample(p, s, i, fn, v, birth);
}

/* free_slot_prof's case of an owner's span with samples when owner_fast
 * is h tagged: s is on h's lists and not full, without reading those
 * conditions from the span. No stack frame (the rest is tail calls):
 * bench-random at the default rate sends ~8 frees a sample here. */
static inline void free_slot_tagged(void *p, span_t *s, uint32_t i,
                                    int fn, heap_t *h) {
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_relaxed);
  nalloc_assert(ps != NULL && s->kind == SPAN_SMALL && load_rlx(&s->prof_births));
  sample_slot_t v = load_rlx((_Atomic(sample_slot_t) *)&ps[i]);
  if (unlikely(v != 0)) { /* the sample */
    free_tagged_sample(p, s, i, fn, h, v);
    return;
  }
  /* as in free_slot_prof: once its last live sample is gone (freed by
   * another thread), the span's frees are fast again */
  if (atomic_load_explicit(&s->prof_live, memory_order_acquire) == 0)
    store_rlx(&s->owner_fast, h);
  free_push_tail(p, s, i, fn, h);
}

/* h's own span on its full list, no live sample in it (owner_fast is
 * span_full_tag(h), never for heap_none): back to the available list. */
static NALLOC_NOINLINE void free_full_own(void *p, span_t *s, uint32_t i, int fn,
                                          heap_t *h) {
  nalloc_assert(s->list == SL_FULL && load_rlx(&s->owner) == h);
  nalloc_assert(load_rlx(&s->prof) == NULL || load_rlx(&s->prof)[i] == 0);
  if (unlikely(!heap_free_full(h, s, i))) double_free(fn, p);
}

/* h's own span on its full list that may hold a live sample
 * (span_full_live_tag, sampled mode): slot i's record, if any, goes first
 * (the profiler hears of it before the slot can be handed out again),
 * then the span back to the available list as in free_full_own. Through
 * heap_free_owned (heap_take, heap_put), this was ~185 instructions a
 * free, ~1.2 frees a sample on bench-random at the default rate. */
static NALLOC_NOINLINE void free_full_sampled(void *p, span_t *s, uint32_t i, int fn,
                                              heap_t *h) {
  nalloc_assert(s->list == SL_FULL && load_rlx(&s->owner) == h);
  sample_release_slot(s, i, p);
  if (unlikely(!heap_free_full_live(h, s, i))) double_free(fn, p);
}

/* free_slot_prof_exact's other cases: sampled mode's spans of other
 * threads or on a list other than the owner's available one, exact
 * mode's full spans and other threads' blocks. */
static NALLOC_NOINLINE void free_slot_prof_rest(void *p, span_t *s, uint32_t i,
                                                int fn, heap_t *h) {
  heap_t *owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  sample_release_slot(s, i, p);
  if (owner == h && h != &heap_none) {
    if (s->list != SL_FULL) {
      /* sampled mode: once its last live sample is gone (freed here or by
       * another thread), the span's frees are fast again (only its owner
       * samples in it: span_unsampled) */
      if (unlikely(load_rlx(&s->prof_births)) && h->lock == NULL &&
          atomic_load_explicit(&s->prof_live, memory_order_acquire) == 0)
        store_rlx(&s->owner_fast, h);
      free_push_own(p, s, i, fn, h);
      return;
    }
    /* full (exact mode: sampled mode's full spans are tagged, and
     * free_slot_prof took them): free_small's way without its second
     * look at the owner */
    if (unlikely(!heap_free_owned(h, s, i))) double_free(fn, p);
    return;
  }
  if (owner == NULL || owner->lock == NULL) {
    if (unlikely(!span_push_remote(s, i))) double_free(fn, p);
    return;
  }
  if (!free_small(s, i)) double_free(fn, p);
}

/* free_slot_slow's case of a span with records (s->prof), not the
 * owner's tagged one. Exact mode's common case, the owner's own span on
 * its available list (its records have neither bit: no births in exact
 * mode's spans), runs with no stack frame, as free_tagged_sample does:
 * the record is cleared, the slot pushed, and the profiler hears of the
 * record last, in a tail call (only h takes slots of s, so the slot
 * cannot be handed out meanwhile). Through free_slot_prof_rest's frame
 * (the record's release a call in the middle) it cost ~22 instructions
 * more a free: CPython's test_json, exact, callgrind (prof/README.md). */
static NALLOC_NOINLINE void free_slot_prof_exact(void *p, span_t *s, uint32_t i,
                                                 int fn, heap_t *h) {
  if (likely(atomic_load_explicit(&s->owner, memory_order_acquire) == h &&
             h != &heap_none && s->list != SL_FULL &&
             !load_rlx(&s->prof_births))) {
    _Atomic(sample_slot_t) *r = (_Atomic(sample_slot_t) *)&atomic_load_explicit(
        &s->prof, memory_order_acquire)[i];
    sample_slot_t v = load_rlx(r);
    if (likely(!(v & (SAMPLE_TIMED | SAMPLE_COUNTED)))) {
      if (v != 0) {
        store_rlx(r, 0);
        free_push_sample(p, s, i, fn, v, 0);
      } else {
        free_push_tail(p, s, i, fn, h);
      }
      return;
    }
  }
  free_slot_prof_rest(p, s, i, fn, h);
}

/* A span with records. No stack frame in the owner's tagged case
 * (sampled mode's common one): its rest is tail calls. */
static inline void free_slot_prof(void *p, span_t *s, uint32_t i,
                                           int fn, heap_t *h) {
  /* h's tags (bits 0-1) by one xor: the full spans' two in one test, so
   * that exact mode (owner_fast NULL) pays two compares, as for one */
  uintptr_t tag = (uintptr_t)load_racy(&s->owner_fast) ^ (uintptr_t)h;
  if (likely(tag == 1)) { /* span_fast_tag */
    free_slot_tagged(p, s, i, fn, h);
    return;
  }
  if (tag - 2 <= 1) {
    /* h's own full span, its last live sample gone (span_full_tag): no
     * record to look for (sampled mode: ~0.6 frees a sample on
     * bench-random); or still holding one (span_full_live_tag) */
    if (tag == 2) free_full_own(p, s, i, fn, h);
    else free_full_sampled(p, s, i, fn, h);
    return;
  }
  free_slot_prof_exact(p, s, i, fn, h);
}

/* free_slot_plain's case of a span of h's own or of a shared heap. */
static NALLOC_NOINLINE void free_slot_plain_rest(void *p, span_t *s, uint32_t i,
                                                 int fn, heap_t *h) {
  /* h's own span on its full list, nothing sampled in it (owner_fast is
   * never tagged for heap_none): back to the available list. larson -t 1
   * frees into a full span of its own once in 28 frees. Tested after the
   * remote case, which it would cost 3 instructions (prodcons -t 2 +1%). */
  if (load_racy(&s->owner_fast) == span_full_tag(h)) {
    nalloc_assert(s->list == SL_FULL && load_rlx(&s->owner) == h);
    if (unlikely(!heap_free_full(h, s, i))) double_free(fn, p);
    return;
  }
  if (!free_small(s, i)) double_free(fn, p);
}

/* free_slot_slow's case of a span without records: another thread's
 * block, or a span of h's own that is full. The remote case, the common
 * one, runs with no stack frame (the others are a tail call away): with
 * span_push_remote a call from here, each remote free paid a call, a
 * frame and a return (issue 11). */
static NALLOC_NOINLINE void free_slot_plain(void *p, span_t *s, uint32_t i, int fn,
                                            heap_t *h) {
  heap_t *owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  /* another thread's block: straight to its remote bitmap (a shared
   * heap's spans and h's own full spans take free_small's way) */
  if (likely(owner != h && (owner == NULL || owner->lock == NULL))) {
    if (unlikely(!span_push_remote(s, i))) double_free(fn, p);
    return;
  }
  free_slot_plain_rest(p, s, i, fn, h);
}

/* entry_free found p at the start of slot i of s, but s is not one of
 * h's spans on the fast path: another thread's block (the common case),
 * or a span of h's own that is full or holds sampled slots. The
 * double-free check is the push's.
 *
 * Only tail calls, so no stack frame: the cases are out of line. When it
 * built a frame for all of them (six registers saved), a free in a span
 * with records paid ~19 instructions for it: in sampled mode the owner's
 * frees of the other slots of a span with a live sample
 * (free_slot_tagged), ~8 a sample on bench-random at the default rate
 * (its spans of 4-64 KiB blocks have few slots, and a sample keeps the
 * others off the fast path while it lives). */
void free_slot_slow(void *p, span_t *s, uintptr_t slot, int fn, heap_t *h) {
  uint32_t i = (uint32_t)slot;
  if (unlikely(s->kind != SPAN_SMALL)) {
    free_slow(p, fn);
    return;
  }
  /* tested here, so that the frees of spans without records (the frees
   * of full spans, remote frees) do not pay for it */
  if (unlikely(atomic_load_explicit(&s->prof, memory_order_relaxed) != NULL)) {
    free_slot_prof(p, s, i, fn, h);
    return;
  }
  free_slot_plain(p, s, i, fn, h);
}

size_t entry_usable_size(void *p) {
  if (p == NULL) return 0;
  uint32_t i;
  span_t *s = span_checked(FN_USABLE, p, &i);
  return s->kind == SPAN_SMALL ? s->slot_size : s->usize;
}
