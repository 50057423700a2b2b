/* pagemap.h -- address → span, for any address nalloc handed out.
 *
 * A two-level radix tree over the 47-bit user address space: a static root
 * of 2^18 leaf entries, each leaf covering 2^17 pages (512 MiB) and mapped
 * the first time an arena maps memory there. Reads take no lock: an entry
 * is a relaxed atomic word, written by the arena that owns the page.
 *
 * Entries are offsets, so that a zero entry (an unused root slot, a page
 * no span claims) still reads as something valid: a root offset of 0 is
 * pm.leaf_none (all zero), a leaf offset of 0 is pm.span_none (a record no
 * check accepts). The fast path (pagemap_span) needs no NULL test;
 * pagemap_get turns pm.span_none back into NULL for everyone else. */
#ifndef NALLOC_PAGEMAP_H
#define NALLOC_PAGEMAP_H

#include "types.h"

#define PM_ADDR_BITS ADDR_BITS
#define PM_LEAF_BITS 17
#define PM_ROOT_BITS (PM_ADDR_BITS - LG_PAGE - PM_LEAF_BITS)

typedef _Atomic uintptr_t pm_leaf_t[(size_t)1 << PM_LEAF_BITS];
/* One object, so that the fast path reaches all three from one base. */
typedef struct pm_s {
  _Atomic uintptr_t root[(size_t)1 << PM_ROOT_BITS];
  pm_leaf_t leaf_none; /* never written: its pages stay the zero page */
  span_t span_none;
} pm_t;
extern pm_t pm;

/* The span of p, p below 2^PM_ADDR_BITS: pm.span_none if none. */
static NALLOC_ALWAYS_INLINE span_t *pagemap_span(const void *p) {
  uintptr_t pn = (uintptr_t)p >> LG_PAGE;
  uintptr_t leaf = atomic_load_explicit(&pm.root[pn >> PM_LEAF_BITS], memory_order_acquire);
  /* the map's address plus the root entry in a register of their own
   * (the empty asm: else the compiler adds the entry's offset to the
   * root entry and then the map's address, two adds), so that the entry's
   * load adds the leaf's place in the map and the entry's offset itself:
   * one add, and no more latency than the two (a three-part lea would
   * take two cycles) */
  uintptr_t lb = (uintptr_t)&pm + leaf;
  __asm__("" : "+r"(lb));
  const _Atomic uintptr_t *l = (const _Atomic uintptr_t *)(lb + offsetof(pm_t, leaf_none));
  uintptr_t e = load_rlx(&l[pn & (((uintptr_t)1 << PM_LEAF_BITS) - 1)]);
  return (span_t *)((uintptr_t)&pm.span_none + e);
}

/* Whether p can be looked up: inside the page map's range (the root
 * index, which the lookup computes anyway, is in bounds). NULL passes and
 * finds pm.span_none: page 0 is never a span. */
static NALLOC_ALWAYS_INLINE bool pagemap_covers(const void *p) {
  return ((uintptr_t)p >> (LG_PAGE + PM_LEAF_BITS)) < ((uintptr_t)1 << PM_ROOT_BITS);
}

/* The span of any address, or NULL. */
static inline span_t *pagemap_get(const void *p) {
  if (unlikely((uintptr_t)p >> PM_ADDR_BITS)) return NULL;
  span_t *s = pagemap_span(p);
  return s != &pm.span_none ? s : NULL;
}

/* Makes sure leaves exist for [p, p+size); false if the OS refused. */
bool pagemap_reserve(const void *p, size_t size);
/* Sets the entry of the page holding p (the leaf must exist). */
void pagemap_set(const void *p, span_t *s);
/* Sets every page of [p, p+npages*PAGE). */
void pagemap_set_range(const void *p, size_t npages, span_t *s);
/* Sets the first and the last page of [p, p+npages*PAGE) (one entry when
 * npages is 1): how free runs and large blocks are found, by their start
 * and, for coalescing, by their end. */
void pagemap_set_ends(const void *p, size_t npages, span_t *s);

void pagemap_prefork(void);
void pagemap_postfork_parent(void);
void pagemap_postfork_child(void);

#endif
