/* sample.h -- the allocator's records of sampled blocks: for each block
 * the profiler sampled, the profiler's context (tctx) and the size that
 * was requested, kept beside the block's span, so that free can tell the
 * profiler exactly what malloc told it (prof_hook.h). */
#ifndef NALLOC_SAMPLE_H
#define NALLOC_SAMPLE_H

#include "types.h"

/* p (just allocated) was sampled: remember (tctx, size). False when no
 * metadata memory could be had (the sample is then not recorded). */
bool sample_record(span_t *s, void *p, void *tctx, size_t size);
/* If p was sampled, forgets it and tells the profiler it is gone. Called
 * by the freeing thread, before the slot is freed. */
void sample_release(span_t *s, void *p);
/* Whether p's record holds a sample. */
bool sample_taken(span_t *s, const void *p);

#endif
