/* node.c -- NUMA topology and binding with system calls only.
 *
 * No libnuma: its constructor allocates (which would show up in the
 * program's heap profile), reads /proc/self/status and calls
 * set_mempolicy in every process. What nalloc needs is three calls:
 * get_mempolicy(MPOL_F_MEMS_ALLOWED) for the nodes this process may use
 * (one node: nothing more to do), getcpu() for the node a thread runs on,
 * and mbind() to bind an arena's mapping to its node. */
#define _GNU_SOURCE
#include "node.h"

#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#define NODE_MPOL_PREFERRED 1          /* linux/mempolicy.h */
#define NODE_MPOL_F_MEMS_ALLOWED (1 << 2)

unsigned opt_narenas = 0;
unsigned opt_narenas_per_node = 0;
bool opt_numa = true;
unsigned opt_numa_nodes = 0;

static const conf_entry_t node_conf_rows[] = {
    {"narenas", CONF_UNSIGNED, &opt_narenas, 0, ARENAS_MAX, NULL, 0,
     "number of arenas (0: numa nodes x narenas_per_node)"},
    {"narenas_per_node", CONF_UNSIGNED, &opt_narenas_per_node, 0, 256, NULL, 0,
     "arenas per NUMA node (0: CPUs per node)"},
    {"numa", CONF_BOOL, &opt_numa, 0, 0, NULL, 0,
     "group arenas by NUMA node and bind their memory to it"},
    {"numa_nodes", CONF_UNSIGNED, &opt_numa_nodes, 0, 64, NULL, 0,
     "pretend this many NUMA nodes (0: the real topology)"},
};
const conf_table_t node_conf_table = {node_conf_rows, ARRAY_LEN(node_conf_rows)};

unsigned node_count = 1;
unsigned node_arenas_per = 1;
_Atomic uint64_t node_mbind_failures;

static uint64_t node_ctl_mbind_failures(void) {
  return atomic_load_explicit(&node_mbind_failures, memory_order_relaxed);
}

static const ctl_row_t node_ctl_rows[] = {
    {"numa.nodes", CTL_UNSIGNED, CTL_RO, CTL_SNAPSHOT, .v.u = &node_count},
    {"numa.narenas_per_node", CTL_UNSIGNED, CTL_RO, CTL_SNAPSHOT, .v.u = &node_arenas_per},
    {"numa.mbind_failures", CTL_U64, CTL_RO, CTL_SNAPSHOT,
     .get = node_ctl_mbind_failures},
};
const ctl_table_t node_ctl_table = {node_ctl_rows, ARRAY_LEN(node_ctl_rows)};

static unsigned node_real[NODE_MAX]; /* the real node ids this process may use */
static unsigned node_nreal = 1;
static unsigned node_total_arenas = 1;
static bool node_bind_on;
static _Atomic unsigned node_rr[NODE_MAX];
static _Atomic unsigned node_thread_seq;

/* The nodes this process may allocate on; false without NUMA support. */
static bool node_allowed(void) {
  unsigned long mask[NODE_MAX / (8 * sizeof(unsigned long))] = {0};
  if (syscall(SYS_get_mempolicy, NULL, mask, (unsigned long)NODE_MAX, NULL,
              NODE_MPOL_F_MEMS_ALLOWED) != 0)
    return false;
  node_nreal = 0;
  for (unsigned n = 0; n < NODE_MAX; n++)
    if (mask[n / (8 * sizeof(unsigned long))] >> (n % (8 * sizeof(unsigned long))) & 1)
      node_real[node_nreal++] = n;
  if (node_nreal == 0) node_real[node_nreal++] = 0;
  return true;
}

static unsigned node_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? (unsigned)n : 1;
}

void node_boot(void) {
  int saved = errno;
  bool numa = opt_numa && node_allowed();
  if (!numa) node_nreal = 1, node_real[0] = 0;
  node_count = opt_numa_nodes ? opt_numa_nodes : node_nreal;
  if (node_count > NODE_MAX) node_count = NODE_MAX;
  unsigned cpus = node_cpus();
  if (opt_narenas_per_node) node_arenas_per = opt_narenas_per_node;
  else if (opt_narenas) node_arenas_per = (opt_narenas + node_count - 1) / node_count;
  else node_arenas_per = (cpus + node_count - 1) / node_count;
  if (node_arenas_per == 0) node_arenas_per = 1;
  unsigned total = opt_narenas ? opt_narenas : node_arenas_per * node_count;
  node_total_arenas = total < 1 ? 1 : total > ARENAS_MAX ? ARENAS_MAX : total;
  node_bind_on = (numa && node_nreal > 1) || opt_numa_nodes > 0;
  errno = saved;
}

unsigned node_arena_count(void) { return node_total_arenas; }

unsigned node_of_arena(unsigned i) {
  unsigned node = i / node_arenas_per;
  return node < node_count ? node : node_count - 1;
}

/* The node of the CPU the caller runs on, as an index into node_real. */
static unsigned node_current(void) {
  unsigned cpu, node;
  if (node_nreal < 2 || getcpu(&cpu, &node) != 0) return 0;
  for (unsigned k = 0; k < node_nreal; k++)
    if (node_real[k] == node) return k < node_count ? k : 0;
  return 0;
}

unsigned node_pick_arena(void) {
  unsigned node = opt_numa_nodes
                      ? atomic_fetch_add_explicit(&node_thread_seq, 1, memory_order_relaxed) % node_count
                      : node_current();
  unsigned k = atomic_fetch_add_explicit(&node_rr[node], 1, memory_order_relaxed);
  unsigned i = node * node_arenas_per + k % node_arenas_per;
  return i < node_total_arenas ? i : i % node_total_arenas;
}

/* MPOL_PREFERRED, not BIND: under memory pressure on the node the kernel
 * falls back to another node instead of failing the page fault. A refusal
 * is counted (numa.mbind_failures) and the memory is used unbound. */
void node_bind_range(void *p, size_t size, unsigned node) {
  if (!node_bind_on) return;
  unsigned real = node_real[node % node_nreal];
  unsigned long mask[NODE_MAX / (8 * sizeof(unsigned long))] = {0};
  mask[real / (8 * sizeof(unsigned long))] = 1UL << (real % (8 * sizeof(unsigned long)));
  int saved = errno;
  if (syscall(SYS_mbind, p, size, NODE_MPOL_PREFERRED, mask, (unsigned long)NODE_MAX + 1,
              0) != 0 &&
      atomic_fetch_add_explicit(&node_mbind_failures, 1, memory_order_relaxed) == 0)
    nalloc_log("mbind to node %u failed (errno %d); continuing without node binding",
               real, errno);
  errno = saved;
}
