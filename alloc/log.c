/* log.c -- messages on stderr without stdio or malloc, and the debug
 * build's assertion failure. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

void nalloc_log_to(int fd) { atomic_store_explicit(&log_fd, fd, memory_order_relaxed); }

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

/* Length of the well-formed UTF-8 sequence at s (at most n bytes) that is
 * a printable character, or 0: overlong forms, surrogates, values past
 * U+10FFFF and the C1 controls U+0080..U+009F (U+009B is a one-character
 * CSI on many terminals) count as bad bytes. */
static size_t log_utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (len == 0 || len > n || c > 0xf4) return 0;
  uint32_t cp = c & (0x7fu >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  static const uint32_t min_cp[5] = {0, 0, 0xa0, 0x800, 0x10000};
  if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

const char *nalloc_log_escape(char *dst, size_t cap, const char *src, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)src;
  size_t o = 0, i = 0;
  /* room kept for "..." and the NUL */
  while (i < n && cap > 4 && o + 4 < cap - 4) {
    unsigned c = s[i];
    size_t u = c >= 0x80 ? log_utf8_len(s + i, n - i) : 0;
    if (u > 0) {
      memcpy(dst + o, s + i, u);
      o += u;
      i += u;
    } else if (c == '\\' || c == '"') {
      dst[o++] = '\\';
      dst[o++] = (char)c;
      i++;
    } else if (c >= 0x20 && c < 0x7f) {
      dst[o++] = (char)c;
      i++;
    } else {
      dst[o++] = '\\';
      dst[o++] = 'x';
      dst[o++] = hex[c >> 4];
      dst[o++] = hex[c & 15];
      i++;
    }
  }
  if (cap == 0) return dst;
  if (i < n && o + 4 <= cap) {
    memcpy(dst + o, "...", 3);
    o += 3;
  }
  dst[o < cap ? o : cap - 1] = '\0';
  return dst;
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
