/* util.c -- small shared services: messages on stderr without stdio or
 * malloc, the fork-aware lock operations, and the ctl value copy helpers. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  while (len > 0) {
    ssize_t w = write(STDERR_FILENO, p, len);
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

void nlock_init(nlock_t *l) {
  pthread_mutex_init(&l->m, NULL);
  atomic_store_explicit(&l->owner, NULL, memory_order_relaxed);
  l->fork_skipped = false;
}

/* A lock this thread already holds can only mean fork() was called from a
 * signal handler that interrupted nalloc: taking it again would hang, so
 * leave it; the child re-initialises every lock anyway. */
void nlock_prefork(nlock_t *l) {
  if (nlock_held_by_me(l)) {
    l->fork_skipped = true;
    return;
  }
  l->fork_skipped = false;
  nlock_lock(l);
}

void nlock_postfork_parent(nlock_t *l) {
  if (l->fork_skipped) {
    l->fork_skipped = false;
    return;
  }
  nlock_unlock(l);
}

void nlock_postfork_child(nlock_t *l) { nlock_init(l); }

int ctl_out(void *oldp, size_t *oldlenp, const void *v, size_t len) {
  if (oldp == NULL && oldlenp == NULL) return 0;
  if (oldp == NULL || oldlenp == NULL) {
    if (oldlenp != NULL) *oldlenp = len; /* size query */
    return oldp == NULL ? 0 : EINVAL;
  }
  if (*oldlenp != len) {
    size_t n = *oldlenp < len ? *oldlenp : len;
    memcpy(oldp, v, n);
    *oldlenp = n;
    return EINVAL;
  }
  memcpy(oldp, v, len);
  return 0;
}

int ctl_in(void *newp, size_t newlen, void *v, size_t len) {
  if (newp == NULL) return EINVAL;
  if (newlen != len) return EINVAL;
  memcpy(v, newp, len);
  return 0;
}
