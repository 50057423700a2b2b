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
#include "conf.h"
#include "lock.h"
#include "log.h"
#include "node.h"
#include "../prof/prof_hook.h"

stats_t stats_snapshot;
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
  st->metadata = base_stats_mapped() + prof_stats_mapped();
  st->mapped += st->metadata;
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

static stats_t stats_print_buf;

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
