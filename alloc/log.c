/* log.c -- messages on stderr without stdio or malloc, and the debug
 * build's assertion failure. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static _Atomic int log_fd = STDERR_FILENO;

/* Reports printed at exit (stats_print, prof_leak) must survive programs
 * that close stderr in their own exit handlers (coreutils do), so those
 * options keep a private duplicate of it, taken at start-up. */
void nalloc_log_keep(void) {
  if (atomic_load_explicit(&log_fd, memory_order_relaxed) != STDERR_FILENO) return;
  int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd >= 0) atomic_store_explicit(&log_fd, fd, memory_order_relaxed);
}

int nalloc_log_fd(void) { return atomic_load_explicit(&log_fd, memory_order_relaxed); }

/* vsnprintf into a stack buffer: glibc's printf core does not allocate for
 * the plain integer/string/pointer formats nalloc uses. */
static void log_v(const char *fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "<nalloc>: ");
  int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + ((size_t)m < sizeof buf - n - 2 ? (size_t)m : sizeof buf - n - 2);
  buf[len++] = '\n';
  const char *p = buf;
  int fd = nalloc_log_fd();
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w <= 0) break;
    p += w;
    len -= (size_t)w;
  }
}

void nalloc_log(const char *fmt, ...) {
  int saved = errno;
  va_list ap;
  va_start(ap, fmt);
  log_v(fmt, ap);
  va_end(ap);
  errno = saved;
}

void nalloc_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v(fmt, ap);
  va_end(ap);
  abort();
}

#ifdef NALLOC_DEBUG
void nalloc_assert_fail(const char *expr, const char *file, int line) {
  nalloc_fatal("assertion failed: %s (%s:%d)", expr, file, line);
}
#endif
