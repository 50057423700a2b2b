/* conf.h -- NALLOC_CONF: the option tables and the allocator's options.
 *
 * Every option is one row; the parser, the error messages and the opt.*
 * ctl names all come from the rows, so a module adds an option by adding
 * a row. */
#ifndef NALLOC_CONF_H
#define NALLOC_CONF_H

#include <sys/types.h>

#include "compiler.h"

typedef enum {
  CONF_BOOL,     /* bool: true/false */
  CONF_UNSIGNED, /* unsigned, in [min, max] */
  CONF_SIZE,     /* size_t, in [min, max]; accepts k/m/g suffixes */
  CONF_SSIZE,    /* ssize_t, in [min, max] */
  CONF_STR,      /* char[strcap], any text without ',' */
  CONF_ENUM,     /* unsigned index into choices (NULL-terminated) */
  CONF_SIGNAL,   /* int signal number: 12, USR2 or SIGUSR2; 0 = off */
} conf_type_t;

typedef struct conf_entry_s {
  const char *name;
  conf_type_t type;
  void *ptr;
  int64_t min, max;
  const char *const *choices; /* CONF_ENUM */
  size_t strcap;              /* CONF_STR */
  const char *help;           /* one line for README/--help */
} conf_entry_t;

extern unsigned opt_narenas;          /* 0: nodes * narenas_per_node */
extern unsigned opt_narenas_per_node; /* 0: CPUs of the node */
extern bool opt_numa;                 /* bind arenas and threads to nodes */
extern unsigned opt_numa_nodes;       /* >0: pretend this many nodes */
extern bool opt_tcache;
extern size_t opt_tcache_max;
extern ssize_t opt_dirty_decay_ms;
extern ssize_t opt_muzzy_decay_ms;
extern bool opt_abort_conf;
extern bool opt_stats_print;

/* Parses NALLOC_CONF (unless AT_SECURE); never allocates. */
void conf_boot(void);
/* Applies `key:value,...` to the options; one line on stderr per problem
 * (at most 16, then one line counting the rest). False if there was any
 * problem. Never allocates, never aborts. */
bool conf_parse(const char *s);
/* Row i of all the options, NULL past the last (for the fuzz target's
 * invariants: every option within what its row accepts). */
const conf_entry_t *conf_row(size_t i);
/* Finds the row for an option name (for opt.* ctl names). */
const conf_entry_t *conf_find(const char *name, size_t len);

#endif
