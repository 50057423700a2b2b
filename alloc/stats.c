/* stats.c -- gathers per-arena figures into process totals and per-node
 * sums, and prints them (malloc_stats, stats_print).
 *
 * `allocated` counts bytes handed out by the arenas: small slots sitting
 * in thread caches count as allocated, as in jemalloc. `resident` is an
 * estimate: active pages + dirty and muzzy (freed, not yet purged) pages +
 * metadata; muzzy pages count until purged, although the kernel may have
 * taken some of them already (MADV_FREE). */
#include "stats.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "background.h"
#include "base.h"
#include "heap.h"
#include "lock.h"
#include "log.h"
#include "node.h"
#include "page_heap.h"
#include "../prof/prof_hook.h"

bool opt_stats_print = false;

static const conf_entry_t stats_conf_rows[] = {
    {"stats_print", CONF_BOOL, &opt_stats_print, 0, 0, NULL, 0,
     "print statistics to stderr at exit"},
};
const conf_table_t stats_conf_table = {stats_conf_rows, ARRAY_LEN(stats_conf_rows)};

NALLOC_BIG_BSS stats_t stats_snapshot;
static bool stats_taken;
static nlock_t stats_lock = NLOCK_INITIALIZER(LOCK_STATS);

void stats_collect(stats_t *st) {
  uint64_t epoch = st->epoch;
  memset(st, 0, sizeof *st);
  st->epoch = epoch;
  FOR_EACH_ARENA(a) {
    arena_stats_t *as = &st->arena[a->index];
    arena_stats(a, as);
    st->allocated += as->allocated;
    st->active += as->active;
    st->dirty += as->dirty;
    st->muzzy += as->muzzy;
    st->mapped += as->mapped;
    st->nmalloc += as->nmalloc;
    st->ndalloc += as->ndalloc;
    st->npurged += as->npurged;
    st->nmuzzied += as->nmuzzied;
    st->npurge_calls += as->npurge_calls;
    unsigned n = a->node < STATS_MAX_NODES ? a->node : STATS_MAX_NODES - 1;
    st->node[n].allocated += as->allocated;
    st->node[n].active += as->active;
    st->node[n].resident += as->active + as->dirty + as->muzzy;
    st->node[n].mapped += as->mapped;
  }
  for (unsigned i = 0; i < arenas_count; i++) {
    unsigned n = node_of_arena(i);
    if (n < STATS_MAX_NODES) st->node[n].narenas++;
  }
  /* the base allocator's free blocks' purged pages are mapped, not held */
  st->metadata = base_stats_resident() + prof_stats_mapped();
  st->mapped += base_stats_mapped() + prof_stats_mapped();
  st->resident = st->active + st->dirty + st->muzzy + st->metadata;
}

void stats_refresh(void) {
  FOR_EACH_ARENA(a) arena_decay(a);
  nlock_lock(&stats_lock);
  stats_snapshot.epoch++;
  stats_collect(&stats_snapshot);
  stats_taken = true;
  nlock_unlock(&stats_lock);
}

void stats_ensure(void) {
  if (!stats_taken) stats_refresh();
}

NALLOC_BIG_BSS static stats_t stats_print_buf;

/* Prints with nalloc_log (write(2) of a stack buffer): no stdio stream,
 * whose lock or buffer could be in any state at exit. */
