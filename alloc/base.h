/* base.h -- the metadata allocator: zeroed, 16-byte aligned memory for
 * nalloc's own structures (span records, heaps, arenas, profiler tables),
 * beside the user heap and never inside it. Never calls malloc; safe from
 * anywhere. */
#ifndef NALLOC_BASE_H
#define NALLOC_BASE_H

#include "compiler.h"

/* NULL when the OS refuses memory. Sizes that are a multiple of the cache
 * line get a block that starts on one. */
void *base_alloc(size_t size);
void base_free(void *p, size_t size);
/* As base_alloc, for metadata made and freed often in bulk (exact
 * profiling's slot arrays): a block of a page or more (to 64 KiB) is a
 * page run (page aligned, rounded up to whole pages) whose pages go back
 * to the kernel once it has been free for a second (dirty_decay_ms if
 * shorter; -1: never), beyond 256 KiB
 * of such runs kept whatever their age. Freed with base_free_purgeable
 * and the same size. */
void *base_alloc_purgeable(size_t size);
void base_free_purgeable(void *p, size_t size);
/* Gives back the freed runs that are due (all: every freed run, now), as
 * the page heap's decay and purge do for user pages (arena_purge). */
void base_decay(bool all);
/* When the next freed run falls due (CLOCK_MONOTONIC ns; UINT64_MAX:
 * none will without more frees). */
uint64_t base_decay_next(void);
size_t base_stats_mapped(void);
/* base_stats_mapped less the pages given back to the kernel (freed page
 * runs past the warm reserve, the whole pages left at chunks' ends):
 * stats.metadata's share of the base allocator. */
size_t base_stats_resident(void);
void base_prefork(void);
void base_postfork_parent(void);
void base_postfork_child(void);

#endif
