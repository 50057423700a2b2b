/* exports.h -- prototypes of the exported names no system header declares
 * for us: glibc's internal __libc_* allocation names, C23's free_sized and
 * free_aligned_sized (glibc 2.36 has neither), and the C++ operators new
 * and delete under their mangled names (new.c is C). With these, every
 * exported function is checked against one declaration. */
#ifndef NALLOC_EXPORTS_H
#define NALLOC_EXPORTS_H

#include <malloc.h>
#include <stddef.h>

void free_sized(void *p, size_t size);
void free_aligned_sized(void *p, size_t align, size_t size);

void *__libc_malloc(size_t size);
void __libc_free(void *p);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t align, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);
int __posix_memalign(void **out, size_t align, size_t size);
struct mallinfo2 __libc_mallinfo2(void);
int __libc_mallopt(int param, int value);

/* operator new / new[] (size), nothrow, aligned, aligned nothrow */
void *_Znwm(size_t n);
void *_Znam(size_t n);
void *_ZnwmRKSt9nothrow_t(size_t n, const void *t);
void *_ZnamRKSt9nothrow_t(size_t n, const void *t);
void *_ZnwmSt11align_val_t(size_t n, size_t al);
void *_ZnamSt11align_val_t(size_t n, size_t al);
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *t);
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *t);
/* operator delete / delete[]: plain, nothrow, sized, aligned, sized aligned */
void _ZdlPv(void *p);
void _ZdaPv(void *p);
void _ZdlPvRKSt9nothrow_t(void *p, const void *t);
void _ZdaPvRKSt9nothrow_t(void *p, const void *t);
void _ZdlPvm(void *p, size_t n);
void _ZdaPvm(void *p, size_t n);
void _ZdlPvSt11align_val_t(void *p, size_t al);
void _ZdaPvSt11align_val_t(void *p, size_t al);
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *t);
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *t);
void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al);
void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al);

#endif
