/* ctl.c -- nalloc_ctl: named values, with jemalloc mallctl's contract.
 *
 * One table maps names to handlers; '#' in a name matches a decimal index.
 * opt.<key> names come from the NALLOC_CONF rows themselves, so every
 * option is readable without a handler of its own. The profiler adds its
 * rows (prof.*, thread.prof.*) through prof_hook.h. */
#include "ctl.h"

#include <string.h>

#include "arena.h"
#include "boot.h"
#include "conf.h"
#include "node.h"
#include "size_class.h"
#include "stats.h"
#include "tsd.h"
#include "nalloc.h"
#include "../prof/prof_hook.h"

/* arena.<i>.purge with this index means every arena, as in jemalloc
 * (MALLCTL_ARENAS_ALL). */
#define CTL_ARENAS_ALL 4096

int ctl_out(void *oldp, size_t *oldlenp, const void *v, size_t len) {
  if (oldp == NULL && oldlenp == NULL) return 0;
  if (oldp == NULL || oldlenp == NULL) {
    if (oldlenp != NULL) *oldlenp = len; /* size query */
    return oldp == NULL ? 0 : EINVAL;
  }
  if (*oldlenp != len) {
    size_t n = *oldlenp < len ? *oldlenp : len;
    memcpy(oldp, v, n);
    *oldlenp = n;
    return EINVAL;
  }
  memcpy(oldp, v, len);
  return 0;
}

int ctl_in(void *newp, size_t newlen, void *v, size_t len) {
  if (newp == NULL) return EINVAL;
  if (newlen != len) return EINVAL;
  memcpy(v, newp, len);
  return 0;
}

#define CTL_FN(name) \
  static int name(const size_t *idx, void *oldp, size_t *oldlenp, void *newp, size_t newlen)

CTL_FN(ctl_version) {
  (void)idx;
  CTL_READONLY();
  const char *v = NALLOC_VERSION;
  return ctl_out(oldp, oldlenp, &v, sizeof v);
}

CTL_FN(ctl_epoch) {
  (void)idx;
  if (newp != NULL) {
    uint64_t e;
    int r = ctl_in(newp, newlen, &e, sizeof e);
    if (r) return r;
    stats_refresh();
  } else {
    stats_ensure();
  }
  return ctl_out(oldp, oldlenp, &stats_snapshot.epoch, sizeof(uint64_t));
}

/* Read-only figures from the snapshot. */
#define CTL_STAT(fn, type, expr, check)          \
  CTL_FN(fn) {                                   \
    (void)idx;                                   \
    CTL_READONLY();                              \
    stats_ensure();                              \
    if (!(check)) return ENOENT;                 \
    type v = (type)(expr);                       \
    return ctl_out(oldp, oldlenp, &v, sizeof v); \
  }

