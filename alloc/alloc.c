/* alloc.c -- allocation beyond the fast path: setting the thread up, the
 * profiler's sample hand-off, a dry span, no heap of one's own, aligned
 * requests, large blocks. */
#include <errno.h>
#include <string.h>

#include "arena.h"
#include "background.h"
#include "entry.h"
#include "heap.h"
#include "large.h"
#include "sample.h"
#include "sample_run.h"
#include "../prof/prof_hook.h"


/* A small block of class cls: from the thread's heap, or, for a thread
 * without one (tcache:false, exiting, not set up) or a class above
 * tcache_max, from its arena's shared heap. */
static void *alloc_small(tsd_t *tsd, unsigned cls) {
  heap_t *h = tsd->heap;
  if (h != &heap_none && sc_size(cls) <= opt_tcache_max) {
    void *p = span_pop(h->cur[cls]);
    if (p != NULL) return p;
    p = heap_alloc_slow(h, cls);
    tsd->free_span = h->cur[cls]; /* free's guess (entry_free) */
    background_poll(); /* new spans may have asked for the decay thread */
    return p;
  }
  arena_t *a = arena_get(tsd->state == TSD_NOMINAL ? tsd->arena : 0);
  return a != NULL ? arena_shared_alloc(a, cls) : NULL;
}

void *malloc_dry(size_t size, int64_t cd, bool zero) {
  tsd_t *tsd = tsd_get();
  unsigned cls = sc_index(size);
  nalloc_assert(tsd->state == TSD_NOMINAL && tsd->heap != &heap_none);
  tsd->prof_countdown = cd;
  void *p;
  if (likely(sc_size(cls) <= opt_tcache_max)) {
    p = heap_alloc_slow(tsd->heap, cls);
    /* free's guess (entry_free): the span the next slots come from, which
     * a LIFO program frees them back into */
    tsd->free_span = tsd->heap->cur[cls];
    background_poll(); /* new spans may have asked for the decay thread */
  } else {
    p = alloc_small(tsd, cls); /* the arena's shared heap */
  }
  if (unlikely(p == NULL)) {
    errno = ENOMEM;
    return NULL;
  }
  if (zero) memset(p, 0, size);
  return p;
}

/* Where a small request goes besides a slot (`own_page`). */
enum { OWN_NONE, OWN_SAMPLE, OWN_GROWN };

/* Everything but a small block the current span has: a dry span, no
 * heap, alignment, a page run of its own, a large block. */
