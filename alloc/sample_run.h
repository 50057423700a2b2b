/* sample_run.h -- page runs of their own for sampled small blocks (the
 * profiler's PROF_OWN_PAGE, alloc.c's malloc_sampled), and each thread
 * heap's cache of such runs once freed, so that a sample does not pay for
 * the page heap (its lock, carving, page-map ends, decay, the clock) at
 * both ends. */
#ifndef NALLOC_SAMPLE_RUN_H
#define NALLOC_SAMPLE_RUN_H

#include "types.h"

/* A sampled request of `size` <= SC_SMALL_MAX bytes (alignment at most a
 * page) on a page run of its own: a run of the same length freed earlier
 * on this thread's heap, else a new large block. NULL (errno ENOMEM) when
 * none can be had. */
void *sample_run_alloc(tsd_t *tsd, size_t size, bool zero);
/* Large block s, a sampled run (s->sample_run) whose record is released,
 * is being freed by the calling thread: keeps it in the thread heap's
 * cache (kind SPAN_KEPT: a free or realloc of it is a bad pointer). False
 * when the cache has no room for it: the caller frees it as usual. */
bool sample_run_keep(span_t *s);
/* Gives h's cached runs back to their page heaps (heap_flush). */
void sample_run_flush(heap_t *h);

#endif
