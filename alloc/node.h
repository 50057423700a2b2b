/* node.h -- NUMA nodes: how many, which node a thread runs on, which
 * arenas belong to which node, and binding an arena's memory to its node.
 *
 * Arena i belongs to node i / node_arenas_per. A thread is bound at its
 * first allocation to an arena of the node of the CPU it runs on: the
 * node's arena with the fewest threads (arena_pick, in arena.c; of
 * node_pick_arena's round-robin pick it keeps only the node). `numa_nodes:N` pretends N nodes,
 * so the multi-node paths run (and are tested) on a one-node machine:
 * threads are then spread over the pretended nodes in turn, and each
 * pretended node's memory is bound to a real node. */
#ifndef NALLOC_NODE_H
#define NALLOC_NODE_H

#include "conf.h"
#include "ctl.h"
#include "types.h"

#define NODE_MAX 64

extern unsigned opt_narenas;          /* 0: nodes * narenas_per_node */
extern unsigned opt_narenas_per_node; /* 0: CPUs of the node */
extern bool opt_numa;                 /* bind arenas and threads to nodes */
extern unsigned opt_numa_nodes;       /* >0: pretend this many nodes */
/* The options above, and the numa.* names but the per-node statistics. */
extern const conf_table_t node_conf_table;
extern const ctl_table_t node_ctl_table;

extern unsigned node_count;       /* nodes arenas are grouped by (real or pretended) */
extern unsigned node_arenas_per;  /* arenas per node */
extern _Atomic uint64_t node_mbind_failures;

/* At allocator start: no system call, no malloc. Returns true if it
 * discovered the topology already (an explicit arena or node count);
 * otherwise one node and one arena stand until node_discover. */
bool node_boot(void);
/* The topology and the number of arenas (system calls only, no malloc,
 * no files read): once, under the boot lock (nalloc_boot_discover), before
 * a second thread picks an arena or anything reports nodes or arenas. */
void node_discover(void);
/* Arenas in all (1 before discovery); safe without the boot lock. */
unsigned node_arena_count(void);
unsigned node_of_arena(unsigned i);
/* The first arena of arena i's node (i itself before discovery, when
 * arena 0 is the only one); safe without the boot lock. */
unsigned node_first_arena(unsigned i);
/* Arena for a thread starting now on the current CPU. */
unsigned node_pick_arena(void);
/* Memory mapped for an arena of `node`: bind it there (preferred). */
void node_bind_range(void *p, size_t size, unsigned node);

#endif