static NALLOC_NOINLINE void *alloc_other(tsd_t *tsd, size_t size, size_t align,
                                         bool zero, unsigned own_page) {
  if (unlikely(size > MAX_REQUEST || align > MAX_REQUEST)) {
    errno = ENOMEM;
    return NULL;
  }
  size_t csize = size;
  if (align > 16 && align <= PAGE) csize = size < align ? align : size;
  if (csize <= SC_SMALL_MAX && align <= PAGE && !own_page) {
    unsigned cls = sc_index(csize);
    if (align > 16)
      while (sc_size(cls) % align) cls++; /* powers of two are classes */
    void *p = alloc_small(tsd, cls);
    if (unlikely(p == NULL)) {
      errno = ENOMEM;
      return NULL;
    }
    if (zero) memset(p, 0, size);
    return p;
  }
  if (own_page == OWN_SAMPLE && size <= SC_SMALL_MAX && align <= PAGE)
    return sample_run_alloc(tsd, size, zero);
  arena_t *a = arena_get(tsd->state == TSD_NOMINAL ? tsd->arena : 0);
  if (a == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  if (tsd->heap != &heap_none) heap_tick(tsd->heap);
  /* a grown block: pages of the thread's arena, where the spans it grew
   * out of give theirs back */
  if (own_page == OWN_GROWN && size <= SC_SMALL_MAX && align <= PAGE)
    return large_alloc_in(a, size, 0, zero);
  return large_alloc(a, size ? size : 1, align, zero);
}

/* `own_page`: serve a small request from a page run of its own, as the
 * profiler asks for sampled blocks (OWN_SAMPLE: see malloc_sampled) and
 * realloc for grown blocks (OWN_GROWN: see realloc.c). A small block is
 * inline: the current span's, else the heap's next span's (a dry cursor
 * word, the common slow case, costs no more than that). */
static inline void *alloc_core(tsd_t *tsd, size_t size, size_t align,
                               bool zero, unsigned own_page) {
  if (likely(size <= SC_SMALL_MAX && align <= 16 && !own_page)) {
    unsigned cls = sc_index(size);
    void *p = span_pop(tsd->heap->cur[cls]);
    if (unlikely(p == NULL) && unlikely((p = alloc_small(tsd, cls)) == NULL)) {
      errno = ENOMEM;
      return NULL;
    }
    if (zero) memset(p, 0, size);
    return p;
  }
  return alloc_other(tsd, size, align, zero, own_page);
}

/* A request the profiler samples (the countdown went below zero). When
 * the profiler says samples are rare (PROF_OWN_PAGE), a sampled block
 * under SAMPLE_SPAN_MIN gets a page run of its own, as in jemalloc, so
 * that spans of small classes, where samples are rarest, keep no records;
 * larger ones stay in their spans, whose frees are fast again once no
 * sample in them is live (sample.h: on bench-random, 570 instructions a
 * sample of page-heap work and +14% peak RSS, against ~380 of slower
 * frees). Denser sampling, and exact mode, keep every sampled block in
 * its span (sample.c).
 * Kept out of malloc_slow, so that a dry span does not pay for this
 * path's registers. */
/* Six arguments (zero and own_page in `flags`: MS_ZERO | own_page <<
 * MS_OWN_SHIFT; the thread's block found again), all in registers, so
 * that malloc_charged's call is a jump and malloc_slow, exact mode's way
 * to here on every allocation, builds no stack frame for it: with eight
 * (two on the stack) its frame and five saved registers cost ~20
 * instructions an allocation (CPython's test_json, exact, callgrind:
 * prof/README.md). */
enum { MS_ZERO = 1, MS_OWN_SHIFT = 1 };
static NALLOC_NOINLINE void *malloc_sampled(size_t charge, size_t size,
                                            size_t align, unsigned flags,
                                            const void *caller,
                                            const void *frame) {
  tsd_t *tsd = tsd_get();
  bool zero = flags & MS_ZERO;
  unsigned own_page = flags >> MS_OWN_SHIFT;
  void *tctx = NULL;
  unsigned how = 0;
  if (tsd->reentrant == 0 && tsd->state == TSD_NOMINAL)
    tctx = prof_sample(tsd, charge, caller,
                       frame ? frame : __builtin_frame_address(0), &how);
  /* a block of SAMPLE_SPAN_MIN or more stays in its span: see sample.h */
  if (own_page == OWN_NONE && (how & PROF_OWN_PAGE) && size < SAMPLE_SPAN_MIN)
    own_page = OWN_SAMPLE;
  if (tctx != NULL && !own_page && size <= SC_SMALL_MAX && align <= 16) {
    /* exact mode's common case: the slot's index is known, no lookup */
    span_t *s = tsd->heap->cur[sc_index(size)];
    uint64_t b = span_peek(s);
    if (likely(b != 0)) {
      uint32_t i = (uint32_t)(s->cursor - s->bits) * 64 + (uint32_t)ctz64(b);
      void *p = span_take(s, b);
      if (zero) memset(p, 0, size);
      if (unlikely(!(how & PROF_TIMED
                         ? sample_record_timed(s, i, tctx, charge)
                         : sample_record_slot(s, i, tctx, charge))))
        prof_sample_cancel(tsd, tctx, charge);
      tsd->prof_last = p;
      return p;
    }
  }
  void *p = alloc_core(tsd, size, align, zero, own_page);
  if (unlikely(tctx != NULL)) {
    if (p == NULL ||
        !sample_record(pagemap_get(p), p, tctx, charge, how & PROF_TIMED))
      prof_sample_cancel(tsd, tctx, charge);
  }
  tsd->prof_last = p;
  return p;
}

/* malloc_charged's way when no sample is taken (or the thread is not set
 * up): the countdown charged, then the allocation. */
static NALLOC_NOINLINE void *malloc_unsampled(size_t charge, size_t size, size_t align,
                                              unsigned flags, const void *caller,
                                              const void *frame) {
  tsd_t *tsd = tsd_get();
  if (unlikely(tsd->state != TSD_NOMINAL)) tsd_boot(tsd);
  tsd->prof_countdown -= charge > ((size_t)1 << 62) ? (int64_t)1 << 62 : (int64_t)charge;
  if (unlikely(tsd->prof_countdown < 0)) {
    if (opt_prof) return malloc_sampled(charge, size, align, flags, caller, frame);
    tsd->prof_countdown = INT64_MAX;
  }
  return alloc_core(tsd, size, align, flags & MS_ZERO, flags >> MS_OWN_SHIFT);
}

/* `size` bytes, of which the program asked for `charge`: the sample
 * countdown and the profile see `charge`. A sample (exact mode: every
 * request) is a jump to malloc_sampled before anything else, so that
 * malloc_slow saves no registers for it; the rest is malloc_unsampled's. */
static NALLOC_ALWAYS_INLINE void *malloc_charged(size_t charge, size_t size,
                                                 size_t align, bool zero,
                                                 unsigned own_page,
                                                 const void *caller,
                                                 const void *frame) {
  tsd_t *tsd = tsd_get();
  if (caller == NULL) caller = ((void *const *)frame)[1]; /* its return address */
  unsigned flags = (zero ? MS_ZERO : 0) | own_page << MS_OWN_SHIFT;
  if (likely(tsd->state == TSD_NOMINAL) && opt_prof) {
    int64_t cd = tsd->prof_countdown -
                 (charge > ((size_t)1 << 62) ? (int64_t)1 << 62 : (int64_t)charge);
    if (cd < 0) {
      tsd->prof_countdown = cd;
      return malloc_sampled(charge, size, align, flags, caller, frame);
    }
  }
  return malloc_unsampled(charge, size, align, flags, caller, frame);
}

void *malloc_slow(size_t size, size_t align, bool zero, const void *caller,
                  const void *frame) {
  return malloc_charged(size, size, align, zero, OWN_NONE, caller, frame);
}

void *malloc_room(size_t size, size_t room, const void *caller) {
  return malloc_charged(size, room > size ? room : size, 0, false, OWN_NONE, caller, NULL);
}

void *malloc_grown(size_t size, size_t room, const void *caller) {
  return malloc_charged(size, room > size ? room : size, 0, false, OWN_GROWN, caller, NULL);
}

static bool pow2(size_t x) { return x && (x & (x - 1)) == 0; }

/* posix_memalign, aligned_alloc, memalign, valloc, pvalloc: the checks
 * differ as glibc's do; the allocation is one path. */
void *entry_aligned(size_t align, size_t size, int kind, int *err, const void *caller) {
  *err = 0;
  switch (kind) {
  case ALIGNED_POSIX:
    if (!pow2(align) || align % sizeof(void *)) {
      *err = EINVAL;
      return NULL;
    }
    break;
  case ALIGNED_C11:
    if (!pow2(align)) {
      *err = EINVAL;
      return NULL;
    }
    break;
  case ALIGNED_MEMALIGN:
    if (align > SIZE_MAX / 2 + 1) {
      *err = EINVAL;
      return NULL;
    }
    if (!pow2(align)) align = align ? (size_t)1 << (64 - __builtin_clzl(align)) : 1;
    break;
  case ALIGNED_VALLOC:
    align = PAGE;
    break;
  case ALIGNED_PVALLOC:
    align = PAGE;
    if (size > SIZE_MAX - PAGE) {
      *err = ENOMEM;
      return NULL;
    }
    size = size ? ALIGN_UP(size, PAGE) : PAGE;
    break;
  }
  void *p = align <= 16 ? entry_alloc_fast(size, false) : NULL;
  if (p == NULL) p = malloc_slow(size, align, false, caller, NULL);
  if (p == NULL) *err = ENOMEM;
  return p;
}

int entry_trim(size_t pad) {
  (void)pad;
  tsd_flush();
  size_t purged = 0;
  FOR_EACH_ARENA(a) purged += arena_purge(a, true);
  return purged > 0;
}
