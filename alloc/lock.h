/* lock.h -- nalloc's locks (nlock_t, in types.h): a futex word holding the
 * owner's id (nalloc_tid: one per live thread, see tsd.c), fork-aware, ranked.
 *
 * Lock order: a thread holding a lock takes only locks of higher rank.
 * The debug build checks it on every lock (tsd.lock_ranks); the fork
 * handlers take every lock in this order too. Per-arena locks of one rank
 * are never held two at a time except by the fork handlers. */
#ifndef NALLOC_LOCK_H
#define NALLOC_LOCK_H

#include "tsd.h"

enum {
  LOCK_PROF_DUMP = 1,   /* prof: one dump at a time */
  LOCK_PROF_TDATAS,     /* prof: the list of per-thread records */
  LOCK_PROF_GCTX,       /* prof: the table of stacks */
  LOCK_PROF_UNWIND,     /* prof: unwind-rule and code-range tables */
  LOCK_PROF_MEM,        /* prof: the profiler's record slabs */
  LOCK_STATS,           /* the statistics snapshot */
  LOCK_HEAPS,           /* the heap registry */
  LOCK_ARENA_SHARED,    /* an arena's shared heap */
  LOCK_ARENA_ABANDON,   /* an arena's abandoned spans */
  LOCK_ARENA_HEAP,      /* an arena's page heap */
  LOCK_ARENAS,          /* creating arenas */
  LOCK_PAGEMAP,         /* creating page-map leaves */
  LOCK_BASE,            /* the metadata allocator */
  LOCK_RANKS
};
_Static_assert(LOCK_RANKS <= 31, "ranks are bits 1-30 of tsd.lock_ranks");

#define NLOCK_INITIALIZER(rank) {0, (rank), false}
#define NLOCK_WAITERS 0x80000000u

void nlock_init(nlock_t *l, unsigned rank);
void nlock_lock_slow(nlock_t *l, uint32_t self);
void nlock_wake(nlock_t *l);
void nlock_rank_acquire(const nlock_t *l);
void nlock_rank_release(const nlock_t *l);

static inline void nlock_lock(nlock_t *l) {
  uint32_t self = nalloc_tid(), free_word = 0;
  if (NALLOC_DEBUG_ON) nlock_rank_acquire(l);
  tsd_get()->nlocks++; /* before the lock is ours: a fork from a signal
                          handler then always knows it is inside nalloc */
  if (likely(atomic_compare_exchange_strong_explicit(
          &l->word, &free_word, self, memory_order_acquire, memory_order_relaxed)))
    return;
  nlock_lock_slow(l, self);
}

static inline bool nlock_trylock(nlock_t *l) {
  uint32_t free_word = 0;
  bool ok = atomic_compare_exchange_strong_explicit(
      &l->word, &free_word, nalloc_tid(), memory_order_acquire, memory_order_relaxed);
  if (ok) tsd_get()->nlocks++;
  if (NALLOC_DEBUG_ON && ok) nlock_rank_acquire(l);
  return ok;
}

static inline void nlock_unlock(nlock_t *l) {
  if (NALLOC_DEBUG_ON) nlock_rank_release(l);
  if (unlikely(atomic_exchange_explicit(&l->word, 0, memory_order_release) &
               NLOCK_WAITERS))
    nlock_wake(l);
  tsd_get()->nlocks--; /* after: see nlock_lock */
}

static inline bool nlock_held_by_me(const nlock_t *l) {
  return (atomic_load_explicit(&l->word, memory_order_relaxed) & ~NLOCK_WAITERS) ==
         nalloc_tid();
}

/* Fork: prefork takes the lock (and marks it fork_taken) unless the
 * forking thread holds it already (fork() from a signal handler that
 * interrupted nalloc: the structure it guards may be mid-update).
 * When the forking thread holds any lock (tsd.nlocks), taking the others
 * in rank order can deadlock: a thread holding a lower-ranked one may be
 * waiting for one the forking thread holds and will not release before
 * the handler returns. Then prefork waits for a lock held by another
 * thread at most NLOCK_FORK_WAIT_NS, and past that leaves it too (the
 * child cannot tell how far that thread got).
 * postfork_parent releases what prefork took; postfork_child re-inits and
 * returns whether the structure may have been mid-update at the fork. */
void nlock_fork_begin(void); /* around the fork handlers: no rank checks */
void nlock_fork_end(void);
void nlock_prefork(nlock_t *l);
void nlock_postfork_parent(nlock_t *l);
bool nlock_postfork_child(nlock_t *l);

#endif
