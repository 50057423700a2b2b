/* base.h -- the metadata allocator: zeroed, 16-byte aligned memory for
 * nalloc's own structures (span records, heaps, arenas, profiler tables),
 * beside the user heap and never inside it. Never calls malloc; safe from
 * anywhere. */
#ifndef NALLOC_BASE_H
#define NALLOC_BASE_H

#include "compiler.h"

/* NULL when the OS refuses memory. Sizes that are a multiple of the cache
 * line get a block that starts on one; sizes of a page or more, a page
 * run (page aligned, rounded up to whole pages). */
void *base_alloc(size_t size);
void base_free(void *p, size_t size);
size_t base_stats_mapped(void);
/* base_stats_mapped less the pages given back to the kernel (freed page
 * runs past the warm reserve, the whole pages left at chunks' ends):
 * stats.metadata's share of the base allocator. */
size_t base_stats_resident(void);
void base_prefork(void);
void base_postfork_parent(void);
void base_postfork_child(void);

#endif
