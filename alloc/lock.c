/* lock.c -- nlock's slow paths: contended lock and wake-up on the futex,
 * the debug build's rank check, and the fork hooks. */
#include "lock.h"

#include <linux/futex.h>
#include <sched.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#define NLOCK_SPINS 100

void nlock_init(nlock_t *l, unsigned rank) {
  atomic_store_explicit(&l->word, 0, memory_order_relaxed);
  l->rank = (uint8_t)rank;
  l->fork_taken = false;
}

/* Contended: spin briefly (critical sections are short), then sleep on the
 * futex with the waiters bit set so that unlock knows to wake someone. */
void nlock_lock_slow(nlock_t *l, uint32_t self) {
  for (int spin = 0; spin < NLOCK_SPINS; spin++) {
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

/* Debug build: every rank held is a bit of the thread's lock_ranks; a new
 * lock must rank above all of them. Unranked locks (rank 0) are not
 * checked, nor are the fork handlers, which hold every lock of a rank at
 * once (NLOCK_RANKS_OFF). */
#define NLOCK_RANKS_OFF (1u << 31)

void nlock_rank_acquire(const nlock_t *l) {
  tsd_t *tsd = tsd_get();
  if (l->rank == 0 || (tsd->lock_ranks & NLOCK_RANKS_OFF)) return;
  if (tsd->lock_ranks >> l->rank)
    nalloc_fatal("lock order: taking a lock of rank %u while holding rank %u",
                 l->rank, 31u - (unsigned)__builtin_clz(tsd->lock_ranks));
  tsd->lock_ranks |= 1u << l->rank;
}

void nlock_rank_release(const nlock_t *l) {
  tsd_t *tsd = tsd_get();
  if (l->rank == 0 || (tsd->lock_ranks & NLOCK_RANKS_OFF)) return;
  tsd->lock_ranks &= ~(1u << l->rank);
}

void nlock_fork_begin(void) {
  tsd_t *tsd = tsd_get();
  tsd->lock_ranks |= NLOCK_RANKS_OFF;
  tsd->nlocks_fork = tsd->nlocks;
  tsd->tid_fork = nalloc_tid(); /* the child's thread gets an id of its own */
}

/* The child re-initialised the locks the prepare handler took without
 * unlocking them: their count goes too. What is left counts the locks of
 * the interrupted code, which releases them if the signal handler
 * returns. */
void nlock_fork_end(void) {
  tsd_t *tsd = tsd_get();
  tsd->lock_ranks &= ~NLOCK_RANKS_OFF;
  tsd->nlocks = tsd->nlocks_fork;
}

/* Long enough for a holder that is merely slow (preempted, in a system
 * call) to finish; short enough that a fork whose prepare handler waits
 * for a holder that waits for the forking thread is not noticed as a
 * hang. */
#define NLOCK_FORK_WAIT_NS 20000000ull

static uint64_t nlock_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A lock this thread already holds can only mean fork() was called from a
 * signal handler that interrupted nalloc: taking it again would hang, so
 * it is left as it is, and the child, not finding it taken by prefork,
 * knows that what it guards may be mid-update. In that case a lock another
 * thread holds is waited for a while only (see lock.h).
 *
 * fork_taken says that prefork took the lock; it is written only by the
 * lock's holder, and read by a thread only when the lock word says that
 * thread holds it: another thread forking at the same time (whose prepare
 * handler may hold a lock this one gave up on) never reads or writes it. */
void nlock_prefork(nlock_t *l) {
  if (nlock_held_by_me(l)) return;
  if (tsd_get()->nlocks_fork == 0) {
    nlock_lock(l);
  } else {
    uint64_t start = 0;
    for (unsigned i = 0; !nlock_trylock(l); i++) {
      if (i < NLOCK_SPINS) {
        __builtin_ia32_pause();
        continue;
      }
      uint64_t now = nlock_clock_ns();
      if (start == 0) start = now;
      if (now - start > NLOCK_FORK_WAIT_NS) return;
      sched_yield();
    }
  }
  l->fork_taken = true;
}

/* Taken by the prepare handler of the thread whose id was `tid`. */
static bool nlock_fork_mine(const nlock_t *l, uint32_t tid) {
  return (atomic_load_explicit(&l->word, memory_order_relaxed) & ~NLOCK_WAITERS) ==
             tid &&
         l->fork_taken;
}

void nlock_postfork_parent(nlock_t *l) {
  if (!nlock_fork_mine(l, nalloc_tid())) return;
  l->fork_taken = false;
  nlock_unlock(l);
}

bool nlock_postfork_child(nlock_t *l) {
  bool broken = !nlock_fork_mine(l, tsd_get()->tid_fork);
  nlock_init(l, l->rank);
  return broken;
}
