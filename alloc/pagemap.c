/* pagemap.c -- leaf allocation and writes for the page map. */
#include "pagemap.h"

_Atomic(pm_leaf_t *) pm_root[(size_t)1 << PM_ROOT_BITS];
static nlock_t pm_lock = NLOCK_INITIALIZER;

bool pagemap_reserve(const void *p, size_t size) {
  uintptr_t first = (uintptr_t)p >> LG_PAGE;
  uintptr_t last = ((uintptr_t)p + size - 1) >> LG_PAGE;
  if (last >> (PM_ADDR_BITS - LG_PAGE)) return false;
  for (uintptr_t i = first >> PM_LEAF_BITS; i <= last >> PM_LEAF_BITS; i++) {
    if (atomic_load_explicit(&pm_root[i], memory_order_acquire)) continue;
    nlock_lock(&pm_lock);
    if (!atomic_load_explicit(&pm_root[i], memory_order_relaxed)) {
      pm_leaf_t *leaf = os_map(sizeof(pm_leaf_t));
      if (leaf == NULL) {
        nlock_unlock(&pm_lock);
        return false;
      }
      atomic_store_explicit(&pm_root[i], leaf, memory_order_release);
    }
    nlock_unlock(&pm_lock);
  }
  return true;
}

void pagemap_set(const void *p, struct span_s *s) {
  uintptr_t pn = (uintptr_t)p >> LG_PAGE;
  pm_leaf_t *leaf = atomic_load_explicit(&pm_root[pn >> PM_LEAF_BITS],
                                         memory_order_relaxed);
  atomic_store_explicit(&(*leaf)[pn & (((uintptr_t)1 << PM_LEAF_BITS) - 1)], s,
                        memory_order_relaxed);
}

void pagemap_set_range(const void *p, size_t npages, struct span_s *s) {
  for (size_t i = 0; i < npages; i++)
    pagemap_set((const char *)p + i * PAGE, s);
}

void pagemap_prefork(void) { nlock_prefork(&pm_lock); }
void pagemap_postfork_parent(void) { nlock_postfork_parent(&pm_lock); }
void pagemap_postfork_child(void) { nlock_postfork_child(&pm_lock); }
