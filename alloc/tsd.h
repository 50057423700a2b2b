/* tsd.h -- per-thread state (tsd_t, in types.h): the thread's heap, its
 * arena, the profiler's countdown, and its set-up and teardown.
 *
 * The variable is initial-exec TLS: the fast paths reach it with one
 * %fs-relative access, and it is small enough (tens of bytes) for the
 * static-TLS surplus that lets a dlopen'ed libnalloc use it. */
#ifndef NALLOC_TSD_H
#define NALLOC_TSD_H

#include "ctl.h"
#include "types.h"

extern __thread tsd_t nalloc_tsd __attribute__((tls_model("initial-exec")));
static inline tsd_t *tsd_get(void) { return &nalloc_tsd; }

uint32_t nalloc_tid_slow(void);
static inline uint32_t nalloc_tid(void) {
  uint32_t t = tsd_get()->tid;
  return likely(t != 0) ? t : nalloc_tid_slow();
}

/* From the allocator's boot: the key whose destructor tears threads down. */
void tsd_boot_global(void);
/* Sets the thread up (the allocator too, on the first call of the
 * process). Threads that are exiting stay in TSD_TEARDOWN. */
void tsd_boot(tsd_t *tsd);
void tsd_ensure(void);
/* The calling thread's arena index (setting the thread up first). */
unsigned tsd_arena(void);
/* Moves the calling thread to arena i: its spans go back to their arena
 * and it allocates from i from now on. False if i cannot be created. */
bool tsd_set_arena(unsigned i);
/* Gives the calling thread's spans back to its arena (thread.tcache.flush). */
void tsd_flush(void);
/* Fork child: the forking thread is the only one left. */
void tsd_postfork_child(void);
/* thread.arena, thread.tcache.flush. */
extern const ctl_table_t tsd_ctl_table;

#endif
