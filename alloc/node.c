/* node.c -- NUMA topology and binding with system calls only.
 *
 * No libnuma: its constructor allocates (which would show up in the
 * program's heap profile), reads /proc/self/status and calls
 * set_mempolicy in every process. What nalloc needs is three calls:
 * get_mempolicy(MPOL_F_MEMS_ALLOWED) for the nodes this process may use
 * (one node: nothing more to do), getcpu() for the node a thread runs on,
 * and mbind() to bind an arena's mapping to its node.
 *
 * Discovery is lazy. A process's first thread allocates from arena 0
 * whatever the topology, so until a second thread sets up (or nalloc_ctl,
 * malloc_stats or the exit report asks), one node and one arena are all
 * nalloc needs to know: node_boot makes no system call, and the shells,
 * `cat`s and `sed`s of a build never pay for get_mempolicy and
 * sched_getaffinity. Arena 0's memory mapped before discovery is not
 * bound: the kernel's first-touch policy puts it on the node of the one
 * thread that uses it. node_boot notes that thread's node (getcpu is a
 * vDSO call, no system call), and discovery lists that node first, so
 * arena 0 belongs to it as it did when the thread picked its arena by its
 * node. An explicit narenas, narenas_per_node or numa_nodes discovers at
 * boot: the configuration then shapes the arenas from the first thread. */
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
static _Atomic bool node_bind_on;
/* Set (release) once node_discover has stored the topology: the first
 * thread reads it without the boot lock, and until then uses the one-node
 * values without reading any (arena 0, no binding). */
static _Atomic bool node_ready;
static _Atomic unsigned node_rr[NODE_MAX];
static _Atomic unsigned node_thread_seq;
static unsigned node_boot_real; /* the real node the first thread ran on */

/* The nodes this process may allocate on, into real[] (never none);
 * 0 without NUMA support. */
static unsigned node_allowed(unsigned real[NODE_MAX]) {
  unsigned long mask[NODE_MAX / (8 * sizeof(unsigned long))] = {0};
  if (syscall(SYS_get_mempolicy, NULL, mask, (unsigned long)NODE_MAX, NULL,
              NODE_MPOL_F_MEMS_ALLOWED) != 0)
    return 0;
  unsigned nreal = 0;
  for (unsigned n = 0; n < NODE_MAX; n++)
    if (mask[n / (8 * sizeof(unsigned long))] >> (n % (8 * sizeof(unsigned long))) & 1)
      real[nreal++] = n;
  if (nreal == 0) real[nreal++] = 0;
  return nreal;
}

static unsigned node_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? (unsigned)n : 1;
}

/* Everything is computed first and stored after, node_bind_on and
 * node_ready last (release): the first thread may be mapping memory or
 * picking an arena meanwhile (node_bind_range, node_pick_arena), and must
 * see either the one-node values or all of the new ones. Idempotent: a
 * fork child may run it again. */
void node_discover(void) {
  int saved = errno;
  unsigned real[NODE_MAX] = {0}, nreal = opt_numa ? node_allowed(real) : 0;
  bool numa = nreal > 0;
  if (!numa) {
    nreal = 1;
    real[0] = 0;
  }
  for (unsigned k = 1; k < nreal; k++) /* the boot node first (see above) */
    if (real[k] == node_boot_real) {
      real[k] = real[0];
      real[0] = node_boot_real;
      break;
    }
  unsigned count = opt_numa_nodes ? opt_numa_nodes : nreal;
  if (count > NODE_MAX) count = NODE_MAX;
  unsigned cpus = node_cpus(), per;
  if (opt_narenas_per_node) per = opt_narenas_per_node;
  else if (opt_narenas) per = (opt_narenas + count - 1) / count;
  else per = (cpus + count - 1) / count;
  if (per == 0) per = 1;
  unsigned total = opt_narenas ? opt_narenas : per * count;
  for (unsigned k = 0; k < nreal; k++) node_real[k] = real[k];
  node_nreal = nreal;
  node_count = count;
  node_arenas_per = per;
  node_total_arenas = total < 1 ? 1 : total > ARENAS_MAX ? ARENAS_MAX : total;
  atomic_store_explicit(&node_bind_on, (numa && nreal > 1) || opt_numa_nodes > 0,
                        memory_order_release);
  atomic_store_explicit(&node_ready, true, memory_order_release);
  errno = saved;
}

bool node_boot(void) {
  if (opt_narenas || opt_narenas_per_node || opt_numa_nodes) {
    node_discover();
    return true;
  }
  /* One node, one arena, no binding (the initial values) until discovery.
   * getcpu reads the node from the vDSO: no system call. */
  unsigned cpu, node;
  if (opt_numa && getcpu(&cpu, &node) == 0) node_boot_real = node;
  return false;
}

unsigned node_arena_count(void) {
  /* a thread picking its arena (arena_pick) while another discovers */
  if (!atomic_load_explicit(&node_ready, memory_order_acquire)) return 1; /* arena 0 */
  return node_total_arenas;
}

unsigned node_first_arena(unsigned i) {
  if (!atomic_load_explicit(&node_ready, memory_order_acquire)) return i; /* arena 0 */
  return i - i % node_arenas_per;
}

unsigned node_of_arena(unsigned i) {
  if (!atomic_load_explicit(&node_ready, memory_order_acquire)) return 0; /* one node */
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
  if (!atomic_load_explicit(&node_ready, memory_order_acquire)) {
    /* arena 0, counted as node 0's first pick: the next thread takes 1 */
    atomic_fetch_add_explicit(&node_rr[0], 1, memory_order_relaxed);
    return 0;
  }
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
  if (!atomic_load_explicit(&node_bind_on, memory_order_acquire)) return;
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
