/* boot.c -- global start-up (nalloc_boot, from the first malloc) and the
 * library constructor (once malloc works: the profiler's late set-up, the
 * background thread, the exit report). */
#include "boot.h"

#include <stdlib.h>

#include "arena.h"
#include "background.h"
#include "conf.h"
#include "fork.h"
#include "log.h"
#include "node.h"
#include "stats.h"
#include "tsd.h"
#include "../prof/prof_hook.h"

enum { BOOT_NONE, BOOT_RUNNING, BOOT_DONE };
static _Atomic int boot_state;
static pthread_mutex_t boot_mtx = PTHREAD_MUTEX_INITIALIZER;

void nalloc_boot(void) {
  if (likely(atomic_load_explicit(&boot_state, memory_order_acquire) == BOOT_DONE))
    return;
  pthread_mutex_lock(&boot_mtx);
  if (atomic_load_explicit(&boot_state, memory_order_relaxed) != BOOT_DONE) {
    atomic_store_explicit(&boot_state, BOOT_RUNNING, memory_order_relaxed);
    conf_boot();
    node_boot();
    arena_boot();
    if (arena_get(0) == NULL) nalloc_fatal("cannot map memory for the first arena");
    tsd_boot_global();
    prof_boot();
    /* done before pthread_atfork, which may allocate */
    atomic_store_explicit(&boot_state, BOOT_DONE, memory_order_release);
    pthread_atfork(nalloc_prefork, nalloc_postfork_parent, nalloc_postfork_child);
  }
  pthread_mutex_unlock(&boot_mtx);
}

static void stats_print_atexit(void) { stats_print(); }

__attribute__((constructor)) static void nalloc_ctor(void) {
  nalloc_boot();
  prof_boot_late();
  background_start();
  if (opt_stats_print) {
    nalloc_log_keep();
    atexit(stats_print_atexit);
  }
}
