/* large.h -- large blocks: requests above SC_SMALL_MAX, or aligned above a
 * page, each a page run of its own with a record found by its first page. */
#ifndef NALLOC_LARGE_H
#define NALLOC_LARGE_H

#include "types.h"

/* NULL (errno ENOMEM) when it cannot be had. */
void *large_alloc(arena_t *a, size_t size, size_t align, bool zero);
/* The same from arena a's own page heap, not its node's first arena's: a
 * sampled small block's run (sample_run.c) comes from the pages of the
 * thread's small spans, which its free gives back to. */
void *large_alloc_in(arena_t *a, size_t size, size_t align, bool zero);
void large_free(span_t *s);
/* Grows or shrinks large block s in place to hold `size` bytes; false if
 * the pages after it are not free. */
bool large_resize(span_t *s, size_t size);
/* Grows large block s, which starts a mapping of its own (over
 * HEAP_CHUNK), by moving the mapping (mremap): no copy, and the old pages
 * are not kept beside the new ones. The new address, or NULL if it
 * cannot (then the caller copies). */
void *large_move_grow(span_t *s, size_t size);

#endif
