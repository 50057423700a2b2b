/* prof_trigger.c -- when profiles get written, and under which name:
 *   prof.dump ctl            <prefix>.<pid>.<seq>.m<n>.heap (or the given path)
 *   lg_prof_interval:N       .i<n>  every ~2^N bytes allocated
 *   prof_gdump / prof.gdump  .u<n>  each new peak of the profiled live heap
 *                                   (at least max(1 MiB, 2^lg_prof_sample)
 *                                   above the one that triggered the last)
 *   prof_signal:SIG          .s<n>  written by a helper thread: the handler
 *                                   only sem_post()s
 *   prof.dump_peak ctl       .p<n>  the peak-heap profile (or the given path)
 *   prof_peak_final          .p<n>  the peak-heap profile, at exit
 *   prof_final / prof_leak   .f     at exit (prof_leak also prints a report)
 * <seq> is one counter across kinds, <n> one per kind (jemalloc's scheme).
 * An empty prof_prefix turns automatic dumps off. An automatic dump that
 * fails prints one line and profiling goes on. Automatic names are created
 * with O_EXCL (prof_dump.c), so a file planted under the name we were
 * about to use is never written through.
 *
 * Interval and gdump dumps run in the allocating thread after its sample
 * is counted (prof_sample), outside every allocator lock, like
 * jemalloc's idump/gdump. */
#define _GNU_SOURCE
#include "prof_internal.h"
#include "../alloc/helper_thread.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic uint64_t dump_seq;
static _Atomic uint64_t kind_seq[5]; /* m, i, u, s, p */
static const char kind_char[5] = {'m', 'i', 'u', 's', 'p'};
enum { K_M, K_I, K_U, K_S, K_P, K_F };

/* Pending automatic dumps, raised where they are detected and run where
 * it is safe to write a file. Process-wide, so any thread may run them.
 * Any of them pending sets PROF_SLOW_PENDING in prof_slow, the one word
 * the sampled path reads before calling in here. */
static _Atomic unsigned pending_i, pending_u;

static void pending_raise(void) {
  atomic_fetch_or(&prof_slow, PROF_SLOW_PENDING);
}

static _Atomic uint64_t interval_bytes;
static _Atomic int64_t gdump_live, gdump_next = (int64_t)1 << 20;

static sem_t sig_sem;
static _Atomic bool sig_thread_needed;

/* <prefix>.<pid>.<seq>.<kind><n>.heap; false if automatic dumps are off
 * or the name does not fit. */
static bool auto_name(char *buf, size_t cap, int kind) {
  size_t plen = strlen(opt_prof_prefix);
  if (plen == 0 || plen + 80 > cap) return false;
  size_t at = 0;
  memcpy(buf, opt_prof_prefix, plen);
  at = plen;
  buf[at++] = '.';
  at += prof_fmt_u64(buf + at, (uint64_t)getpid());
  buf[at++] = '.';
  at += prof_fmt_u64(buf + at, atomic_fetch_add(&dump_seq, 1));
  buf[at++] = '.';
  if (kind == K_F) {
    buf[at++] = 'f';
  } else {
    buf[at++] = kind_char[kind];
    at += prof_fmt_u64(buf + at, atomic_fetch_add(&kind_seq[kind], 1));
  }
  memcpy(buf + at, ".heap", 6);
  return true;
}

static void auto_dump(int kind, unsigned flags) {
  char name[PROF_PREFIX_MAX + 96];
  if (!auto_name(name, sizeof name, kind)) {
    if (flags & PROF_DUMP_LEAK) prof_dump_file(NULL, flags, false);
    return;
  }
  int err = prof_dump_file(name, flags, true);
  if (err != 0) {
    const char *en = strerrorname_np(err);
    nalloc_log("prof: cannot write %s: %s (errno %d)", name, en ? en : "?",
               err);
  }
}

int prof_dump_request(const char *path) {
  if (path != NULL) return prof_dump_file(path, PROF_DUMP_NOW, false);
  char name[PROF_PREFIX_MAX + 96];
  if (!auto_name(name, sizeof name, K_M)) return EFAULT;
  return prof_dump_file(name, PROF_DUMP_NOW, true);
}

int prof_dump_peak_request(const char *path) {
  if (path != NULL) return prof_dump_file(path, PROF_DUMP_PEAK, false);
  char name[PROF_PREFIX_MAX + 96];
  if (!auto_name(name, sizeof name, K_P)) return EFAULT;
  return prof_dump_file(name, PROF_DUMP_PEAK, true);
}

