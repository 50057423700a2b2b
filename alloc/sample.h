/* sample.h -- the allocator's records of sampled blocks: for each block
 * the profiler sampled, the profiler's context (tctx) and the size that
 * was requested, kept beside the block's span, so that free can tell the
 * profiler exactly what malloc told it (prof_hook.h). */
#ifndef NALLOC_SAMPLE_H
#define NALLOC_SAMPLE_H

#include "types.h"
#include "../prof/prof_hook.h"

/* p (just allocated) was sampled: remember (tctx, size). False when no
 * metadata memory could be had (the sample is then not recorded).
 * `timed` (PROF_TIMED): keep the time of birth too, for the profiler's
 * lifetime histogram: in a large block's record, or for a small span in a
 * second half of its records array, one birth per slot (made on the
 * span's first timed sample, in sampled mode only: exact mode's spans keep
 * 8 bytes per slot). */
bool sample_record(span_t *s, void *p, void *tctx, size_t size, bool timed);
/* Sampled small blocks of this size or more stay in their spans when the
 * profiler asks for a page run of their own (PROF_OWN_PAGE, sampled mode):
 * their span's records cost 16 bytes a slot of at least 4 KiB (0.4%, 256
 * bytes for a 64 KiB span), and its frees are fast again once no sample
 * in it is live (prof_live). Smaller blocks are sampled rarely (P ~ size
 * / 2^lg) and take a page run: their spans' records would cost up to a
 * byte a byte, and with a limit of 1 KiB the ~98 arrays that
 * bench-threads -t 1 -s 0.06 made (1-2 KiB blocks, spans of up to 64
 * slots) raised its peak RSS by ~100 KB (3,984-4,012 -> 4,092-4,104 KB);
 * bench-random ran the same instructions with 1, 2 or 4 KiB. */
#define SAMPLE_SPAN_MIN 4096
/* The same for slot i of small span s; inline while the span already has
 * its records (exact mode: every span but for its first sample). */
bool sample_record_first(span_t *s, uint32_t i, void *tctx, size_t size,
                         bool births);
bool sample_record_timed(span_t *s, uint32_t i, void *tctx, size_t size);
/* Bit 1 of a slot's record (tctxs are 64-byte aligned): the record is
 * counted in the span's prof_live (spans with births: sampled mode), so
 * that its release lowers it; owner_fast is tagged while any is live
 * (only the owner records in its spans, so only it writes here). */
#define SAMPLE_COUNTED ((sample_slot_t)2)
static inline sample_slot_t sample_live_add(span_t *s) {
  atomic_fetch_add_explicit(&s->prof_live, 1, memory_order_relaxed);
  struct heap_s *f = load_rlx(&s->owner_fast);
  if (f != NULL) store_rlx(&s->owner_fast, span_fast_tag(f));
  return SAMPLE_COUNTED;
}
static inline bool sample_record_slot(span_t *s, uint32_t i, void *tctx, size_t size) {
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  if (unlikely(ps == NULL)) return sample_record_first(s, i, tctx, size, false);
  sample_slot_t c = unlikely(load_rlx(&s->prof_births)) ? sample_live_add(s) : 0;
  store_rlx((_Atomic(sample_slot_t) *)&ps[i],
            (uint64_t)size << SAMPLE_SIZE_SHIFT | (uintptr_t)tctx | c);
  return true;
}
/* Bit 0 of a slot's record (tctxs are 64-byte aligned): the slot's birth
 * time is kept (sample_record_timed), so that a free looks for it without
 * reading the span's prof_births. */
#define SAMPLE_TIMED ((sample_slot_t)1)
static inline void *sample_tctx(sample_slot_t r) {
  return (void *)(uintptr_t)(r & (((uint64_t)1 << SAMPLE_SIZE_SHIFT) - 1) &
                             ~(SAMPLE_TIMED | SAMPLE_COUNTED));
}
static inline size_t sample_size(sample_slot_t r) {
  return (size_t)(r >> SAMPLE_SIZE_SHIFT);
}
/* The birth times of small span s's slots (s->prof_births). */
static inline sample_slot_t *sample_births(span_t *s) {
  return atomic_load_explicit(&s->prof, memory_order_acquire) + s->nslots;
}
/* The first half of a release: slot i's record v (not 0) in small span s
 * is cleared (and no longer counted in prof_live). Returns its birth (0:
 * untimed), for prof_sample_free, which the caller must call next
 * (before the slot is freed, unless the caller is the span's owner: only
 * it takes slots of its spans). */
static inline uint64_t sample_clear_rec(span_t *s, uint32_t i, sample_slot_t v) {
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  store_rlx((_Atomic(sample_slot_t) *)&ps[i], 0);
  uint64_t birth = 0;
  if (unlikely(v & SAMPLE_TIMED)) /* sampled mode only */
    birth = load_rlx((_Atomic(sample_slot_t) *)&ps[s->nslots + i]);
  if (v & SAMPLE_COUNTED) /* after the record is cleared: see span_unsampled */
    atomic_fetch_sub_explicit(&s->prof_live, 1, memory_order_release);
  return birth;
}
/* If p was sampled, forgets it and tells the profiler it is gone. Called
 * by the freeing thread, before the slot is freed. */
void sample_release(span_t *s, void *p);
/* The same for slot i of small span s, which p starts, when its record is
 * v (not 0). True when the record counted in s->prof_live. */
bool sample_release_rec(span_t *s, uint32_t i, const void *p, sample_slot_t v);
/* The same for slot i of small span s (s->prof not NULL), which p starts:
 * inline, as most frees in a span with samples are of other slots. A
 * record with neither bit (exact mode's every free) is cleared here and
 * goes to the profiler without sample_release_rec's call and frame (its
 * frame, the array loaded again and the bit tests were ~12 instructions
 * a free: CPython's test_json, exact, callgrind). */
static inline bool sample_release_slot(span_t *s, uint32_t i, const void *p) {
  _Atomic(sample_slot_t) *r =
      (_Atomic(sample_slot_t) *)&atomic_load_explicit(&s->prof, memory_order_acquire)[i];
  sample_slot_t v = load_rlx(r);
  if (likely(v == 0)) return false;
  if (unlikely(v & (SAMPLE_TIMED | SAMPLE_COUNTED))) return sample_release_rec(s, i, p, v);
  store_rlx(r, 0);
  prof_sample_free(sample_tctx(v), sample_size(v), p, 0);
  return false;
}
/* Whether p's record holds a sample. */
bool sample_taken(span_t *s, const void *p);

#endif
