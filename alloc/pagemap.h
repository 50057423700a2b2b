/* pagemap.h -- address → span, for any address nalloc handed out.
 *
 * A two-level radix tree over the 47-bit user address space: a static root
 * of 2^18 leaf pointers, each leaf covering 2^17 pages (512 MiB) and mapped
 * the first time an arena maps memory there. Reads take no lock: an entry
 * is a relaxed atomic pointer, written by the arena that owns the page. */
#ifndef NALLOC_PAGEMAP_H
#define NALLOC_PAGEMAP_H

#include "internal.h"

#define PM_ADDR_BITS 47
#define PM_LEAF_BITS 17
#define PM_ROOT_BITS (PM_ADDR_BITS - LG_PAGE - PM_LEAF_BITS)

struct span_s;
typedef _Atomic(struct span_s *) pm_leaf_t[(size_t)1 << PM_LEAF_BITS];
extern _Atomic(pm_leaf_t *) pm_root[(size_t)1 << PM_ROOT_BITS];

static inline struct span_s *pagemap_get(const void *p) {
  uintptr_t pn = (uintptr_t)p >> LG_PAGE;
  if (unlikely(pn >> (PM_ADDR_BITS - LG_PAGE))) return NULL;
  pm_leaf_t *leaf = atomic_load_explicit(&pm_root[pn >> PM_LEAF_BITS],
                                         memory_order_acquire);
  if (unlikely(leaf == NULL)) return NULL;
  return atomic_load_explicit(&(*leaf)[pn & (((uintptr_t)1 << PM_LEAF_BITS) - 1)],
                              memory_order_relaxed);
}

/* Makes sure leaves exist for [p, p+size); false if the OS refused. */
bool pagemap_reserve(const void *p, size_t size);
/* Sets the entry of the page holding p (the leaf must exist). */
void pagemap_set(const void *p, struct span_s *s);
/* Sets every page of [p, p+npages*PAGE). */
void pagemap_set_range(const void *p, size_t npages, struct span_s *s);

void pagemap_prefork(void);
void pagemap_postfork_parent(void);
void pagemap_postfork_child(void);

#endif