void stats_print(void) {
  nlock_lock(&stats_lock);
  stats_t *st = &stats_print_buf;
  stats_collect(st);
  nalloc_log(
          "stats: allocated=%zu active=%zu resident=%zu mapped=%zu "
          "metadata=%zu dirty=%zu muzzy=%zu nmalloc=%llu ndalloc=%llu",
          st->allocated, st->active, st->resident, st->mapped, st->metadata, st->dirty,
          st->muzzy, (unsigned long long)st->nmalloc, (unsigned long long)st->ndalloc);
  nalloc_log("decay: dirty_decay_ms=%zd muzzy_decay_ms=%zd background_thread=%s "
             "(running: %u, wake-ups %llu) purged_pages=%llu muzzied_pages=%llu "
             "madvise_calls=%llu",
             opt_dirty_decay_ms, opt_muzzy_decay_ms, opt_background_thread ? "true" : "false",
             background_nthreads(), (unsigned long long)background_nruns(),
             (unsigned long long)st->npurged, (unsigned long long)st->nmuzzied,
             (unsigned long long)st->npurge_calls);
  nalloc_log("arenas=%u numa_nodes=%u arenas_per_node=%u tcache=%s prof=%s",
          arenas_count, node_count, node_arenas_per, opt_tcache ? "true" : "false",
          opt_prof ? "true" : "false");
  if (opt_prof) prof_stats_print();
  for (unsigned i = 0; i < ARENAS_MAX; i++) {
    arena_stats_t *as = &st->arena[i];
    if (as->mapped == 0 && as->nmalloc == 0) continue;
    nalloc_log(
            "arena %u (node %u): threads=%u allocated=%zu active=%zu dirty=%zu "
            "muzzy=%zu mapped=%zu nmalloc=%llu ndalloc=%llu purged_pages=%llu "
            "muzzied_pages=%llu",
            i, node_of_arena(i), as->nthreads, as->allocated, as->active, as->dirty,
            as->muzzy, as->mapped, (unsigned long long)as->nmalloc,
            (unsigned long long)as->ndalloc, (unsigned long long)as->npurged,
            (unsigned long long)as->nmuzzied);
  }
  for (unsigned n = 0; n < node_count && n < STATS_MAX_NODES; n++)
    nalloc_log("node %u: arenas=%u allocated=%zu active=%zu resident=%zu", n,
            st->node[n].narenas, st->node[n].allocated, st->node[n].active,
            st->node[n].resident);
  nlock_unlock(&stats_lock);
}

struct mallinfo2 stats_mallinfo2(void) {
  nlock_lock(&stats_lock);
  stats_t *st = &stats_print_buf;
  stats_collect(st);
  struct mallinfo2 mi = {0};
  mi.arena = st->mapped - st->metadata;
  mi.hblkhd = st->metadata;
  mi.uordblks = st->allocated;
  mi.fordblks = st->mapped - st->metadata - st->allocated;
  mi.keepcost = st->dirty + st->muzzy;
  nlock_unlock(&stats_lock);
  return mi;
}

void stats_prefork(void) { nlock_prefork(&stats_lock); }
void stats_postfork_parent(void) { nlock_postfork_parent(&stats_lock); }
void stats_postfork_child(void) { (void)nlock_postfork_child(&stats_lock); }

/* ---- ctl: epoch and the figures of the snapshot -------------------------- */

/* epoch: writing refreshes the snapshot; reading takes the first one. */
static int stats_ctl_epoch(const size_t *idx, void *oldp, size_t *oldlenp, void *newp,
                           size_t newlen) {
  (void)idx;
  if (newp != NULL) {
    uint64_t e;
    int r = ctl_in(newp, newlen, &e, sizeof e);
    if (r) return r;
    stats_refresh();
    background_poll(); /* a program that only polls may start the decay thread */
  } else {
    stats_ensure();
  }
  return ctl_out(oldp, oldlenp, &stats_snapshot.epoch, sizeof(uint64_t));
}

static uint64_t stats_ctl_arena_node(size_t i) { return node_of_arena((unsigned)i); }
static uint64_t stats_ctl_bg_threads(void) { return background_nthreads(); }
static uint64_t stats_ctl_bg_runs(void) { return background_nruns(); }
/* An arena's resident pages: in use, and freed but not yet purged. */
static uint64_t stats_ctl_arena_resident(size_t i) {
  const arena_stats_t *as = &stats_snapshot.arena[i];
  return as->active + as->dirty + as->muzzy;
}
static uint64_t stats_ctl_arena_pdirty(size_t i) { return stats_snapshot.arena[i].dirty / PAGE; }
static uint64_t stats_ctl_arena_pmuzzy(size_t i) { return stats_snapshot.arena[i].muzzy / PAGE; }

/* Arenas that exist; nodes that exist and have a row in the snapshot. */
static const ctl_index_t stats_arenas = {&arenas_count, ARENAS_MAX, sizeof(arena_stats_t)};
static const ctl_index_t stats_nodes = {&node_count, STATS_MAX_NODES,
                                        sizeof stats_snapshot.node[0]};

