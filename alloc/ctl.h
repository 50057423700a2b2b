/* ctl.h -- nalloc_ctl's rows, with jemalloc mallctl's contract for sizes
 * and errors.
 *
 * A name is one row of data in the module that owns what it reads: the
 * name ('#' components match a decimal index), the type of its value,
 * who may read or write it, and where the value comes from: a pointer to
 * it, a getter, or, for the few names that need code (epoch, purge,
 * dumps), a handler. Each module exports its rows as one ctl_table_t
 * declared in its header; ctl.c lists those tables, walks them and makes
 * every check a row asks for, in this order:
 *   needs-prof (ENOENT with opt.prof off), access (EPERM), snapshot,
 *   index range (ENOENT), then the value or the handler.
 * Adding a name is adding a row to its module's table. */
#ifndef NALLOC_CTL_H
#define NALLOC_CTL_H

#include <errno.h>

#include "compiler.h"

typedef enum {
  CTL_BOOL,     /* bool */
  CTL_UNSIGNED, /* unsigned */
  CTL_U32,      /* uint32_t */
  CTL_SIZE,     /* size_t */
  CTL_U64,      /* uint64_t */
  CTL_STR,      /* const char *: the address of a NUL-terminated string */
  CTL_NONE,     /* no value: a command (write-only, and nothing may be written) */
} ctl_type_t;

typedef enum {
  CTL_RO, /* anything to write: EPERM */
  CTL_WO, /* a buffer to read into: EPERM */
  CTL_RW,
} ctl_access_t;

enum {
  CTL_PROF = 1,     /* ENOENT unless opt.prof, as jemalloc's prof.* names */
  CTL_SNAPSHOT = 2, /* takes the statistics snapshot first if there is none
                       (stats_ensure): every statistics name does, so the
                       first one read fixes the snapshot until `epoch` */
};

/* The range of a '#' index: below max, and below *count when count is set
 * (else ENOENT); a pointer row's value for index i is at ptr + i*stride. */
typedef struct ctl_index_s {
  const unsigned *count;
  size_t max;
  size_t stride;
} ctl_index_t;

/* A handler: called after the row's checks, with the '#' indices. */
typedef int (*ctl_fn_t)(const size_t *idx, void *oldp, size_t *oldlenp,
                        void *newp, size_t newlen);

typedef struct ctl_row_s {
  const char *name;
  ctl_type_t type;
  ctl_access_t access;
  unsigned flags; /* CTL_PROF, CTL_SNAPSHOT */
  /* Where the value comes from: one of v, get, get_i and fn. */
  union {         /* a pointer to the value, of the row's type: */
    const bool *b;
    _Atomic bool *ab; /* CTL_RW: read, then written (ctl_rw_bool) */
    const unsigned *u;
    const uint32_t *u32;
    const size_t *z;
    const uint64_t *u64;
    const char *s; /* CTL_STR: the string itself */
  } v;
  uint64_t (*get)(void);       /* the value, converted to the row's type */
  uint64_t (*get_i)(size_t i); /* the same, for index i ('#') */
  ctl_fn_t fn;
  const ctl_index_t *index; /* with '#' (except for a handler, which checks) */
} ctl_row_t;

typedef struct ctl_table_s {
  const ctl_row_t *rows;
  size_t n;
} ctl_table_t;

/* Handler helpers: copy a value out / in with jemalloc's size checks. */
int ctl_out(void *oldp, size_t *oldlenp, const void *v, size_t len);
int ctl_in(void *newp, size_t newlen, void *v, size_t len);
/* ctl_in for a value that may be left out: nothing given (newp NULL,
 * newlen 0) is 0 with *v unchanged. */
int ctl_in_opt(void *newp, size_t newlen, void *v, size_t len);
/* Reads the old value of a bool, then writes the new one, with mallctl's
 * size checks done before anything changes. The new value must be 0 or 1:
 * it is read as a byte, since any other byte in a _Bool is undefined
 * behaviour and would read back as itself. */
int ctl_rw_bool(_Atomic bool *v, void *oldp, size_t *oldlenp, void *newp,
                size_t newlen);

#endif