#define ARENA_OK (idx[0] < arenas_count)
#define NODE_OK (idx[0] < node_count && idx[0] < STATS_MAX_NODES)
CTL_STAT(ctl_allocated, size_t, stats_snapshot.allocated, 1)
CTL_STAT(ctl_active, size_t, stats_snapshot.active, 1)
CTL_STAT(ctl_resident, size_t, stats_snapshot.resident, 1)
CTL_STAT(ctl_mapped, size_t, stats_snapshot.mapped, 1)
CTL_STAT(ctl_metadata, size_t, stats_snapshot.metadata, 1)
CTL_STAT(ctl_dirty, size_t, stats_snapshot.dirty, 1)
CTL_STAT(ctl_nmalloc, uint64_t, stats_snapshot.nmalloc, 1)
CTL_STAT(ctl_ndalloc, uint64_t, stats_snapshot.ndalloc, 1)
CTL_STAT(ctl_a_allocated, size_t, stats_snapshot.arena[idx[0]].allocated, ARENA_OK)
CTL_STAT(ctl_a_active, size_t, stats_snapshot.arena[idx[0]].active, ARENA_OK)
CTL_STAT(ctl_a_dirty, size_t, stats_snapshot.arena[idx[0]].dirty, ARENA_OK)
CTL_STAT(ctl_a_mapped, size_t, stats_snapshot.arena[idx[0]].mapped, ARENA_OK)
CTL_STAT(ctl_a_nthreads, unsigned, stats_snapshot.arena[idx[0]].nthreads, ARENA_OK)
CTL_STAT(ctl_a_nmalloc, uint64_t, stats_snapshot.arena[idx[0]].nmalloc, ARENA_OK)
CTL_STAT(ctl_a_ndalloc, uint64_t, stats_snapshot.arena[idx[0]].ndalloc, ARENA_OK)
CTL_STAT(ctl_a_npurged, uint64_t, stats_snapshot.arena[idx[0]].npurged, ARENA_OK)
CTL_STAT(ctl_a_node, unsigned, node_of_arena((unsigned)idx[0]), ARENA_OK)
CTL_STAT(ctl_n_allocated, size_t, stats_snapshot.node[idx[0]].allocated, NODE_OK)
CTL_STAT(ctl_n_active, size_t, stats_snapshot.node[idx[0]].active, NODE_OK)
CTL_STAT(ctl_n_resident, size_t, stats_snapshot.node[idx[0]].resident, NODE_OK)
CTL_STAT(ctl_n_mapped, size_t, stats_snapshot.node[idx[0]].mapped, NODE_OK)
CTL_STAT(ctl_n_narenas, unsigned, stats_snapshot.node[idx[0]].narenas, NODE_OK)
CTL_STAT(ctl_narenas, unsigned, arenas_count, 1)
CTL_STAT(ctl_page, size_t, PAGE, 1)
CTL_STAT(ctl_nbins, unsigned, SC_NSMALL, 1)
CTL_STAT(ctl_bin_size, size_t, sc_info[idx[0]].size, idx[0] < SC_NSMALL)
/* A thread's first span of a class is the smallest that fits; these are
 * the later ones. */
CTL_STAT(ctl_bin_nslots, uint32_t, sc_nslots((unsigned)idx[0], sc_info[idx[0]].npages[1]),
         idx[0] < SC_NSMALL)
CTL_STAT(ctl_bin_npages, uint32_t, sc_info[idx[0]].npages[1], idx[0] < SC_NSMALL)
CTL_STAT(ctl_nodes, unsigned, node_count, 1)
CTL_STAT(ctl_per_node, unsigned, node_arenas_per, 1)
CTL_STAT(ctl_mbind_failures, uint64_t,
         atomic_load_explicit(&node_mbind_failures, memory_order_relaxed), 1)

CTL_FN(ctl_thread_arena) {
  (void)idx;
  unsigned old = tsd_arena();
  if (newp != NULL) {
    unsigned i;
    int r = ctl_in(newp, newlen, &i, sizeof i);
    if (r) return r;
    if (i >= arenas_count || !tsd_set_arena(i)) return EINVAL;
  }
  return ctl_out(oldp, oldlenp, &old, sizeof old);
}

CTL_FN(ctl_tcache_flush) {
  (void)idx;
  (void)newlen;
  if (oldp != NULL || oldlenp != NULL || newp != NULL) return EPERM;
  tsd_flush();
  return 0;
}

/* arena.<i>.purge; i == narenas (or CTL_ARENAS_ALL) purges every arena. */
CTL_FN(ctl_arena_purge) {
  (void)newlen;
  if (oldp != NULL || oldlenp != NULL || newp != NULL) return EPERM;
  size_t i = idx[0];
  if (i < arenas_count) {
    arena_t *a = arena_get((unsigned)i);
    if (a == NULL) return ENOMEM;
    arena_purge(a, true);
    return 0;
  }
  if (i != arenas_count && i != CTL_ARENAS_ALL) return ENOENT;
  FOR_EACH_ARENA(a) arena_purge(a, true);
  return 0;
}

