/* entry.h -- the bodies of the public entry points, inlined into each
 * exported name (malloc in override.c, nalloc_malloc in api.c, operator
 * new in new.c) so that each records its own caller for the profiler and
 * the fast paths cost no extra call.
 *
 * Fast paths: a small malloc pops a slot off the thread's current span of
 * the class (span_pop); a small free of a block of one of the thread's own
 * spans pushes it back (span_push), which also tells a double free. No
 * lock, no atomic read-modify-write; with profiling off the only extra
 * work is the sample countdown, which never reaches zero. Everything else
 * (another thread's block, a dry span, a sampled block, a large block, a
 * pointer that is not ours) goes to the slow paths. */
#ifndef NALLOC_ENTRY_H
#define NALLOC_ENTRY_H

#include <errno.h>
#include <string.h>

#include "heap.h"
#include "pagemap.h"
#include "tsd.h"

#define NALLOC_CALLER() __builtin_return_address(0)

/* Larger requests cannot be had on a 47-bit address space: ENOMEM before
 * any arithmetic on them can overflow. */
#define MAX_REQUEST ((size_t)1 << 46)

/* Which call freed (for the message about a bad pointer). */
enum { FN_FREE, FN_DELETE, FN_REALLOC, FN_USABLE, FN_N };

/* `frame`: the public entry point's frame pointer (the profiler finds the
 * caller's stack from it), or NULL. `caller`: the return address into the
 * program, or NULL to read it from `frame`. */
void *malloc_slow(size_t size, size_t align, bool zero, const void *caller,
                  const void *frame);
/* The fast path's miss on a small `size` in a thread with a heap of its
 * own (so set up) when the countdown (cd, with this request) stays >= 0
 * (no sample): the current span of the class has no free slot in its
 * cursor's word, or there is none yet (or the class is above
 * tcache_max). The class is looked up again: keeping it cost the fast
 * path a register copy. */
void *malloc_dry(size_t size, int64_t cd, bool zero);
/* For realloc: `size` bytes as the program asked, in a block with room for
 * `room` (the profile sees `size`). */
void *malloc_room(size_t size, size_t room, const void *caller);
/* The same in a page run of its own (from the thread's arena) when
 * `room` is small: a grown block (realloc.c). */
void *malloc_grown(size_t size, size_t room, const void *caller);
void free_slow(void *p, int fn);
/* p starts slot `slot` of s (or s is not small), but not on the fast path
 * of h, the calling thread's heap. (The slot as the fast path has it:
 * narrowing it there cost a register copy.) */
void free_slot_slow(void *p, span_t *s, uintptr_t slot, int fn, heap_t *h);
/* The span of p, checked: p must start a live block (else the message
 * naming call `fn`, and abort). *slot: its slot index if small. */
span_t *span_checked(int fn, void *p, uint32_t *slot);
void *entry_realloc(void *p, size_t size, const void *caller);
void *entry_aligned(size_t align, size_t size, int kind, int *err, const void *caller);
size_t entry_usable_size(void *p);
int entry_trim(size_t pad);

enum { ALIGNED_POSIX, ALIGNED_C11, ALIGNED_MEMALIGN, ALIGNED_VALLOC, ALIGNED_PVALLOC };

/* The fast path of every allocating entry point: a slot of the thread's
 * current span of the class, or NULL. *dry: whether the request may go to
 * malloc_dry instead of malloc_slow (with countdown *dcd). */
static NALLOC_ALWAYS_INLINE void *entry_alloc_try(size_t size, bool zero, bool *dry,
                                                  int64_t *dcd) {
  tsd_t *tsd = tsd_get();
  *dry = false;
  if (likely(size <= SC_SMALL_MAX)) {
    int64_t cd = tsd->prof_countdown - (int64_t)size;
    unsigned cls = sc_index(size);
    heap_t *h = tsd->heap;
    span_t *s = h->cur[cls];
    uint64_t b = span_peek(s);
    if (likely(cd >= 0)) {
      if (likely(b != 0)) {
        tsd->prof_countdown = cd;
        void *p = span_take(s, b);
        if (zero) memset(p, 0, size);
        return p;
      }
      /* A thread with a heap of its own (heap_none until set up, while
       * exiting, with tcache:false) and no sample due: straight to the
       * heap's next slot, without malloc_slow's checks (~90 instructions
       * of each of larson -t 1's 61k dry spans). */
      if (h != &heap_none) {
        *dry = true;
        *dcd = cd;
      }
    }
  }
  return NULL;
}

