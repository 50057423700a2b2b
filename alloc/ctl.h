/* ctl.h -- nalloc_ctl's tables: a name ('#' components match a decimal
 * index, passed to the handler in order) and its handler, with jemalloc
 * mallctl's contract for sizes and errors. */
#ifndef NALLOC_CTL_H
#define NALLOC_CTL_H

#include <errno.h>

#include "compiler.h"

typedef int (*ctl_fn_t)(const size_t *idx, void *oldp, size_t *oldlenp,
                        void *newp, size_t newlen);
typedef struct ctl_entry_s {
  const char *name;
  ctl_fn_t fn;
} ctl_entry_t;

/* Handler helpers: copy a value out / in with jemalloc's size checks. */
int ctl_out(void *oldp, size_t *oldlenp, const void *v, size_t len);
int ctl_in(void *newp, size_t newlen, void *v, size_t len);
#define CTL_READONLY()                  \
  do {                                  \
    if (newp != NULL || newlen != 0)    \
      return EPERM;                     \
  } while (0)

#endif
