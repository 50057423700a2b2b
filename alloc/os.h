/* os.h -- the OS layer: every page nalloc uses is mapped, purged or
 * faulted in here, and nowhere else. */
#ifndef NALLOC_OS_H
#define NALLOC_OS_H

#include "compiler.h"

void *os_map(size_t size);              /* NULL (errno ENOMEM) on failure */
void os_unmap(void *p, size_t size);
/* Moving a mapping, pages and all (mremap): reserve the destination (no
 * commit charge), give it page-map entries, then move and grow onto it. */
void *os_reserve(size_t size);
bool os_move(void *p, size_t old, size_t size, void *dest);
void os_purge(void *p, size_t size);    /* MADV_DONTNEED: pages read back as 0 */
void os_populate(void *p, size_t size); /* fault fresh pages in, in one call */
uint64_t nalloc_now_ns(void);           /* CLOCK_MONOTONIC */
/* MADV_FREE: resident until the kernel needs the memory, no fault when
 * written again; false if the kernel cannot. */
bool os_purge_lazy(void *p, size_t size);

#endif
