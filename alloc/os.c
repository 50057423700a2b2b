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

void os_unmap(void *p, size_t size) { munmap(p, size); }

void os_purge(void *p, size_t size) { madvise(p, size, MADV_DONTNEED); }

uint64_t nalloc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