static const ctl_row_t stats_ctl_rows[] = {
    {"epoch", CTL_U64, CTL_RW, 0, .fn = stats_ctl_epoch},
    {"stats.allocated", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &stats_snapshot.allocated},
    {"stats.active", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &stats_snapshot.active},
    {"stats.resident", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &stats_snapshot.resident},
    {"stats.mapped", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &stats_snapshot.mapped},
    {"stats.metadata", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &stats_snapshot.metadata},
    {"stats.dirty", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &stats_snapshot.dirty},
    {"stats.muzzy", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &stats_snapshot.muzzy},
    {"stats.npurged", CTL_U64, CTL_RO, CTL_SNAPSHOT, .v.u64 = &stats_snapshot.npurged},
    {"stats.nmuzzied", CTL_U64, CTL_RO, CTL_SNAPSHOT, .v.u64 = &stats_snapshot.nmuzzied},
    {"stats.npurge_calls", CTL_U64, CTL_RO, CTL_SNAPSHOT, .v.u64 = &stats_snapshot.npurge_calls},
    {"stats.background_thread.num_threads", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .get = stats_ctl_bg_threads},
    {"stats.background_thread.num_runs", CTL_U64, CTL_RO, CTL_SNAPSHOT, .get = stats_ctl_bg_runs},
    {"stats.nmalloc", CTL_U64, CTL_RO, CTL_SNAPSHOT, .v.u64 = &stats_snapshot.nmalloc},
    {"stats.ndalloc", CTL_U64, CTL_RO, CTL_SNAPSHOT, .v.u64 = &stats_snapshot.ndalloc},
    {"stats.arenas.#.allocated", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.arena[0].allocated, .index = &stats_arenas},
    {"stats.arenas.#.active", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.arena[0].active, .index = &stats_arenas},
    {"stats.arenas.#.dirty", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.arena[0].dirty, .index = &stats_arenas},
    {"stats.arenas.#.muzzy", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.arena[0].muzzy, .index = &stats_arenas},
    {"stats.arenas.#.resident", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .get_i = stats_ctl_arena_resident, .index = &stats_arenas},
    {"stats.arenas.#.pdirty", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .get_i = stats_ctl_arena_pdirty,
     .index = &stats_arenas},
    {"stats.arenas.#.pmuzzy", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .get_i = stats_ctl_arena_pmuzzy,
     .index = &stats_arenas},
    {"stats.arenas.#.nmuzzied", CTL_U64, CTL_RO, CTL_SNAPSHOT,
     .v.u64 = &stats_snapshot.arena[0].nmuzzied, .index = &stats_arenas},
    {"stats.arenas.#.npurge_calls", CTL_U64, CTL_RO, CTL_SNAPSHOT,
     .v.u64 = &stats_snapshot.arena[0].npurge_calls, .index = &stats_arenas},
    {"stats.arenas.#.mapped", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.arena[0].mapped, .index = &stats_arenas},
    {"stats.arenas.#.nthreads", CTL_UNSIGNED, CTL_RO, CTL_SNAPSHOT,
     .v.u = &stats_snapshot.arena[0].nthreads, .index = &stats_arenas},
    {"stats.arenas.#.nmalloc", CTL_U64, CTL_RO, CTL_SNAPSHOT,
     .v.u64 = &stats_snapshot.arena[0].nmalloc, .index = &stats_arenas},
    {"stats.arenas.#.ndalloc", CTL_U64, CTL_RO, CTL_SNAPSHOT,
     .v.u64 = &stats_snapshot.arena[0].ndalloc, .index = &stats_arenas},
    {"stats.arenas.#.npurged", CTL_U64, CTL_RO, CTL_SNAPSHOT,
     .v.u64 = &stats_snapshot.arena[0].npurged, .index = &stats_arenas},
    {"stats.arenas.#.node", CTL_UNSIGNED, CTL_RO, CTL_SNAPSHOT, .get_i = stats_ctl_arena_node,
     .index = &stats_arenas},
    {"numa.node.#.allocated", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.node[0].allocated, .index = &stats_nodes},
    {"numa.node.#.active", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.node[0].active, .index = &stats_nodes},
    {"numa.node.#.resident", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.node[0].resident, .index = &stats_nodes},
    {"numa.node.#.mapped", CTL_SIZE, CTL_RO, CTL_SNAPSHOT,
     .v.z = &stats_snapshot.node[0].mapped, .index = &stats_nodes},
    {"numa.node.#.narenas", CTL_UNSIGNED, CTL_RO, CTL_SNAPSHOT,
     .v.u = &stats_snapshot.node[0].narenas, .index = &stats_nodes},
};
const ctl_table_t stats_ctl_table = {stats_ctl_rows, ARRAY_LEN(stats_ctl_rows)};
