/* check.h -- the helpers of the tests in tests/alloc/, on top of the one
 * harness of tests/ (../check_core.h: CHECK, CHECKF).
 *
 * A_* macros name the allocator under test: the plain glibc names when the
 * test is linked against libnalloc (the override library), the nalloc_
 * names when it is built with NALLOC_TEST_PREFIXED (libnalloc_np, used by
 * the sanitizer builds). Tests that only use A_* work in both modes. */
#ifndef NALLOC_TESTS_CHECK_H
#define NALLOC_TESTS_CHECK_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <nalloc.h>

#include "../check_core.h"


#ifdef NALLOC_TEST_PREFIXED
#define A_MALLOC nalloc_malloc
#define A_FREE nalloc_free
#define A_CALLOC nalloc_calloc
#define A_REALLOC nalloc_realloc
#define A_REALLOCARRAY nalloc_reallocarray
#define A_POSIX_MEMALIGN nalloc_posix_memalign
#define A_ALIGNED_ALLOC nalloc_aligned_alloc
#define A_MEMALIGN nalloc_memalign
#define A_VALLOC nalloc_valloc
#define A_PVALLOC nalloc_pvalloc
#define A_USABLE nalloc_malloc_usable_size
#define A_FREE_SIZED nalloc_free_sized
#define A_MALLOC_TRIM nalloc_malloc_trim
#define A_MODE "prefixed (libnalloc_np)"
#else
#include <malloc.h>
#define A_MALLOC malloc
#define A_FREE free
#define A_CALLOC calloc
#define A_REALLOC realloc
#define A_REALLOCARRAY reallocarray
#define A_POSIX_MEMALIGN posix_memalign
#define A_ALIGNED_ALLOC aligned_alloc
#define A_MEMALIGN memalign
#define A_VALLOC valloc
#define A_PVALLOC pvalloc
#define A_USABLE malloc_usable_size
#define A_FREE_SIZED nalloc_free_sized
#define A_MALLOC_TRIM malloc_trim
#define A_MODE "override (libnalloc)"
#endif

/* Compile-time knowledge of the sanitizer in use (gcc and clang). */
#if defined(__SANITIZE_THREAD__)
#define CHECK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHECK_TSAN 1
#endif
#endif
#ifndef CHECK_TSAN
#define CHECK_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CHECK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_ASAN 1
#endif
#endif
#ifndef CHECK_ASAN
#define CHECK_ASAN 0
#endif

#define CHECK_EQ_U(a, b)                                                   \
  do {                                                                     \
    uintmax_t a_ = (uintmax_t)(a), b_ = (uintmax_t)(b);                    \
    if (a_ != b_)                                                          \
      check_fail(__FILE__, __LINE__, "%s == %s (%ju != %ju)", #a, #b, a_, \
                 b_);                                                      \
  } while (0)
#define CHECK_EQ_I(a, b)                                                   \
  do {                                                                     \
    intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                       \
    if (a_ != b_)                                                          \
      check_fail(__FILE__, __LINE__, "%s == %s (%jd != %jd)", #a, #b, a_, \
                 b_);                                                      \
  } while (0)
/* nalloc_ctl call that must succeed */
#define CHECK_CTL(...)                                                     \
  do {                                                                     \
    int r_ = nalloc_ctl(__VA_ARGS__);                                      \
    if (r_ != 0)                                                           \
      check_fail(__FILE__, __LINE__, "nalloc_ctl(%s) returned %d (%s)",   \
                 #__VA_ARGS__, r_, strerror(r_));                          \
  } while (0)

/* ---- deterministic PRNG (splitmix64 seeding + xorshift64*) ---------- */
typedef struct {
  uint64_t s;
} rng_t;
CHECK_UNUSED static inline void rng_seed(rng_t *r, uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  r->s = z ? z : 1;
}
CHECK_UNUSED static inline uint64_t rng_next(rng_t *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545f4914f6cdd1dULL;
}
/* uniform in [lo, hi] */
CHECK_UNUSED static inline uint64_t rng_range(rng_t *r, uint64_t lo,
                                              uint64_t hi) {
  return lo + rng_next(r) % (hi - lo + 1);
}

/* ---- content patterns ------------------------------------------------
 * fill_pattern writes a byte pattern that depends on tag and offset;
 * check_pattern returns the first bad offset or (size_t)-1. */
CHECK_UNUSED static inline unsigned char pat_byte(uint64_t tag, size_t i) {
  return (unsigned char)((tag * 0x9e3779b97f4a7c15ULL >> 56) + i * 131 +
                         (i >> 8));
}
CHECK_UNUSED static void fill_pattern(void *p, size_t n, uint64_t tag) {
  unsigned char *c = (unsigned char *)p;
  for (size_t i = 0; i < n; i++) c[i] = pat_byte(tag, i);
}
CHECK_UNUSED static size_t check_pattern(const void *p, size_t n,
                                         uint64_t tag) {
  const unsigned char *c = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++)
    if (c[i] != pat_byte(tag, i)) return i;
  return (size_t)-1;
}
/* Faster for big blocks: a memset byte derived from tag, with the first
 * (up to) 8 bytes replaced by the tag's bytes. Any prefix of a filled
 * block checks as a filled block of that length (for realloc). */