/* The fast path alone, or NULL when it does not apply (then the caller
 * goes to malloc_slow with its frame, from which the profiler reads the
 * caller). */
static NALLOC_ALWAYS_INLINE void *entry_alloc_fast(size_t size, bool zero) {
  bool dry;
  int64_t cd;
  return entry_alloc_try(size, zero, &dry, &cd);
}

static NALLOC_ALWAYS_INLINE void *entry_alloc(size_t size, bool zero) {
  bool dry;
  int64_t cd = 0;
  void *p = entry_alloc_try(size, zero, &dry, &cd);
  if (likely(p != NULL)) return p;
  if (dry) return malloc_dry(size, cd, zero);
  return malloc_slow(size, 0, zero, NULL, __builtin_frame_address(0));
}

/* p starts slot i of s. If s is one of h's spans on the fast path
 * (owner_fast: on h's lists, nothing sampled in it), the push checks the
 * slot is in use and frees it; every other case (another thread's block,
 * a sampled, full or large span) is free_slot_slow's. */
static NALLOC_ALWAYS_INLINE void entry_free_slot(void *p, span_t *s, uintptr_t i, uintptr_t w,
                                                 int fn, heap_t *h) {
  if (likely(load_racy(&s->owner_fast) == h)) {
    /* no live sample in s (span_unsampled) */
    nalloc_assert(load_rlx(&s->prof) == NULL || load_rlx(&s->prof)[i] == 0);
    int r = span_push_at(s, i, w);
    if (likely(r == PUSH_OK)) return;
    if (r == PUSH_EMPTY) {
      heap_span_empty(h, s);
      return;
    }
  }
  free_slot_slow(p, s, i, fn, h);
}

/* p in s's pages: its slot if p starts one. */
static NALLOC_ALWAYS_INLINE void entry_free_in(void *p, span_t *s, int fn, heap_t *h) {
  bool ok;
  uintptr_t w;
  uintptr_t i = span_slot_word(s, p, &ok, &w);
  if (likely(ok)) entry_free_slot(p, s, i, w, fn, h);
  else free_slow(p, fn);
}

/* The guess, read again as a value the compiler cannot tie to the one it
 * compared with the map's answer (a volatile read is neither merged with
 * that one nor known to equal it): on the branch where they are equal it
 * would otherwise go on with the map's register. */
static NALLOC_ALWAYS_INLINE span_t *entry_guess_reload(tsd_t *tsd) {
  return *(span_t *volatile *)&tsd->free_span;
}

/* free: NULL, a pointer that is not ours, another thread's block, a
 * sampled or large one go to the slow paths (one unsigned compare keeps
 * both NULL and addresses past the page map out).
 *
 * The span guess (issue 11): when the page map's span is the one the
 * thread's malloc last took a fresh bitmap word from (tsd.free_span, set
 * by malloc_dry and alloc_small), the rest of the free reads the guess
 * again from the thread's block, so the slot's bitmap word follows from p
 * by a subtraction, a multiplication and a shift while the map's two
 * dependent loads only confirm the branch. A LIFO program's pair is one
 * dependency chain through p (the malloc pops the word the free just
 * wrote): bench-fastpath 2.2x faster. A miss costs the compare and
 * nothing else (no store: a guess that follows the frees costs a store a
 * miss, +0.8-1.8% instructions in list, larson, small, random). A stale
 * guess is harmless: it is used only when it equals the map's answer. */
static NALLOC_ALWAYS_INLINE void entry_free(void *p, int fn) {
  if (likely(pagemap_covers(p))) {
    tsd_t *tsd = tsd_get();
    span_t *s = pagemap_span(p);
    if (likely(s == tsd->free_span)) s = entry_guess_reload(tsd);
    entry_free_in(p, s, fn, tsd->heap);
    return;
  }
  free_slow(p, fn);
}

static NALLOC_ALWAYS_INLINE void *entry_calloc(size_t n, size_t size) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(n, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  return entry_alloc(total, true);
}

static NALLOC_ALWAYS_INLINE void *entry_reallocarray(void *p, size_t n, size_t size,
                                                     const void *caller) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(n, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  return entry_realloc(p, total, caller);
}

#endif
