/* os.h -- the OS layer: every page nalloc uses is mapped, purged or
 * faulted in here, and nowhere else. */
#ifndef NALLOC_OS_H
#define NALLOC_OS_H

#include "compiler.h"

void *os_map(size_t size);              /* NULL (errno ENOMEM) on failure */
void os_unmap(void *p, size_t size);
void os_purge(void *p, size_t size);    /* MADV_DONTNEED: pages read back as 0 */
void os_populate(void *p, size_t size); /* fault fresh pages in, in one call */
uint64_t nalloc_now_ns(void);           /* CLOCK_MONOTONIC */

#endif
