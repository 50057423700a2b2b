/* background.c -- the background decay thread (background_thread, on by
 * default).
 *
 * Decay (page_heap.c) moves free pages through dirty, muzzy and clean as
 * their time comes, but only when something calls into the page heap: a
 * process that freed most of its heap and then went quiet would keep it.
 * This thread runs the same decay at the times it is due, so resident
 * memory follows the live heap within dirty_decay_ms whatever the program
 * does. It sleeps until the next stage change is due, and while no arena
 * has free pages to decay it waits on a futex that the next free wakes:
 * it costs nothing while there is nothing to do.
 *
 * It starts lazily: only once an arena has mapped BACKGROUND_START_BYTES
 * or holds that much free memory, so a short or small process (/bin/true,
 * cat) never starts it, and it is started from a call into nalloc that
 * holds no lock (background_poll), since pthread_create allocates. The thread never
 * allocates and blocks every signal. A fork child has none (decay runs
 * there when it calls nalloc). */
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "background.h"
#include "heap.h"
#include "helper_thread.h"
#include "log.h"
#include "page_heap.h"
#include "os.h"
#include "tsd.h"

bool opt_background_thread = true;

/* The thread is worth its start-up (~30 us) and its stack once an arena
 * has mapped this much (past the first chunk or two a trivial process
 * maps), or holds this much free memory to decay. It is asked for then and
 * started at the next entry point that can (background_poll): mostly the
 * allocation that mapped the memory, before anything of it was freed. */
#define BACKGROUND_START_BYTES ((size_t)8 << 20)

enum { BG_OFF, BG_ARMED, BG_WANTED, BG_STARTING, BG_RUNNING };
static _Atomic int bg_state = BG_OFF;
/* The thread sleeps until bg_wake_ns (UINT64_MAX: until woken) on the
 * futex word bg_seq; a decay that falls due earlier (a free, a parked
 * span) bumps the word and wakes it. */
static _Atomic uint32_t bg_seq;
static _Atomic uint64_t bg_wake_ns = UINT64_MAX;
static _Atomic uint64_t bg_runs; /* wake-ups that walked the arenas */

/* Sleeps while bg_seq is seq, until `until` (CLOCK_MONOTONIC ns;
 * UINT64_MAX: no limit). */
