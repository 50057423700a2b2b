/* background.c -- the optional background purge thread
 * (background_thread:true).
 *
 * Decay purges dirty pages when an arena is next used, which leaves a
 * process that freed most of its heap and then went quiet holding it. This
 * thread runs the same decay on a timer, so resident memory follows the
 * live heap within about dirty_decay_ms even when nothing allocates. It is
 * opt-in, as jemalloc's is: a library that starts threads behind a
 * program's back surprises some programs (seccomp, fork without exec). The
 * thread never allocates and blocks every signal. It is not restarted in
 * the child of fork(). */
#define _GNU_SOURCE /* pthread_setname_np */
#include <signal.h>
#include <time.h>

#include "arena.h"
#include "background.h"
#include "log.h"
#include "page_heap.h"
#include "tsd.h"

bool opt_background_thread = false;

static const conf_entry_t background_conf_rows[] = {
    {"background_thread", CONF_BOOL, &opt_background_thread, 0, 0, NULL, 0,
     "purge dirty pages on a timer in a thread of nalloc's own"},
};
const conf_table_t background_conf_table = {background_conf_rows,
                                            ARRAY_LEN(background_conf_rows)};

static void *background_main(void *arg) {
  (void)arg;
  /* decay / 8, as the allocation-driven check does, within [10 ms, 1 s] */
  uint64_t ms = (uint64_t)opt_dirty_decay_ms / 8;
  ms = ms < 10 ? 10 : ms > 1000 ? 1000 : ms;
  struct timespec period = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  for (;;) {
    nanosleep(&period, NULL);
    FOR_EACH_ARENA(a) arena_purge(a, false);
  }
  return NULL;
}

void background_start(void) {
  if (!opt_background_thread || opt_dirty_decay_ms <= 0) return; /* 0: at once; -1: never */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits it */
  pthread_t t;
  /* glibc allocates the new thread's TLS here, in this thread: nalloc's
   * memory, not the program's, so the profiler must not sample it. */
  tsd_t *tsd = tsd_get();
  tsd->reentrant++;
  int err = pthread_create(&t, NULL, background_main, NULL);
  tsd->reentrant--;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err != 0) {
    nalloc_log("background_thread: cannot start the purge thread (errno %d); "
               "purging on allocation only", err);
    return;
  }
  pthread_setname_np(t, "nalloc-purge");
  pthread_detach(t);
}