/* ---- interval ----------------------------------------------------------- */

void prof_interval_account(tsd_t *tsd, prof_tdata_t *td, uint64_t bytes) {
  (void)tsd;
  uint64_t interval = (uint64_t)1 << opt_lg_prof_interval;
  /* Batch per thread (1/64 of the interval) so that exact mode does not
   * hit one shared cache line on every allocation. */
  uint64_t batch = interval >> 6;
  td->iacc += bytes;
  if (td->iacc < batch) return;
  uint64_t add = td->iacc;
  td->iacc = 0;
  uint64_t old = atomic_fetch_add(&interval_bytes, add);
  uint64_t n = (old + add) / interval - old / interval;
  if (n > 0) { /* one dump, however many */
    atomic_fetch_add(&pending_i, 1);
    pending_raise();
  }
}

/* ---- gdump -------------------------------------------------------------- */

void prof_gdump_account(tsd_t *tsd, int64_t delta) {
  (void)tsd;
  int64_t live = atomic_fetch_add(&gdump_live, delta) + delta;
  if (delta <= 0) return;
  int64_t next = atomic_load(&gdump_next);
  if (live < next) return;
  int64_t q = (int64_t)1 << 20;
  int64_t r = (int64_t)1 << atomic_load(&prof_lg_sample);
  if (r > q) q = r;
  if (atomic_compare_exchange_strong(&gdump_next, &next, live + q)) {
    atomic_fetch_add(&pending_u, 1);
    pending_raise();
  }
}

/* ---- signal ------------------------------------------------------------- */

static void sig_handler(int sig) {
  (void)sig;
  int e = errno;
  sem_post(&sig_sem); /* async-signal-safe; the dump happens elsewhere */
  errno = e;
}

static void *sig_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "nalloc-prof-sig");
  for (;;) {
    if (sem_wait(&sig_sem) != 0) continue; /* EINTR */
    auto_dump(K_S, PROF_DUMP_NOW);
  }
  return NULL;
}

static void sig_thread_start(void) {
  int err = helper_thread_start(sig_main, 0);
  if (err != 0) nalloc_log("prof: no signal dump thread (errno %d)", err);
}

/* ---- exit --------------------------------------------------------------- */

static void prof_atexit(void) {
  if (!opt_prof) return; /* off in a fork child (prof_postfork_child) */
  if (opt_prof_peak_final) auto_dump(K_P, PROF_DUMP_PEAK);
  if (opt_prof_final || opt_prof_leak)
    auto_dump(K_F, opt_prof_leak ? PROF_DUMP_LEAK : PROF_DUMP_NOW);
}

void prof_triggers_boot_late(void) {
  if (opt_prof_final || opt_prof_leak || opt_prof_peak_final) atexit(prof_atexit);
  if (opt_lg_prof_interval > PROF_LG_MAX) opt_lg_prof_interval = PROF_LG_MAX;
  if (opt_prof_signal > 0) {
    sem_init(&sig_sem, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sig_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(opt_prof_signal, &sa, NULL) != 0) {
      nalloc_log("prof: cannot handle signal %d", opt_prof_signal);
      return;
    }
    sig_thread_start();
  }
}

/* The child of fork() has no helper thread; it gets one the next time it
 * records a sample (creating a thread inside an atfork handler would cost
 * every fork+exec a thread). */
void prof_triggers_postfork_child(void) {
  if (opt_prof_signal > 0) {
    sem_init(&sig_sem, 0, 0);
    atomic_store(&sig_thread_needed, true);
    pending_raise();
  }
}

void prof_triggers_run_pending(tsd_t *tsd) {
  if (tsd->reentrant != 0) return;
  /* cleared before the flags are read */
  atomic_fetch_and(&prof_slow, ~(unsigned)PROF_SLOW_PENDING);
  if (unlikely(atomic_load_explicit(&pending_i, memory_order_relaxed))) {
    if (atomic_exchange(&pending_i, 0)) auto_dump(K_I, PROF_DUMP_NOW);
  }
  if (unlikely(atomic_load_explicit(&pending_u, memory_order_relaxed))) {
    if (atomic_exchange(&pending_u, 0)) auto_dump(K_U, PROF_DUMP_NOW);
  }
  if (unlikely(atomic_load_explicit(&sig_thread_needed,
                                    memory_order_relaxed))) {
    if (atomic_exchange(&sig_thread_needed, false)) sig_thread_start();
  }
}