CHECK_UNUSED static void fill_fast(void *p, size_t n, uint64_t tag) {
  unsigned char b = (unsigned char)(tag * 0x9e3779b97f4a7c15ULL >> 56);
  memset(p, b, n);
  memcpy(p, &tag, n < 8 ? n : 8);
}
CHECK_UNUSED static int check_fast(const void *p, size_t n, uint64_t tag) {
  unsigned char b = (unsigned char)(tag * 0x9e3779b97f4a7c15ULL >> 56);
  const unsigned char *c = (const unsigned char *)p;
  size_t i = n < 8 ? n : 8;
  if (memcmp(p, &tag, i) != 0) return 0;
  uint64_t w;
  memset(&w, b, 8);
  for (; i < n && (i & 7); i++)
    if (c[i] != b) return 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, c + i, 8);
    if (v != w) return 0;
  }
  for (; i < n; i++)
    if (c[i] != b) return 0;
  return 1;
}

/* ---- nalloc_ctl helpers ------------------------------------------------ */
CHECK_UNUSED static void ctl_refresh(void) {
  uint64_t e = 1;
  size_t sz = sizeof e;
  int r = nalloc_ctl("epoch", &e, &sz, &e, sizeof e);
  if (r != 0) check_fail(__FILE__, __LINE__, "epoch refresh: %d", r);
}
CHECK_UNUSED static size_t ctl_size(const char *name) {
  size_t v = 0, sz = sizeof v;
  int r = nalloc_ctl(name, &v, &sz, NULL, 0);
  if (r != 0)
    check_fail(__FILE__, __LINE__, "nalloc_ctl(\"%s\") (size_t) -> %d",
               name, r);
  return v;
}
CHECK_UNUSED static unsigned ctl_unsigned(const char *name) {
  unsigned v = 0;
  size_t sz = sizeof v;
  int r = nalloc_ctl(name, &v, &sz, NULL, 0);
  if (r != 0)
    check_fail(__FILE__, __LINE__, "nalloc_ctl(\"%s\") (unsigned) -> %d",
               name, r);
  return v;
}
/* Runs fn in a forked child (no core file, killed by SIGALRM after
 * `secs`), with the child's stderr captured into err (cap bytes, NUL
 * ended); `survived` is the child's exit status when fn returns. Returns
 * the child's wait status. For the misuse tests, whose cases must abort
 * with a message or go on. */
CHECK_UNUSED static int check_in_child(void (*fn)(void), unsigned secs, int survived,
                                       char *err, size_t cap) {
  int pe[2];
  CHECK(pipe(pe) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    dup2(pe[1], 2);
    close(pe[0]);
    close(pe[1]);
    alarm(secs);
    fn();
    _exit(survived);
  }
  close(pe[1]);
  size_t n = 0;
  for (;;) {
    ssize_t r = read(pe[0], err + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
    if (n == cap - 1) break;
  }
  err[n] = 0;
  close(pe[0]);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  return st;
}

/* Frees p from a thread of its own (a remote free), and waits for it. */
CHECK_UNUSED static void *check_thread_free(void *p) {
  A_FREE(p);
  return NULL;
}
CHECK_UNUSED static void free_in_thread(void *p) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, check_thread_free, p) == 0);
  CHECK(pthread_join(t, NULL) == 0);
}

/* stats.allocated after an epoch refresh */
CHECK_UNUSED static size_t stat_allocated(void) {
  ctl_refresh();
  return ctl_size("stats.allocated");
}
/* stats.mapped after an epoch refresh */
CHECK_UNUSED static size_t stat_mapped(void) {
  ctl_refresh();
  return ctl_size("stats.mapped");
}
CHECK_UNUSED static void tcache_flush(void) {
  int r = nalloc_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
  if (r != 0) check_fail(__FILE__, __LINE__, "thread.tcache.flush -> %d", r);
}
CHECK_UNUSED static void set_thread_arena(unsigned a) {
  int r = nalloc_ctl("thread.arena", NULL, NULL, &a, sizeof a);
  if (r != 0) check_fail(__FILE__, __LINE__, "thread.arena=%u -> %d", a, r);
}
CHECK_UNUSED static unsigned get_thread_arena(void) {
  return ctl_unsigned("thread.arena");
}

/* A "Key:" figure of /proc/self/status, in KiB (VmRSS, VmHWM, ...). */
CHECK_UNUSED static size_t status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  CHECK(f != NULL);
  char line[256];
  size_t v = 0, n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtoull(line + n + 1, NULL, 10);
  fclose(f);
  return v;
}

/* realloc(p, n), which must succeed with at least n usable bytes. */
CHECK_UNUSED static unsigned char *realloc_checked(void *p, size_t n) {
  unsigned char *q = (unsigned char *)A_REALLOC(p, n);
  CHECK(q != NULL);
  CHECKF(A_USABLE(q) >= n, "realloc to %zu B gave %zu usable", n, A_USABLE(q));
  return q;
}

/* The resident set in KiB (/proc/self/statm). */
CHECK_UNUSED static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  CHECK(f != NULL && fscanf(f, "%ld %ld", &size, &res) == 2);
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Resets VmHWM to the current RSS; false where the kernel does not allow it. */
CHECK_UNUSED static bool hwm_reset(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL) return false;
  bool ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

/* Scale iteration counts down under TSan (10-20x slower). */
#if CHECK_TSAN
#define ITERS(n) ((n) / 10 + 1)
#else
#define ITERS(n) (n)
#endif

#endif
