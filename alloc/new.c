/* new.c -- C++ operator new and delete, every form (plain, array, nothrow,
 * sized, aligned), written in C under their mangled names so the library
 * needs no libstdc++ of its own. Failure follows the standard: call the
 * new-handler until it gives up, then throw std::bad_alloc through
 * libstdc++'s own thrower (present in every C++ program). This file is
 * built with -fexceptions so the exception can pass through it. */
#include <stdlib.h>

#include "entry.h"
#include "exports.h"
#include "log.h"

typedef void (*new_handler_t)(void);
extern new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* Everything but the fast path: the allocator's slow path, then the
 * new-handler loop. `frame` is the exported operator's frame pointer (the
 * profiler reads the caller from it). */
static NALLOC_NOINLINE void *new_slow(size_t size, size_t align, bool nothrow,
                                      const void *frame) {
  const void *caller = ((void *const *)frame)[1];
  for (;;) {
    void *p = malloc_slow(size, align > 16 ? align : 0, false, caller, frame);
    if (likely(p != NULL)) return p;
    new_handler_t h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (h == NULL) {
      if (nothrow) return NULL;
      if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
      nalloc_fatal("operator new(%zu): out of memory and no C++ runtime to throw", size);
    }
    h();
  }
}

/* A dry current span (entry_alloc_try): the heap's next slot, else (no
 * memory) the new handler's loop. Reached by a tail call, so its frame's
 * return address is the program's. */
static NALLOC_NOINLINE void *new_dry(size_t size, int64_t cd, bool nothrow) {
  void *p = malloc_dry(size, cd, false);
  if (likely(p != NULL)) return p;
  return new_slow(size, 0, nothrow, __builtin_frame_address(0));
}

static NALLOC_ALWAYS_INLINE void *new_impl(size_t size, size_t align, bool nothrow) {
  bool dry = false;
  int64_t cd = 0;
  void *p = align <= 16 ? entry_alloc_try(size, false, &dry, &cd) : NULL;
  if (likely(p != NULL)) return p;
  if (dry) return new_dry(size, cd, nothrow);
  return new_slow(size, align, nothrow, __builtin_frame_address(0));
}

#define NEW(sym, ...) NALLOC_EXPORT void *sym(__VA_ARGS__)
#define DEL(sym, ...) NALLOC_EXPORT void sym(__VA_ARGS__)

/* operator new(size_t), new[](size_t), and their nothrow_t forms */
NEW(_Znwm, size_t n) { return new_impl(n, 0, false); }
NEW(_Znam, size_t n) { return new_impl(n, 0, false); }
NEW(_ZnwmRKSt9nothrow_t, size_t n, const void *t) {
  (void)t;
  return new_impl(n, 0, true);
}
NEW(_ZnamRKSt9nothrow_t, size_t n, const void *t) {
  (void)t;
  return new_impl(n, 0, true);
}
/* aligned: new(size_t, align_val_t) and friends */
NEW(_ZnwmSt11align_val_t, size_t n, size_t al) {
  return new_impl(n, al, false);
}
NEW(_ZnamSt11align_val_t, size_t n, size_t al) {
  return new_impl(n, al, false);
}
NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, size_t n, size_t al, const void *t) {
  (void)t;
  return new_impl(n, al, true);
}
NEW(_ZnamSt11align_val_tRKSt9nothrow_t, size_t n, size_t al, const void *t) {
  (void)t;
  return new_impl(n, al, true);
}

/* delete, delete[]: plain, nothrow, sized, aligned, sized+aligned */
DEL(_ZdlPv, void *p) { entry_free(p, FN_DELETE); }
DEL(_ZdaPv, void *p) { entry_free(p, FN_DELETE); }
DEL(_ZdlPvRKSt9nothrow_t, void *p, const void *t) { (void)t; entry_free(p, FN_DELETE); }
DEL(_ZdaPvRKSt9nothrow_t, void *p, const void *t) { (void)t; entry_free(p, FN_DELETE); }
DEL(_ZdlPvm, void *p, size_t n) { (void)n; entry_free(p, FN_DELETE); }
DEL(_ZdaPvm, void *p, size_t n) { (void)n; entry_free(p, FN_DELETE); }
DEL(_ZdlPvSt11align_val_t, void *p, size_t al) { (void)al; entry_free(p, FN_DELETE); }
DEL(_ZdaPvSt11align_val_t, void *p, size_t al) { (void)al; entry_free(p, FN_DELETE); }
DEL(_ZdlPvSt11align_val_tRKSt9nothrow_t, void *p, size_t al, const void *t) {
  (void)al, (void)t;
  entry_free(p, FN_DELETE);
}
DEL(_ZdaPvSt11align_val_tRKSt9nothrow_t, void *p, size_t al, const void *t) {
  (void)al, (void)t;
  entry_free(p, FN_DELETE);
}
DEL(_ZdlPvmSt11align_val_t, void *p, size_t n, size_t al) { (void)n, (void)al; entry_free(p, FN_DELETE); }
DEL(_ZdaPvmSt11align_val_t, void *p, size_t n, size_t al) { (void)n, (void)al; entry_free(p, FN_DELETE); }
