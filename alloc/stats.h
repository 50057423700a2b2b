/* stats.h -- statistics snapshots: refreshed on `epoch`, read by nalloc_ctl,
 * malloc_stats, mallinfo and stats_print. */
#ifndef NALLOC_STATS_H
#define NALLOC_STATS_H

#include <malloc.h>

#include "arena.h"
#include "conf.h"
#include "ctl.h"

#define STATS_MAX_NODES 64

extern bool opt_stats_print; /* print the statistics at exit */
extern const conf_table_t stats_conf_table;
/* epoch, stats.* and numa.node.<i>.*: the snapshot. */
extern const ctl_table_t stats_ctl_table;

typedef struct stats_s {
  uint64_t epoch;
  size_t allocated, active, dirty, mapped, metadata, resident;
  uint64_t nmalloc, ndalloc, npurged;
  arena_stats_t arena[ARENAS_MAX];
  struct {
    size_t allocated, active, resident, mapped;
    unsigned narenas;
  } node[STATS_MAX_NODES];
} stats_t;

/* The snapshot as of the last epoch (taken on first use if none). */
extern stats_t stats_snapshot;
void stats_refresh(void);
void stats_ensure(void);
/* A fresh snapshot into *out (for malloc_stats and mallinfo). */
void stats_collect(stats_t *out);
/* Prints the statistics with nalloc_log (malloc_stats, stats_print). */
void stats_print(void);
struct mallinfo2 stats_mallinfo2(void);
void stats_prefork(void);
void stats_postfork_parent(void);
void stats_postfork_child(void);

#endif
