/* override.c -- the names that make nalloc the process heap: the C and
 * glibc allocation API, glibc's internal __libc_* names (called by
 * libraries that want "the real malloc"), and mallinfo/mallopt. Only
 * libnalloc.so / libnalloc.a contain this file; libnalloc_np does not. */
#define _GNU_SOURCE /* stdlib.h: posix_memalign, aligned_alloc, valloc */
#include <stdio.h>
#include <stdlib.h>

#include "exports.h"
#define NAME(x) x
#include "api_impl.h"
#include "stats.h"

NALLOC_EXPORT struct mallinfo2 mallinfo2(void) { return stats_mallinfo2(); }

NALLOC_EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 m = stats_mallinfo2();
  struct mallinfo r = {.arena = (int)m.arena, .ordblks = (int)m.ordblks,
                       .smblks = (int)m.smblks, .hblks = (int)m.hblks,
                       .hblkhd = (int)m.hblkhd, .usmblks = (int)m.usmblks,
                       .fsmblks = (int)m.fsmblks, .uordblks = (int)m.uordblks,
                       .fordblks = (int)m.fordblks, .keepcost = (int)m.keepcost};
  return r;
}

/* glibc's tuning knobs do not apply to nalloc; the parameters glibc knows
 * are accepted (1) so programs that set them keep working, others refused
 * (0) as glibc refuses them. */
NALLOC_EXPORT int mallopt(int param, int value) {
  (void)value;
  return param >= -8 && param <= 1 ? 1 : 0;
}

NALLOC_EXPORT int malloc_info(int options, FILE *fp) {
  if (options != 0 || fp == NULL) {
    errno = EINVAL;
    return -1;
  }
  struct mallinfo2 m = stats_mallinfo2();
  fprintf(fp, "<malloc version=\"nalloc-1\">\n<total type=\"allocated\" size=\"%zu\"/>\n"
              "<total type=\"mapped\" size=\"%zu\"/>\n</malloc>\n",
          m.uordblks, m.arena + m.hblkhd);
  return 0;
}

NALLOC_EXPORT void *__libc_malloc(size_t size) { return entry_alloc(size, false); }
NALLOC_EXPORT void __libc_free(void *p) { entry_free(p, FN_FREE); }
NALLOC_EXPORT void *__libc_calloc(size_t n, size_t size) { return entry_calloc(n, size); }
NALLOC_EXPORT void *__libc_realloc(void *p, size_t size) {
  return entry_realloc(p, size, NALLOC_CALLER());
}
NALLOC_EXPORT void *__libc_memalign(size_t align, size_t size) {
  return aligned_common(align, size, ALIGNED_MEMALIGN, NALLOC_CALLER());
}
NALLOC_EXPORT void *__libc_valloc(size_t size) {
  return aligned_common(PAGE, size, ALIGNED_VALLOC, NALLOC_CALLER());
}
NALLOC_EXPORT void *__libc_pvalloc(size_t size) {
  return aligned_common(PAGE, size, ALIGNED_PVALLOC, NALLOC_CALLER());
}
NALLOC_EXPORT int __posix_memalign(void **out, size_t align, size_t size) {
  int saved = errno, err;
  void *p = entry_aligned(align, size, ALIGNED_POSIX, &err, NALLOC_CALLER());
  errno = saved;
  if (p == NULL) return err;
  *out = p;
  return 0;
}
NALLOC_EXPORT struct mallinfo2 __libc_mallinfo2(void) { return stats_mallinfo2(); }
NALLOC_EXPORT int __libc_mallopt(int param, int value) { return mallopt(param, value); }
