/* nalloc.h -- public API of nalloc, a thread-caching malloc with a built-in
 * heap profiler.
 *
 * Linking -lnalloc (or LD_PRELOAD=libnalloc.so) replaces malloc and friends.
 * The nalloc_-prefixed names below are the same entry points under names
 * that never collide, for code that wants to call nalloc explicitly.
 * nalloc_ctl reads and writes named settings and statistics, with the same
 * contract as jemalloc's mallctl. */
#ifndef NALLOC_H
#define NALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NALLOC_VERSION_MAJOR 0
#define NALLOC_VERSION_MINOR 1
#define NALLOC_VERSION_PATCH 0
#define NALLOC_VERSION "0.1.0"

/* Returns 0 on success or an errno value: ENOENT (unknown name), EINVAL
 * (wrong size or value; a bool, one byte, other than 0 or 1), EPERM
 * (read-only / write-only misuse), EAGAIN (thread.prof.*: the thread's
 * profiler record cannot be made), ENOMEM (arena.<i>.purge: the arena
 * cannot be made), EFAULT or the OS error (an action such as prof.dump
 * failed). When oldp is non-NULL
 * the current value is copied there (*oldlenp must be its exact size); when
 * newp is non-NULL, newlen must be the exact size of the new value. */
int nalloc_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
               size_t newlen);

void *nalloc_malloc(size_t size);
void nalloc_free(void *ptr);
void *nalloc_calloc(size_t n, size_t size);
void *nalloc_realloc(void *ptr, size_t size);
void *nalloc_reallocarray(void *ptr, size_t n, size_t size);
int nalloc_posix_memalign(void **out, size_t align, size_t size);
void *nalloc_aligned_alloc(size_t align, size_t size);
void *nalloc_memalign(size_t align, size_t size);
void *nalloc_valloc(size_t size);
void *nalloc_pvalloc(size_t size);
size_t nalloc_malloc_usable_size(void *ptr);
void nalloc_free_sized(void *ptr, size_t size);
void nalloc_free_aligned_sized(void *ptr, size_t align, size_t size);
int nalloc_malloc_trim(size_t pad);
void nalloc_malloc_stats(void);

#ifdef __cplusplus
}
#endif
#endif
