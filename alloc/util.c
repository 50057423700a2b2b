/* util.c -- small shared services: messages on stderr without stdio or
 * malloc, the fork-aware lock operations, and the ctl value copy helpers. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
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
  int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
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

uint32_t nalloc_tid_slow(void) {
  uint32_t t = (uint32_t)syscall(SYS_gettid);
  tsd_get()->tid = t;
  return t;
}

void nlock_init(nlock_t *l) {
  atomic_store_explicit(&l->word, 0, memory_order_relaxed);
  l->fork_skipped = false;
}

/* Contended: spin briefly (critical sections are short), then sleep on the
 * futex with the waiters bit set so that unlock knows to wake someone. */
void nlock_lock_slow(nlock_t *l, uint32_t self) {
  for (int spin = 0; spin < 100; spin++) {
    uint32_t w = atomic_load_explicit(&l->word, memory_order_relaxed);
    if (w == 0 && atomic_compare_exchange_weak_explicit(&l->word, &w, self,
                                                        memory_order_acquire,
                                                        memory_order_relaxed))
      return;
    __builtin_ia32_pause();
  }
  for (;;) {
    uint32_t w = atomic_load_explicit(&l->word, memory_order_relaxed);
    if (w == 0) {
      /* others may sleep on it: keep the bit so our unlock wakes them */
      if (atomic_compare_exchange_weak_explicit(&l->word, &w, self | NLOCK_WAITERS,
                                                memory_order_acquire,
                                                memory_order_relaxed))
        return;
      continue;
    }
    if (!(w & NLOCK_WAITERS) &&
        !atomic_compare_exchange_weak_explicit(&l->word, &w, w | NLOCK_WAITERS,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
      continue;
    syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, w | NLOCK_WAITERS, NULL, NULL, 0);
  }
}

void nlock_wake(nlock_t *l) {
  syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
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
