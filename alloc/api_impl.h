/* api_impl.h -- the public entry points, written once and instantiated
 * twice: with NAME(x) = nalloc_##x in api.c (always built) and with
 * NAME(x) = x in override.c (the library that replaces malloc).
 * Each function passes its own return address to the profiler. */
#include <malloc.h>

#include "boot.h"
#include "entry.h"
#include "stats.h"

NALLOC_EXPORT void *NAME(malloc)(size_t size) { return entry_alloc(size, false); }

NALLOC_EXPORT void NAME(free)(void *p) { entry_free(p, FN_FREE); }

NALLOC_EXPORT void *NAME(calloc)(size_t n, size_t size) { return entry_calloc(n, size); }

NALLOC_EXPORT void *NAME(realloc)(void *p, size_t size) {
  return entry_realloc(p, size, NALLOC_CALLER());
}

NALLOC_EXPORT void *NAME(reallocarray)(void *p, size_t n, size_t size) {
  return entry_reallocarray(p, n, size, NALLOC_CALLER());
}

NALLOC_EXPORT int NAME(posix_memalign)(void **out, size_t align, size_t size) {
  int saved = errno, err;
  void *p = entry_aligned(align, size, ALIGNED_POSIX, &err, NALLOC_CALLER());
  /* The result is the error; errno is left as it was on EINVAL and set on
   * ENOMEM, as glibc does (glibc's tst-malloc-thread-fail checks both). */
  errno = err == ENOMEM ? ENOMEM : saved;
  if (p == NULL) return err;
  *out = p;
  return 0;
}

static inline void *NAME(aligned_common)(size_t align, size_t size, int kind,
                                         const void *caller) {
  int err;
  void *p = entry_aligned(align, size, kind, &err, caller);
  if (p == NULL) errno = err;
  return p;
}

NALLOC_EXPORT void *NAME(aligned_alloc)(size_t align, size_t size) {
  return NAME(aligned_common)(align, size, ALIGNED_C11, NALLOC_CALLER());
}

NALLOC_EXPORT void *NAME(memalign)(size_t align, size_t size) {
  return NAME(aligned_common)(align, size, ALIGNED_MEMALIGN, NALLOC_CALLER());
}

NALLOC_EXPORT void *NAME(valloc)(size_t size) {
  return NAME(aligned_common)(PAGE, size, ALIGNED_VALLOC, NALLOC_CALLER());
}

NALLOC_EXPORT void *NAME(pvalloc)(size_t size) {
  return NAME(aligned_common)(PAGE, size, ALIGNED_PVALLOC, NALLOC_CALLER());
}

NALLOC_EXPORT size_t NAME(malloc_usable_size)(void *p) { return entry_usable_size(p); }

NALLOC_EXPORT void NAME(free_sized)(void *p, size_t size) {
  (void)size;
  entry_free(p, FN_FREE);
}

NALLOC_EXPORT void NAME(free_aligned_sized)(void *p, size_t align, size_t size) {
  (void)align;
  (void)size;
  entry_free(p, FN_FREE);
}

NALLOC_EXPORT int NAME(malloc_trim)(size_t pad) { return entry_trim(pad); }

NALLOC_EXPORT void NAME(malloc_stats)(void) {
  nalloc_boot_discover(); /* the real nodes and arenas */
  stats_print();
}
