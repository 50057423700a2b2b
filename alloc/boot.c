/* boot.c -- global start-up (nalloc_boot, from the first malloc) and the
 * library constructor (once malloc works: the options and their messages,
 * the profiler's late set-up, the background thread, the exit report).
 *
 * Start-up is paid for by every process nalloc is preloaded into, and most
 * of those (the shells, `cat`s and `sed`s of a build) allocate little or
 * nothing. So the constructor parses NALLOC_CONF (its messages and
 * abort_conf belong to start-up) but sets up the allocator only if the
 * configuration needs it at once (the profiler; the decay thread is only
 * armed);
 * otherwise the first malloc does, and a process that never allocates
 * never does. The NUMA topology waits further still (node.c):
 * nalloc_boot_discover, before a second thread picks an arena or anything
 * reports nodes or arenas. */
#include "boot.h"

#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "background.h"
#include "conf.h"
#include "fork.h"
#include "log.h"
#include "node.h"
#include "stats.h"
#include "tsd.h"
#include "../prof/prof_hook.h"

enum { BOOT_NONE, BOOT_CONF, BOOT_RUNNING, BOOT_DONE };
static _Atomic int boot_state;
static _Atomic bool boot_discovered; /* node_discover ran */
/* The boot lock: a futex word (0 free, 1 held, 2 held and waited for), not
 * a pthread mutex: the constructor takes it in every process, and the
 * first calls of pthread_mutex_lock and _unlock cost two lazy bindings
 * (~1,600 instructions of _dl_runtime_resolve, callgrind). Unranked, as
 * the mutex was: it is taken before any nlock, never inside one. */
static _Atomic uint32_t boot_mtx;

static void boot_lock(void) {
  uint32_t c = 0;
  if (likely(atomic_compare_exchange_strong_explicit(&boot_mtx, &c, 1, memory_order_acquire,
                                                     memory_order_relaxed)))
    return;
  if (c != 2) c = atomic_exchange_explicit(&boot_mtx, 2, memory_order_acquire);
  while (c != 0) {
    syscall(SYS_futex, &boot_mtx, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    c = atomic_exchange_explicit(&boot_mtx, 2, memory_order_acquire);
  }
}

static void boot_unlock(void) {
  if (atomic_exchange_explicit(&boot_mtx, 0, memory_order_release) == 2)
    syscall(SYS_futex, &boot_mtx, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Under boot_mtx: NALLOC_CONF, once. */
static void boot_conf_locked(void) {
  if (atomic_load_explicit(&boot_state, memory_order_relaxed) == BOOT_NONE) {
    conf_boot();
    atomic_store_explicit(&boot_state, BOOT_CONF, memory_order_relaxed);
  }
}

void nalloc_boot(void) {
  if (likely(atomic_load_explicit(&boot_state, memory_order_acquire) == BOOT_DONE))
    return;
  boot_lock();
  if (atomic_load_explicit(&boot_state, memory_order_relaxed) != BOOT_DONE) {
    boot_conf_locked();
    atomic_store_explicit(&boot_state, BOOT_RUNNING, memory_order_relaxed);
    if (node_boot()) atomic_store_explicit(&boot_discovered, true, memory_order_relaxed);
    arena_boot();
    if (arena_get(0) == NULL) nalloc_fatal("cannot map memory for the first arena");
    tsd_boot_global();
    prof_boot();
    /* done before pthread_atfork, which may allocate */
    atomic_store_explicit(&boot_state, BOOT_DONE, memory_order_release);
    pthread_atfork(nalloc_prefork, nalloc_postfork_parent, nalloc_postfork_child);
  }
  boot_unlock();
}

void nalloc_boot_discover(void) {
  if (likely(atomic_load_explicit(&boot_discovered, memory_order_acquire))) return;
  nalloc_boot();
  boot_lock();
  if (!atomic_load_explicit(&boot_discovered, memory_order_relaxed)) {
    node_discover();
    arena_boot();
    atomic_store_explicit(&boot_discovered, true, memory_order_release);
  }
  boot_unlock();
}

/* The prepare handler does not take boot_mtx: NUMA discovery may run at
 * any time (a second thread, nalloc_ctl), and a fork from a signal handler
 * that interrupted it in the forking thread would wait for itself. A
 * discovery another thread was in the middle of published nothing
 * (boot_discovered is set last, and node_discover recomputes every value
 * from scratch), so the child re-initialises the lock and discovers again
 * when it needs to. */
void nalloc_boot_postfork_child(void) { atomic_store_explicit(&boot_mtx, 0, memory_order_relaxed); }

static void stats_print_atexit(void) {
  nalloc_boot_discover();
  stats_print();
}

__attribute__((constructor)) static void nalloc_ctor(void) {
  boot_lock();
  boot_conf_locked();
  boot_unlock();
  if (opt_prof) nalloc_boot(); /* the decay thread is only armed here */
  prof_boot_late();
  background_start();
  if (opt_stats_print) {
    nalloc_log_keep();
    atexit(stats_print_atexit);
  }
}
