/* numa.c -- NUMA topology (libnuma), node binding of arena memory (mbind),
 * and the choice of arena for each new thread.
 *
 * Arena i belongs to node i / numa_per_node. A thread is bound at its first
 * allocation to an arena of the node of the CPU it runs on, round-robin
 * among that node's arenas. `numa_nodes:N` pretends N nodes, so the
 * multi-node paths run (and are tested) on a one-node machine: threads are
 * then spread over the pretended nodes in turn, and each pretended node's
 * memory is bound to real node (N mod real nodes). */
#define _GNU_SOURCE
#include "numa.h"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <unistd.h>

#include "arena.h"
#include "conf.h"

#define NUMA_MAX_CPUS 4096
#define NUMA_MAX_NODES 64

unsigned numa_nnodes = 1;
unsigned numa_per_node = 1;
_Atomic uint64_t numa_mbind_failures;
static unsigned numa_real_nodes = 1;
static bool numa_ready, numa_bind_on;
static uint16_t numa_cpu_node[NUMA_MAX_CPUS];
static _Atomic unsigned numa_rr[NUMA_MAX_NODES];
static _Atomic unsigned numa_thread_seq;

void numa_boot(void) {
  numa_nnodes = 1;
  numa_per_node = 1;
  arenas_count = 1;
}

static unsigned numa_online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

void numa_discover(void) {
  unsigned ncpus = numa_online_cpus();
  numa_real_nodes = 1;
  bool have_numa = opt_numa && numa_available() >= 0;
  if (have_numa) {
    int n = numa_max_node() + 1;
    numa_real_nodes = n > 0 && n <= NUMA_MAX_NODES ? (unsigned)n : 1;
    int nc = numa_num_configured_cpus();
    for (int c = 0; c < nc && c < NUMA_MAX_CPUS; c++) {
      int node = numa_node_of_cpu(c);
      numa_cpu_node[c] = node >= 0 && (unsigned)node < numa_real_nodes ? (uint16_t)node : 0;
    }
  }
  numa_nnodes = opt_numa_nodes ? opt_numa_nodes : numa_real_nodes;
  if (numa_nnodes > NUMA_MAX_NODES) numa_nnodes = NUMA_MAX_NODES;
  if (opt_narenas_per_node) numa_per_node = opt_narenas_per_node;
  else if (opt_narenas) numa_per_node = (opt_narenas + numa_nnodes - 1) / numa_nnodes;
  else numa_per_node = (ncpus + numa_nnodes - 1) / numa_nnodes;
  if (numa_per_node == 0) numa_per_node = 1;
  unsigned total = opt_narenas ? opt_narenas : numa_per_node * numa_nnodes;
  if (total > ARENAS_MAX) total = ARENAS_MAX;
  if (total < 1) total = 1;
  arenas_count = total;
  numa_bind_on = have_numa || opt_numa_nodes > 0;
  numa_ready = true;
}

unsigned numa_node_of_arena(unsigned i) {
  unsigned node = i / (numa_per_node ? numa_per_node : 1);
  return node < numa_nnodes ? node : numa_nnodes - 1;
}

unsigned numa_pick_arena(void) {
  if (!numa_ready) return 0;
  unsigned node;
  if (opt_numa_nodes) {
    node = atomic_fetch_add_explicit(&numa_thread_seq, 1, memory_order_relaxed) % numa_nnodes;
  } else {
    int cpu = sched_getcpu();
    node = cpu >= 0 && cpu < NUMA_MAX_CPUS ? numa_cpu_node[cpu] : 0;
    if (node >= numa_nnodes) node = 0;
  }
  unsigned k = atomic_fetch_add_explicit(&numa_rr[node], 1, memory_order_relaxed);
  unsigned i = node * numa_per_node + k % numa_per_node;
  return i < arenas_count ? i : i % arenas_count;
}

/* MPOL_PREFERRED, not BIND: under memory pressure on the node the kernel
 * falls back to another node instead of failing the page fault. A refusal
 * is counted (numa.mbind_failures) and the memory is used unbound. */
void numa_bind_range(void *p, size_t size, unsigned node) {
  if (!numa_bind_on) return;
  unsigned long mask = 1UL << (node % numa_real_nodes);
  if (mbind(p, size, MPOL_PREFERRED, &mask, sizeof(mask) * 8, 0) != 0) {
    if (atomic_fetch_add_explicit(&numa_mbind_failures, 1, memory_order_relaxed) == 0)
      nalloc_log("mbind to node %u failed (errno %d); continuing without node binding",
                 node % numa_real_nodes, errno);
  }
}
