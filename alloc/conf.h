/* conf.h -- the allocator's NALLOC_CONF options (values after parsing). */
#ifndef NALLOC_CONF_H
#define NALLOC_CONF_H

#include "internal.h"

extern unsigned opt_narenas;          /* 0: nodes * narenas_per_node */
extern unsigned opt_narenas_per_node; /* 0: CPUs of the node */
extern bool opt_numa;                 /* bind arenas and threads to nodes */
extern unsigned opt_numa_nodes;       /* >0: pretend this many nodes */
extern bool opt_tcache;
extern size_t opt_tcache_max;
extern ssize_t opt_dirty_decay_ms;
extern bool opt_abort_conf;
extern bool opt_stats_print;

/* Parses NALLOC_CONF (unless AT_SECURE); never allocates. */
void conf_boot(void);
/* Finds the row for an option name (for opt.* ctl names). */
const conf_entry_t *conf_find(const char *name, size_t len);

#endif
