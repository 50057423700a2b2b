/* boot.h -- the allocator's one-time start-up. */
#ifndef NALLOC_BOOT_H
#define NALLOC_BOOT_H

#include "types.h"

/* Everything the first malloc needs: options, size classes, NUMA nodes,
 * the first arena. Malloc-free, because the first malloc of the process
 * (often from ld.so or libc itself) lands here. Idempotent. */
void nalloc_boot(void);

#endif
