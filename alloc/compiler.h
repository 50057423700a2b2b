/* compiler.h -- compiler helpers every file of nalloc uses: branch hints,
 * function attributes, relaxed atomics, alignment, and nalloc_assert.
 *
 * nalloc_assert states an invariant the code relies on. It is checked in
 * the debug build (cmake -DNALLOC_DEBUG=ON) and costs nothing otherwise;
 * its argument must have no side effects. */
#ifndef NALLOC_COMPILER_H
#define NALLOC_COMPILER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define NALLOC_EXPORT __attribute__((visibility("default")))
#define NALLOC_NOINLINE __attribute__((noinline))
#define NALLOC_COLD __attribute__((noinline, cold))
#define NALLOC_ALWAYS_INLINE inline __attribute__((always_inline))
/* For code that reads other frames' stack words (the unwinders): ASan
 * poisons red zones between a frame's locals, which a stack walk may read. */
#define NALLOC_NO_ASAN __attribute__((no_sanitize_address))
/* A large zero-initialised array (the page-map root, the first metadata
 * chunk): placed in .lbss, after every other variable, so that the small
 * globals a process touches at start-up share a few pages instead of each
 * sitting between two big arrays on a page of its own (a page first
 * touched costs a fault, often two: read, then written). */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define NALLOC_BIG_BSS __attribute__((section(".lbss")))
#else
#define NALLOC_BIG_BSS
#endif

#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((uintptr_t)(a)-1))
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Relaxed loads and stores: for fields one thread writes and others may
 * read (a racy read is fine, a torn one is not). On x86-64 they are plain
 * moves. */
#define load_rlx(p) atomic_load_explicit((p), memory_order_relaxed)
#define store_rlx(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

/* A racy read of a word other threads write, where any value read is
 * handled (free's owner check): a plain load, so the compiler can fold it
 * into the compare. Under TSan it is a relaxed atomic load instead, so the
 * race it knows about is not reported. */
#if defined(__SANITIZE_THREAD__)
#define load_racy(p) atomic_load_explicit((p), memory_order_relaxed)
#else
#define load_racy(p) (*(const __typeof__(atomic_load_explicit((p), memory_order_relaxed)) *)(p))
#endif

/* tzcnt of a non-zero word, as a 64-bit value: no sign extension, and no
 * false-dependency clearing (the encoding runs as bsf where tzcnt is
 * unknown, with the same result for a non-zero input). */
static inline uint64_t ctz64(uint64_t b) {
  uint64_t r;
  __asm__("rep bsf %1, %0" : "=r"(r) : "rm"(b) : "cc");
  return r;
}

/* Bit (i mod 64) of x: bt takes the count mod 64 itself (so the caller's
 * register needs no mask, and no copy where it tests another word too). */
static inline bool bt64(uint64_t x, uint64_t i) {
  bool c;
  __asm__("bt %2, %1" : "=@ccc"(c) : "r"(x), "r"(i));
  return c;
}

/* x with bit (i mod 64) set: bts takes the count mod 64 itself, so no
 * `and` of i as the C shift needs (one instruction on free's fast path). */
static inline uint64_t bts64(uint64_t x, uint64_t i) {
  __asm__("bts %1, %0" : "+r"(x) : "r"(i) : "cc");
  return x;
}

#ifdef NALLOC_DEBUG
_Noreturn void nalloc_assert_fail(const char *expr, const char *file, int line);
#define nalloc_assert(e) \
  (likely(e) ? (void)0 : nalloc_assert_fail(#e, __FILE__, __LINE__))
#define NALLOC_DEBUG_ON 1
#else
#define nalloc_assert(e) ((void)sizeof(!(e)))
#define NALLOC_DEBUG_ON 0
#endif

#endif
