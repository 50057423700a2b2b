/* conf.h -- NALLOC_CONF: the type of an option row, and the parser.
 *
 * Every option is one row, in the module that owns its variable: the
 * parser, the error messages and the opt.* ctl names all come from the
 * rows. A module exports its rows as one conf_table_t declared in its
 * header (node.h: node_conf_table); conf.c lists the tables, so adding an
 * option is adding a row to its module's table. */
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

/* One module's rows. */
typedef struct conf_table_s {
  const conf_entry_t *rows;
  size_t n;
} conf_table_t;

extern bool opt_abort_conf;

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
