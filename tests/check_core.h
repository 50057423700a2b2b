/* check_core.h -- the one failure-reporting harness of every test in
 * tests/: CHECK(cond) and CHECKF(cond, fmt, ...) print file:line and what
 * failed on stderr and end the process with status 1 through _exit (from
 * any thread, and from a forked child, without running atexit handlers
 * that could deadlock or flushing a parent's stdio buffers twice). It
 * needs nothing from nalloc, so unit tests compiled from the engine's
 * sources use it as they are; tests/alloc/check.h and
 * tests/prof/prof_check.h add the allocator-facing helpers on top. */
#ifndef NALLOC_TESTS_CHECK_CORE_H
#define NALLOC_TESTS_CHECK_CORE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef __cplusplus
#define CHECK_UNUSED [[maybe_unused]]
#else
#define CHECK_UNUSED __attribute__((unused))
#endif

CHECK_UNUSED static void check_fail(const char *file, int line,
                                    const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
CHECK_UNUSED static void check_fail(const char *file, int line,
                                    const char *fmt, ...) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "%s:%d: FAILED: ", file, line);
  if (n < 0) n = 0;
  if ((size_t)n > sizeof buf) n = sizeof buf;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t w = write(2, buf, len);
  (void)w;
  _exit(1);
}

#define CHECK(cond)                                           \
  do {                                                        \
    if (!(cond)) check_fail(__FILE__, __LINE__, "%s", #cond); \
  } while (0)
#define CHECKF(cond, ...)                                         \
  do {                                                            \
    if (!(cond)) check_fail(__FILE__, __LINE__, __VA_ARGS__);     \
  } while (0)

/* The tests' random numbers: xorshift64 from a fixed seed, so that a
 * failure reproduces; a test that wants another sequence sets check_rng
 * first. */
CHECK_UNUSED static uint64_t check_rng = 0x9e3779b97f4a7c15ull;
CHECK_UNUSED static uint64_t check_rnd(void) {
  check_rng ^= check_rng << 13;
  check_rng ^= check_rng >> 7;
  check_rng ^= check_rng << 17;
  return check_rng;
}

#endif
