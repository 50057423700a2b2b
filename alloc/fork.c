/* fork.c -- fork handlers.
 *
 * glibc's fork runs the prepare handlers before it takes its stdio list
 * lock. Taking nalloc's locks first would deadlock against a thread that
 * holds that lock (fflush(NULL), fopen) and is waiting in malloc, so the
 * handler takes the (recursive) stdio list lock itself, before any of
 * nalloc's.
 *
 * fork() from a signal handler that interrupted nalloc in the forking
 * thread: prefork skips the locks that thread holds, and waits only a
 * while for those other threads hold (nlock_prefork), and the child leaves
 * alone every structure that was mid-update: an arena whose lock was
 * skipped (arena.broken), the base allocator's lists, the heap registry,
 * the thread's own heap if it was inside a slow path (heap.busy), the
 * profiler (off in that child). It leaks what they held, and never reads a
 * half-made list. The thread's heap, when kept, has its span counts
 * recomputed (the fast paths have no flag). The table per structure is
 * in alloc/README.md, section fork. */
#include "fork.h"

#include "arena.h"
#include "base.h"
#include "boot.h"
#include "heap.h"
#include "lock.h"
#include "pagemap.h"
#include "stats.h"
#include "../prof/prof_hook.h"

extern void _IO_list_lock(void);
extern void _IO_list_unlock(void);
extern void _IO_list_resetlock(void);

void nalloc_prefork(void) {
  _IO_list_lock();
  nlock_fork_begin();
  prof_prefork();
  stats_prefork();
  heap_prefork();
  arena_prefork();
  pagemap_prefork();
  base_prefork();
}

void nalloc_postfork_parent(void) {
  base_postfork_parent();
  pagemap_postfork_parent();
  arena_postfork_parent();
  heap_postfork_parent();
  stats_postfork_parent();
  prof_postfork_parent();
  nlock_fork_end();
  _IO_list_unlock();
}

void nalloc_postfork_child(void) {
  tsd_get()->tid = 0; /* the child's thread has an id of its own */
  nalloc_boot_postfork_child();
  base_postfork_child();
  pagemap_postfork_child();
  arena_postfork_child();
  heap_postfork_child(tsd_get()->heap);
  stats_postfork_child();
  prof_postfork_child();
  nlock_fork_end();
  _IO_list_resetlock(); /* one thread left: no one else can hold it */
  tsd_postfork_child();
}
