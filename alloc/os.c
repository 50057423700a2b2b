/* os.c -- the OS layer: mapping, unmapping and purging pages, and time.
 * Everything above asks for memory here and nowhere else. */
#include "internal.h"

#include <sys/mman.h>
#include <time.h>

void *os_map(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  return p;
}

/* Over-map by `align` and trim both ends: the kernel only promises pages. */
void *os_map_aligned(size_t size, size_t align) {
  if (align <= PAGE) return os_map(size);
  size_t total = size + align;
  if (total < size) {
    errno = ENOMEM;
    return NULL;
  }
  char *p = os_map(total);
  if (p == NULL) return NULL;
  uintptr_t a = ALIGN_UP((uintptr_t)p, align);
  size_t lead = a - (uintptr_t)p, trail = total - lead - size;
  if (lead) munmap(p, lead);
  if (trail) munmap((char *)a + size, trail);
  return (void *)a;
}

void os_unmap(void *p, size_t size) { munmap(p, size); }

void os_purge(void *p, size_t size) { madvise(p, size, MADV_DONTNEED); }

uint64_t nalloc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