static const ctl_entry_t ctl_alloc_entries[] = {
    {"version", ctl_version},
    {"epoch", ctl_epoch},
    {"stats.allocated", ctl_allocated},
    {"stats.active", ctl_active},
    {"stats.resident", ctl_resident},
    {"stats.mapped", ctl_mapped},
    {"stats.metadata", ctl_metadata},
    {"stats.dirty", ctl_dirty},
    {"stats.nmalloc", ctl_nmalloc},
    {"stats.ndalloc", ctl_ndalloc},
    {"stats.arenas.#.allocated", ctl_a_allocated},
    {"stats.arenas.#.active", ctl_a_active},
    {"stats.arenas.#.dirty", ctl_a_dirty},
    {"stats.arenas.#.mapped", ctl_a_mapped},
    {"stats.arenas.#.nthreads", ctl_a_nthreads},
    {"stats.arenas.#.nmalloc", ctl_a_nmalloc},
    {"stats.arenas.#.ndalloc", ctl_a_ndalloc},
    {"stats.arenas.#.npurged", ctl_a_npurged},
    {"stats.arenas.#.node", ctl_a_node},
    {"arenas.narenas", ctl_narenas},
    {"arenas.page", ctl_page},
    {"arenas.nbins", ctl_nbins},
    {"arenas.bin.#.size", ctl_bin_size},
    {"arenas.bin.#.nslots", ctl_bin_nslots},
    {"arenas.bin.#.npages", ctl_bin_npages},
    {"arena.#.purge", ctl_arena_purge},
    {"numa.nodes", ctl_nodes},
    {"numa.narenas_per_node", ctl_per_node},
    {"numa.mbind_failures", ctl_mbind_failures},
    {"numa.node.#.allocated", ctl_n_allocated},
    {"numa.node.#.active", ctl_n_active},
    {"numa.node.#.resident", ctl_n_resident},
    {"numa.node.#.mapped", ctl_n_mapped},
    {"numa.node.#.narenas", ctl_n_narenas},
    {"thread.arena", ctl_thread_arena},
    {"thread.tcache.flush", ctl_tcache_flush},
};

/* Matches `name` against `pat`, collecting the '#' indices. */
static bool ctl_match(const char *pat, const char *name, size_t *idx, unsigned *nidx) {
  *nidx = 0;
  while (*pat && *name) {
    if (*pat == '#') {
      if (*name < '0' || *name > '9') return false;
      size_t v = 0;
      while (*name >= '0' && *name <= '9') {
        if (v > SIZE_MAX / 10 - 1) return false;
        v = v * 10 + (size_t)(*name++ - '0');
      }
      if (*nidx < 4) idx[(*nidx)++] = v;
      pat++;
      continue;
    }
    if (*pat++ != *name++) return false;
  }
  return *pat == '\0' && *name == '\0';
}

static int ctl_opt(const conf_entry_t *e, void *oldp, size_t *oldlenp, void *newp,
                   size_t newlen) {
  CTL_READONLY();
  switch (e->type) {
  case CONF_BOOL: return ctl_out(oldp, oldlenp, e->ptr, sizeof(bool));
  case CONF_UNSIGNED: return ctl_out(oldp, oldlenp, e->ptr, sizeof(unsigned));
  case CONF_SIZE: return ctl_out(oldp, oldlenp, e->ptr, sizeof(size_t));
  case CONF_SSIZE: return ctl_out(oldp, oldlenp, e->ptr, sizeof(ssize_t));
  case CONF_SIGNAL: return ctl_out(oldp, oldlenp, e->ptr, sizeof(int));
  case CONF_STR: {
    const char *s = e->ptr;
    return ctl_out(oldp, oldlenp, &s, sizeof s);
  }
  case CONF_ENUM: {
    const char *s = e->choices[*(unsigned *)e->ptr];
    return ctl_out(oldp, oldlenp, &s, sizeof s);
  }
  }
  return ENOENT;
}

NALLOC_EXPORT int nalloc_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                             size_t newlen) {
  if (name == NULL) return ENOENT;
  nalloc_boot_discover(); /* numa.* and arenas.* report the real topology */
  tsd_ensure(); /* options parsed, this thread bound to an arena */
  if (strncmp(name, "opt.", 4) == 0) {
    const conf_entry_t *e = conf_find(name + 4, strlen(name + 4));
    return e ? ctl_opt(e, oldp, oldlenp, newp, newlen) : ENOENT;
  }
  size_t idx[4] = {0};
  unsigned nidx;
  for (size_t i = 0; i < sizeof ctl_alloc_entries / sizeof *ctl_alloc_entries; i++)
    if (ctl_match(ctl_alloc_entries[i].name, name, idx, &nidx))
      return ctl_alloc_entries[i].fn(idx, oldp, oldlenp, newp, newlen);
  for (size_t i = 0; i < prof_ctl_nentries; i++)
    if (ctl_match(prof_ctl_entries[i].name, name, idx, &nidx))
      return prof_ctl_entries[i].fn(idx, oldp, oldlenp, newp, newlen);
  return ENOENT;
}
