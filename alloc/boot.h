/* boot.h -- the allocator's one-time start-up. */
#ifndef NALLOC_BOOT_H
#define NALLOC_BOOT_H

#include "types.h"

/* Everything the first malloc needs: options, size classes, NUMA nodes,
 * the first arena. Malloc-free, because the first malloc of the process
 * (often from ld.so or libc itself) lands here. Idempotent. */
void nalloc_boot(void);
/* nalloc_boot, then the NUMA topology and the arena count (node_discover),
 * once: before a second thread picks an arena, and before nalloc_ctl,
 * malloc_stats or the exit report reads nodes or arenas. Idempotent. */
void nalloc_boot_discover(void);
/* Fork child: the boot lock, which the prepare handler does not take. */
void nalloc_boot_postfork_child(void);

#endif
