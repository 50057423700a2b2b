/* ctl.c -- nalloc_ctl: named values, with jemalloc mallctl's contract.
 *
 * The names are rows in the modules that own them (ctl.h); this file
 * lists the modules' tables, finds the row a name matches ('#' matches a
 * decimal index) and makes the checks the row asks for. opt.<key> names
 * come from the NALLOC_CONF rows themselves, so every option is readable
 * without a row of its own. */
#include "ctl.h"

#include <string.h>

#include "arena.h"
#include "background.h"
#include "boot.h"
#include "conf.h"
#include "node.h"
#include "size_class.h"
#include "stats.h"
#include "tsd.h"
#include "nalloc.h"
#include "../prof/prof_hook.h"

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

int ctl_in_opt(void *newp, size_t newlen, void *v, size_t len) {
  if (newp == NULL && newlen == 0) return 0;
  return ctl_in(newp, newlen, v, len); /* newlen without newp: EINVAL */
}

int ctl_rw_bool(_Atomic bool *v, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
  bool old = atomic_load(v);
  unsigned char byte = 0;
  int e = ctl_in_opt(newp, newlen, &byte, sizeof byte);
  if (e) return e;
  if (byte > 1) return EINVAL;
  e = ctl_out(oldp, oldlenp, &old, sizeof old);
  if (e) return e;
  if (newp != NULL) atomic_store(v, byte == 1);
  return 0;
}

static const ctl_row_t ctl_rows[] = {
    {"version", CTL_STR, CTL_RO, 0, .v.s = NALLOC_VERSION},
};
static const ctl_table_t ctl_own_table = {ctl_rows, ARRAY_LEN(ctl_rows)};

/* Every module's names. A module with names of its own for the first time
 * adds its table here. */
static const ctl_table_t *const ctl_tables[] = {
    &ctl_own_table,  &stats_ctl_table, &arena_ctl_table,     &sc_ctl_table,
    &node_ctl_table, &tsd_ctl_table,   &prof_ctl_table,      &prof_http_ctl_table,
};

/* Bytes of a value of type t. */
static size_t ctl_size(ctl_type_t t) {
  switch (t) {
  case CTL_BOOL: return sizeof(bool);
  case CTL_UNSIGNED: return sizeof(unsigned);
  case CTL_U32: return sizeof(uint32_t);
  case CTL_SIZE: return sizeof(size_t);
  case CTL_U64: return sizeof(uint64_t);
  case CTL_STR: return sizeof(const char *);
  case CTL_NONE: return 0;
  }
  return 0;
}

/* Reads a row's value: from its getter (converted to the row's type) or
 * its pointer (index i at ptr + i * stride). */
static int ctl_read(const ctl_row_t *r, size_t i, void *oldp, size_t *oldlenp) {
  size_t len = ctl_size(r->type);
  if (r->type == CTL_STR) return ctl_out(oldp, oldlenp, &r->v.s, len);
  if (r->get != NULL || r->get_i != NULL) {
    uint64_t x = r->get_i != NULL ? r->get_i(i) : r->get();
    union {
      bool b;
      unsigned u;
      uint32_t u32;
      size_t z;
      uint64_t u64;
    } v;
    switch (r->type) {
    case CTL_BOOL: v.b = x != 0; break;
    case CTL_UNSIGNED: v.u = (unsigned)x; break;
    case CTL_U32: v.u32 = (uint32_t)x; break;
    case CTL_SIZE: v.z = (size_t)x; break;
    default: v.u64 = x; break;
    }
    return ctl_out(oldp, oldlenp, &v, len);
  }
  const void *p = NULL;
  switch (r->type) {
  case CTL_BOOL: p = r->v.b; break;
  case CTL_UNSIGNED: p = r->v.u; break;
  case CTL_U32: p = r->v.u32; break;
  case CTL_SIZE: p = r->v.z; break;
  case CTL_U64: p = r->v.u64; break;
  case CTL_STR: case CTL_NONE: break; /* no pointer to a value */
  }
  nalloc_assert(p != NULL);
  return ctl_out(oldp, oldlenp, (const char *)p + i * (r->index ? r->index->stride : 0), len);
}

/* The checks the row asks for, in ctl.h's order, then its value or its
 * handler. */
static int ctl_call(const ctl_row_t *r, const size_t *idx, void *oldp, size_t *oldlenp,
                    void *newp, size_t newlen) {
  /* A well-formed row: at most one getter or handler, and a range for
   * its index unless its handler checks the index itself. */
  nalloc_assert((r->fn != NULL) + (r->get != NULL) + (r->get_i != NULL) <= 1);
  nalloc_assert(strchr(r->name, '#') == NULL || r->index != NULL || r->fn != NULL);
  nalloc_assert(r->get_i == NULL || r->index != NULL);
  if ((r->flags & CTL_PROF) && !opt_prof) return ENOENT;
  switch (r->access) {
  case CTL_RO:
    if (newp != NULL || newlen != 0) return EPERM;
    break;
  case CTL_WO:
    if (oldp != NULL || oldlenp != NULL) return EPERM;
    if (r->type == CTL_NONE && newp != NULL) return EPERM;
    break;
  case CTL_RW:
    break;
  }
  if (r->flags & CTL_SNAPSHOT) stats_ensure();
  const ctl_index_t *ix = r->index;
  if (ix != NULL && (idx[0] >= ix->max || (ix->count != NULL && idx[0] >= *ix->count)))
    return ENOENT;
  if (r->fn != NULL) return r->fn(idx, oldp, oldlenp, newp, newlen);
  if (r->access == CTL_RW) {
    nalloc_assert(r->type == CTL_BOOL && r->v.ab != NULL);
    return ctl_rw_bool(r->v.ab, oldp, oldlenp, newp, newlen);
  }
  nalloc_assert(r->access == CTL_RO);
  return ctl_read(r, ix != NULL ? idx[0] : 0, oldp, oldlenp);
}

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
  if (newp != NULL || newlen != 0) return EPERM; /* options are read-only */
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
  for (size_t t = 0; t < ARRAY_LEN(ctl_tables); t++)
    for (size_t i = 0; i < ctl_tables[t]->n; i++) {
      const ctl_row_t *r = &ctl_tables[t]->rows[i];
      if (ctl_match(r->name, name, idx, &nidx))
        return ctl_call(r, idx, oldp, oldlenp, newp, newlen);
    }
  return ENOENT;
}
