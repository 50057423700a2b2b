/* new.c -- C++ operator new and delete, every form (plain, array, nothrow,
 * sized, aligned), written in C under their mangled names so the library
 * needs no libstdc++ of its own. Failure follows the standard: call the
 * new-handler until it gives up, then throw std::bad_alloc through
 * libstdc++'s own thrower (present in every C++ program). This file is
 * built with -fexceptions so the exception can pass through it. */
#include <stdlib.h>

#include "entry.h"

typedef void (*new_handler_t)(void);
extern new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

static NALLOC_NOINLINE void *new_fail(size_t size, size_t align, bool nothrow,
                                      const void *caller) {
  for (;;) {
    new_handler_t h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (h == NULL) {
      if (nothrow) return NULL;
      if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
      nalloc_fatal("operator new(%zu): out of memory and no C++ runtime to throw", size);
    }
    h();
    void *p = align > 16 ? malloc_slow(size, align, false, caller, NULL)
                         : entry_alloc(size, false, caller);
    if (p) return p;
  }
}

static NALLOC_ALWAYS_INLINE void *new_impl(size_t size, bool nothrow, const void *caller) {
  void *p = entry_alloc(size, false, caller);
  return likely(p != NULL) ? p : new_fail(size, 0, nothrow, caller);
}

static NALLOC_ALWAYS_INLINE void *new_aligned(size_t size, size_t align, bool nothrow,
                                              const void *caller) {
  void *p = align > 16 ? malloc_slow(size, align, false, caller, NULL)
                       : entry_alloc(size, false, caller);
  return likely(p != NULL) ? p : new_fail(size, align, nothrow, caller);
}

#define NEW(sym, ...) NALLOC_EXPORT void *sym(__VA_ARGS__)
#define DEL(sym, ...) NALLOC_EXPORT void sym(__VA_ARGS__)

/* operator new(size_t), new[](size_t), and their nothrow_t forms */
NEW(_Znwm, size_t n) { return new_impl(n, false, NALLOC_CALLER()); }
NEW(_Znam, size_t n) { return new_impl(n, false, NALLOC_CALLER()); }
NEW(_ZnwmRKSt9nothrow_t, size_t n, const void *t) {
  (void)t;
  return new_impl(n, true, NALLOC_CALLER());
}
NEW(_ZnamRKSt9nothrow_t, size_t n, const void *t) {
  (void)t;
  return new_impl(n, true, NALLOC_CALLER());
}
/* aligned: new(size_t, align_val_t) and friends */
NEW(_ZnwmSt11align_val_t, size_t n, size_t al) {
  return new_aligned(n, al, false, NALLOC_CALLER());
}
NEW(_ZnamSt11align_val_t, size_t n, size_t al) {
  return new_aligned(n, al, false, NALLOC_CALLER());
}
NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, size_t n, size_t al, const void *t) {
  (void)t;
  return new_aligned(n, al, true, NALLOC_CALLER());
}
NEW(_ZnamSt11align_val_tRKSt9nothrow_t, size_t n, size_t al, const void *t) {
  (void)t;
  return new_aligned(n, al, true, NALLOC_CALLER());
}

/* delete, delete[]: plain, nothrow, sized, aligned, sized+aligned */
DEL(_ZdlPv, void *p) { entry_free(p); }
DEL(_ZdaPv, void *p) { entry_free(p); }
DEL(_ZdlPvRKSt9nothrow_t, void *p, const void *t) { (void)t; entry_free(p); }
DEL(_ZdaPvRKSt9nothrow_t, void *p, const void *t) { (void)t; entry_free(p); }
DEL(_ZdlPvm, void *p, size_t n) { (void)n; entry_free(p); }
DEL(_ZdaPvm, void *p, size_t n) { (void)n; entry_free(p); }
DEL(_ZdlPvSt11align_val_t, void *p, size_t al) { (void)al; entry_free(p); }
DEL(_ZdaPvSt11align_val_t, void *p, size_t al) { (void)al; entry_free(p); }
DEL(_ZdlPvSt11align_val_tRKSt9nothrow_t, void *p, size_t al, const void *t) {
  (void)al, (void)t;
  entry_free(p);
}
DEL(_ZdaPvSt11align_val_tRKSt9nothrow_t, void *p, size_t al, const void *t) {
  (void)al, (void)t;
  entry_free(p);
}
DEL(_ZdlPvmSt11align_val_t, void *p, size_t n, size_t al) { (void)n, (void)al; entry_free(p); }
DEL(_ZdaPvmSt11align_val_t, void *p, size_t n, size_t al) { (void)n, (void)al; entry_free(p); }