static void bg_sleep(uint32_t seq, uint64_t until) {
  struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
  syscall(SYS_futex, (uint32_t *)&bg_seq, FUTEX_WAIT_BITSET_PRIVATE, seq,
          until == UINT64_MAX ? NULL : &ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* The earliest stage change due in any arena. */
static uint64_t bg_next_due(void) {
  uint64_t next = UINT64_MAX;
  FOR_EACH_ARENA(a) {
    uint64_t n = arena_decay_next(a);
    if (n < next) next = n;
  }
  return next;
}

/* Decays every arena; when the next stage change is due (UINT64_MAX:
 * nothing left to decay). */
static uint64_t bg_decay_all(void) {
  uint64_t next = UINT64_MAX;
  FOR_EACH_ARENA(a) {
    uint64_t n = arena_decay(a);
    if (n < next) next = n;
  }
  atomic_fetch_add_explicit(&bg_runs, 1, memory_order_relaxed);
  return next;
}

static const conf_entry_t background_conf_rows[] = {
    {"background_thread", CONF_BOOL, &opt_background_thread, 0, 0, NULL, 0,
     "decay free pages on time in a thread of nalloc's own, started once there are some"},
};
const conf_table_t background_conf_table = {background_conf_rows,
                                            ARRAY_LEN(background_conf_rows)};

/* Every half dirty_decay_ms the thread also walks the thread heaps
 * (heap_idle_sweep): one that entered no slow path since the previous
 * walk gives back the free pages of its spans, so an idle thread's free
 * memory goes back between half and all of dirty_decay_ms after its last
 * slow path, as freed page runs do. A wake-up per half period, whether or
 * not there is anything to do. It needs the asymmetric fence (membarrier):
 * where the kernel refuses it, idle threads keep their spans' free pages
 * (as without the thread). */
static uint64_t bg_sweep_ns(void) { return (uint64_t)opt_dirty_decay_ms * 500000u; }

static void *background_main(void *arg) {
  (void)arg;
  prctl(PR_SET_NAME, "nalloc-decay"); /* one call (naming it from outside opens /proc) */
  uint64_t sweep_at = os_fence_register() ? nalloc_now_ns() + bg_sweep_ns() : UINT64_MAX;
  uint64_t next = bg_decay_all();
  if (next > sweep_at) next = sweep_at;
  for (;;) {
    /* Publish the wake-up time, then look again: a free that set an
     * earlier time before this store is seen here, one after it sees the
     * store and bumps bg_seq (both sequentially consistent). */
    uint32_t seq = atomic_load(&bg_seq);
    atomic_store(&bg_wake_ns, next);
    uint64_t due = bg_next_due();
    if (due >= next) {
      uint64_t min = nalloc_now_ns() + 1000000u; /* never spin */
      bg_sleep(seq, next < min ? min : next);
      due = bg_next_due();
    }
    /* woken early (a free, a parked span): walk only when something is
     * due, so that a parked span waits its time for the next thread */
    uint64_t now = nalloc_now_ns();
    if (now >= sweep_at) {
      heap_idle_sweep();
      FOR_EACH_ARENA(a) arena_idle_look(a);
      sweep_at = now + bg_sweep_ns();
    }
    next = now >= due ? bg_decay_all() : due;
    if (next > sweep_at) next = sweep_at;
  }
  return NULL;
}

void background_start(void) {
  if (!opt_background_thread || opt_dirty_decay_ms <= 0) return; /* 0: at once; -1: never */
  atomic_store_explicit(&bg_state, BG_ARMED, memory_order_relaxed);
}

void background_note_dirty(size_t npages, uint64_t due) {
  int st = atomic_load_explicit(&bg_state, memory_order_relaxed);
  if (st == BG_RUNNING) {
    if (due < atomic_load(&bg_wake_ns)) {
      atomic_store(&bg_wake_ns, due); /* one wake for the frees that follow */
      atomic_fetch_add(&bg_seq, 1);
      syscall(SYS_futex, (uint32_t *)&bg_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
  } else if (st == BG_ARMED && npages * PAGE >= BACKGROUND_START_BYTES) {
    atomic_compare_exchange_strong(&bg_state, &st, BG_WANTED);
  }
}

void background_note_mapped(size_t bytes) {
  int st = atomic_load_explicit(&bg_state, memory_order_relaxed);
  if (st == BG_ARMED && bytes >= BACKGROUND_START_BYTES)
    atomic_compare_exchange_strong(&bg_state, &st, BG_WANTED);
}

void background_poll(void) {
  int st = atomic_load_explicit(&bg_state, memory_order_relaxed);
  if (likely(st != BG_WANTED)) return;
  tsd_t *tsd = tsd_get();
  /* pthread_create allocates: not while this thread holds a lock or is
   * inside its heap's slow path (a free from a signal handler), nor while
   * the thread is being torn down; a later call starts it. */
  if (tsd->nlocks != 0 || tsd->state != TSD_NOMINAL || tsd->heap->busy) return;
  if (!atomic_compare_exchange_strong(&bg_state, &st, BG_STARTING)) return;
  int err = helper_thread_start(background_main, 0);
  if (err != 0) {
    atomic_store(&bg_state, BG_OFF);
    nalloc_log("background_thread: cannot start the decay thread (errno %d); "
               "decaying on allocation only", err);
    return;
  }
  atomic_store(&bg_state, BG_RUNNING);
}

unsigned background_nthreads(void) {
  return atomic_load_explicit(&bg_state, memory_order_relaxed) == BG_RUNNING;
}

uint64_t background_nruns(void) {
  return atomic_load_explicit(&bg_runs, memory_order_relaxed);
}

/* Only the forking thread lives on, and a child of a threaded process may
 * call only async-signal-safe functions until it execs: pthread_create is
 * not one (ThreadSanitizer refuses it outright). So the child never starts
 * a decay thread: its decay runs when it calls nalloc. */
void background_postfork_child(void) {
  atomic_store_explicit(&bg_state, BG_OFF, memory_order_relaxed);
  atomic_store_explicit(&bg_wake_ns, UINT64_MAX, memory_order_relaxed);
}
