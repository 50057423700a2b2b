/* sample.h -- the allocator's records of sampled blocks: for each block
 * the profiler sampled, the profiler's context (tctx) and the size that
 * was requested, kept beside the block's span, so that free can tell the
 * profiler exactly what malloc told it (prof_hook.h). */
#ifndef NALLOC_SAMPLE_H
#define NALLOC_SAMPLE_H

#include "types.h"

/* p (just allocated) was sampled: remember (tctx, size). False when no
 * metadata memory could be had (the sample is then not recorded).
 * `timed` (PROF_TIMED): keep the time of birth too, for the profiler's
 * lifetime histogram: in a large block's record, or for a small span in a
 * second half of its records array, one birth per slot (made on the
 * span's first timed sample, in sampled mode only: exact mode's spans keep
 * 8 bytes per slot). */
bool sample_record(span_t *s, void *p, void *tctx, size_t size, bool timed);
/* The same for slot i of small span s; inline while the span already has
 * its records (exact mode: every span but for its first sample). */
bool sample_record_first(span_t *s, uint32_t i, void *tctx, size_t size,
                         bool births);
bool sample_record_timed(span_t *s, uint32_t i, void *tctx, size_t size);
static inline bool sample_record_slot(span_t *s, uint32_t i, void *tctx, size_t size) {
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  if (unlikely(ps == NULL)) return sample_record_first(s, i, tctx, size, false);
  store_rlx((_Atomic(sample_slot_t) *)&ps[i], (uint64_t)size << SAMPLE_SIZE_SHIFT | (uintptr_t)tctx);
  return true;
}
/* If p was sampled, forgets it and tells the profiler it is gone. Called
 * by the freeing thread, before the slot is freed. */
void sample_release(span_t *s, void *p);
/* The same for slot i of small span s, which p starts. */
void sample_release_slot(span_t *s, uint32_t i, const void *p);
/* Whether p's record holds a sample. */
bool sample_taken(span_t *s, const void *p);

#endif
