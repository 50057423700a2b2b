/* span.h -- a span: a run of pages owned by one arena.
 *
 * A span is either a free run in its arena's page heap, a small span carved
 * into equal slots of one size class, or a large allocation. Its metadata
 * lives here, outside the user's memory: the free-slot bitmap and, when the
 * profiler sampled an object in the span, the (tctx, requested size) of each
 * sampled slot. */
#ifndef NALLOC_SPAN_H
#define NALLOC_SPAN_H

#include "size_class.h"

enum { SPAN_FREE = 1, SPAN_SMALL = 2, SPAN_LARGE = 3 };

/* A small span's record of one sampled slot, in 8 bytes: the requested
 * size charged (at most SC_SMALL_MAX: 17 bits) above the profiler's tctx
 * pointer (user addresses have 47 bits, as the page map assumes). 0: the
 * slot was not sampled. Half of a pointer and a size: in exact mode every
 * slot of a span has one. */
typedef uint64_t prof_slot_t;
#define PROF_SLOT_SHIFT 47

static inline prof_slot_t prof_slot_pack(void *tctx, size_t size) {
  return (uint64_t)size << PROF_SLOT_SHIFT | (uintptr_t)tctx;
}
static inline void *prof_slot_tctx(prof_slot_t r) {
  return (void *)(uintptr_t)(r & (((uint64_t)1 << PROF_SLOT_SHIFT) - 1));
}
static inline size_t prof_slot_size(prof_slot_t r) {
  return (size_t)(r >> PROF_SLOT_SHIFT);
}

typedef struct span_s {
  uintptr_t start;
  size_t npages;
  uint8_t kind;
  uint8_t cls;    /* SPAN_SMALL */
  uint8_t dirty;  /* SPAN_FREE: pages may still be resident */
  uint8_t zeroed; /* the pages read as zero (fresh or purged) */
  _Atomic uint8_t free_fast; /* small and nothing in it sampled: free may use the
                        thread cache without looking further */
  uint16_t arena;
  uint32_t nfree;  /* SPAN_SMALL: free slots (slots in thread caches are not free) */
  uint32_t slot_size; /* SPAN_SMALL: copies of sc_info[cls], so that free's */
  uint64_t div_mul;   /* pointer check needs only this cache line */
  struct span_s *next, *prev; /* bin partial list or heap run list */
  uintptr_t chunk_lo, chunk_hi; /* the OS mapping the span lies in: runs are
                                   merged only inside it, so coalescing never
                                   looks at another arena's spans */
  uint64_t dirty_since;       /* SPAN_FREE: when it became dirty */
  size_t usize;               /* SPAN_LARGE: usable bytes */
  /* Profiling. SPAN_SMALL: prof_slot_t[nslots], NULL while nothing in
   * the span was sampled. SPAN_LARGE: the block's tctx (NULL: not
   * sampled) and requested size. */
  _Atomic(prof_slot_t *) prof;
  void *large_tctx;
  size_t large_size;
  uint64_t bitmap[SC_MAX_SLOTS / 64]; /* SPAN_SMALL: 1 = slot free */
} span_t;

static inline uintptr_t span_end(const span_t *s) {
  return s->start + s->npages * PAGE;
}

/* Index of the slot at p in a small span (p - start, divided by the slot
 * size with the span's own multiplier). */
static inline uint32_t span_slot_index(const span_t *s, const void *p) {
  return (uint32_t)((((uintptr_t)p - s->start) * s->div_mul) >> SC_DIV_SHIFT);
}

/* True if p is the start of a slot of small span s (a cheap multiply: see
 * sc_slot_of). The page map only leads to s from addresses inside its
 * pages, so the offset is below 2^18. */
static inline bool span_slot_ok(const span_t *s, const void *p) {
  uintptr_t off = (uintptr_t)p - s->start;
  return ((off * s->div_mul) >> SC_DIV_SHIFT) * s->slot_size == off;
}

#endif
