/* numa.h -- NUMA topology and the thread → arena binding. */
#ifndef NALLOC_NUMA_H
#define NALLOC_NUMA_H

#include "internal.h"

extern unsigned numa_nnodes;    /* nodes arenas are grouped by (real or pretended) */
extern unsigned numa_per_node;  /* arenas per node */
extern _Atomic uint64_t numa_mbind_failures;

/* At allocator start (no malloc): one node, one arena, until discovery. */
void numa_boot(void);
/* From the library constructor (malloc works): asks libnuma for the
 * topology, sizes the arena set, and turns on node binding. */
void numa_discover(void);
unsigned numa_node_of_arena(unsigned i);
/* Arena for a thread starting now on the current CPU. */
unsigned numa_pick_arena(void);

#endif
