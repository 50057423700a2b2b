/* pagemap.c -- leaf allocation and writes for the page map. */
#include "pagemap.h"

#include "lock.h"
#include "os.h"

NALLOC_BIG_BSS pm_t pm;
static nlock_t pm_lock = NLOCK_INITIALIZER(LOCK_PAGEMAP);
/* The first leaf is in .bss, mapped by the loader with the library: a
 * process whose heap fits in one 512 MiB range (almost every short one)
 * makes no system call for the page map; pages of it no one writes stay
 * unfaulted. */
NALLOC_BIG_BSS static pm_leaf_t pm_first_leaf;
static bool pm_first_used;

bool pagemap_reserve(const void *p, size_t size) {
  uintptr_t first = (uintptr_t)p >> LG_PAGE;
  uintptr_t last = ((uintptr_t)p + size - 1) >> LG_PAGE;
  if (last >> (PM_ADDR_BITS - LG_PAGE)) return false;
  for (uintptr_t i = first >> PM_LEAF_BITS; i <= last >> PM_LEAF_BITS; i++) {
    /* Read by adding 0 (lock xadd, where a fetch_or whose result is used
     * is a load and a cmpxchg loop): the first access to the entry's page
     * is then a write, one page fault, where a load maps the zero page and
     * the store below copies it, two. A process's first range touches
     * that page first here. */
    if (atomic_fetch_add_explicit(&pm.root[i], 0, memory_order_acquire)) continue;
    nlock_lock(&pm_lock);
    if (!atomic_load_explicit(&pm.root[i], memory_order_relaxed)) {
      pm_leaf_t *leaf = &pm_first_leaf;
      if (pm_first_used) leaf = os_map(sizeof(pm_leaf_t));
      pm_first_used = true;
      if (leaf == NULL) {
        nlock_unlock(&pm_lock);
        return false;
      }
      atomic_store_explicit(&pm.root[i], (uintptr_t)leaf - (uintptr_t)pm.leaf_none,
                            memory_order_release);
    }
    nlock_unlock(&pm_lock);
  }
  return true;
}

void pagemap_set(const void *p, span_t *s) {
  uintptr_t pn = (uintptr_t)p >> LG_PAGE;
  _Atomic uintptr_t *leaf = (_Atomic uintptr_t *)(
      (uintptr_t)pm.leaf_none + load_rlx(&pm.root[pn >> PM_LEAF_BITS]));
  nalloc_assert(leaf != pm.leaf_none);
  store_rlx(&leaf[pn & (((uintptr_t)1 << PM_LEAF_BITS) - 1)],
            (uintptr_t)(s ? s : &pm.span_none) - (uintptr_t)&pm.span_none);
}

void pagemap_set_range(const void *p, size_t npages, span_t *s) {
  for (size_t i = 0; i < npages; i++)
    pagemap_set((const char *)p + i * PAGE, s);
}

void pagemap_set_ends(const void *p, size_t npages, span_t *s) {
  pagemap_set(p, s);
  if (npages > 1) pagemap_set((const char *)p + (npages - 1) * PAGE, s);
}

void pagemap_prefork(void) { nlock_prefork(&pm_lock); }
void pagemap_postfork_parent(void) { nlock_postfork_parent(&pm_lock); }
/* A leaf mapped but not yet published by an interrupted thread is lost to
 * the child; the root is never inconsistent. */
void pagemap_postfork_child(void) { (void)nlock_postfork_child(&pm_lock); }
