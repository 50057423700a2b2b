/* tsd.c -- per-thread set-up and teardown: bind the thread to an arena,
 * give it a heap, and at exit give the heap's spans back (a
 * pthread key's destructor). */
#include "tsd.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "boot.h"
#include "heap.h"
#include "lock.h"
#include "node.h"
#include "../prof/prof_hook.h"

__thread tsd_t nalloc_tsd __attribute__((tls_model("initial-exec"))) = {
    .heap = &heap_none};

static pthread_key_t tsd_key;
static _Atomic unsigned tsd_booted; /* threads set up, ever */
static bool tsd_key_ok;

/* A lock word holds its owner's id: one per thread, unique among the
 * threads alive. The kernel's thread id would do, but gettid is a system
 * call that every process taking a lock would pay (each `cat` of a
 * build); ids are handed out from a counter instead. They start above any
 * kernel thread id (pid_max is at most 2^22), so once the counter reaches
 * NLOCK_WAITERS (2^31 - 2^22 threads later) a thread takes its kernel id
 * and can never meet a counted id still in use. */
#define TSD_ID_FIRST ((uint32_t)1 << 22)
static _Atomic uint32_t tsd_id_next = TSD_ID_FIRST;

uint32_t nalloc_tid_slow(void) {
  uint32_t t = atomic_load_explicit(&tsd_id_next, memory_order_relaxed);
  for (;;) {
    if (t >= NLOCK_WAITERS) {
      t = (uint32_t)syscall(SYS_gettid);
      break;
    }
    if (atomic_compare_exchange_weak_explicit(&tsd_id_next, &t, t + 1,
                                              memory_order_relaxed, memory_order_relaxed))
      break;
  }
  nalloc_assert(t != 0 && t < NLOCK_WAITERS);
  tsd_get()->tid = t;
  return t;
}

static void tsd_cleanup(void *arg);

/* From the allocator's boot: the key whose destructor runs tsd_cleanup. */
void tsd_boot_global(void) {
  tsd_key_ok = pthread_key_create(&tsd_key, tsd_cleanup) == 0;
}

void tsd_boot(tsd_t *tsd) {
  if (tsd->state == TSD_TEARDOWN) return; /* exiting: no heap any more */
  nalloc_boot();
  /* The first thread takes arena 0 without knowing the topology; any
   * later one needs it to pick its arena (node.c). A thread is counted
   * once: an allocation inside nalloc_boot (pthread_atfork's) may have set
   * this thread up already. */
  if (tsd->state == TSD_UNINIT &&
      atomic_fetch_add_explicit(&tsd_booted, 1, memory_order_relaxed) > 0)
    nalloc_boot_discover();
  tsd->state = TSD_NOMINAL;
  tsd->heap = &heap_none; /* nested mallocs below use the shared heap */
  arena_t *a = arena_pick();
  if (a == NULL) {
    a = arena_get(0);
    atomic_fetch_add_explicit(&a->nthreads, 1, memory_order_relaxed);
  }
  tsd->arena = (uint16_t)a->index;
  tsd->prof_countdown = opt_prof ? prof_next_wait(tsd) : INT64_MAX;
  /* The key's value may need calloc (keys past 32): by now a nested call
   * finds the thread nominal with no heap and uses the shared heap. */
  if (tsd_key_ok) pthread_setspecific(tsd_key, tsd);
  if (opt_tcache) {
    heap_t *h = heap_create(a);
    if (h != NULL) tsd->heap = h;
  }
}

void tsd_ensure(void) {
  tsd_t *tsd = tsd_get();
  if (tsd->state == TSD_UNINIT) tsd_boot(tsd);
}

unsigned tsd_arena(void) {
  tsd_ensure();
  return tsd_get()->arena;
}

static void tsd_drop_heap(tsd_t *tsd) {
  heap_t *h = tsd->heap;
  tsd->heap = &heap_none;
  if (h != &heap_none) heap_destroy(h);
}

static void tsd_cleanup(void *arg) {
  (void)arg;
  tsd_t *tsd = tsd_get();
  tsd->state = TSD_TEARDOWN;
  tsd_drop_heap(tsd);
  arena_t *a = arena_get(tsd->arena);
  if (a) atomic_fetch_sub_explicit(&a->nthreads, 1, memory_order_relaxed);
  if (opt_prof) prof_thread_exit(tsd);
}

bool tsd_set_arena(unsigned i) {
  tsd_t *tsd = tsd_get();
  if (tsd->state != TSD_NOMINAL) tsd_boot(tsd);
  arena_t *to = arena_get(i), *from = arena_get(tsd->arena);
  if (to == NULL) return false;
  if (from) atomic_fetch_sub_explicit(&from->nthreads, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&to->nthreads, 1, memory_order_relaxed);
  tsd->arena = (uint16_t)i;
  if (tsd->heap != &heap_none) heap_move(tsd->heap, to);
  if (opt_prof) prof_thread_arena(tsd, i);
  return true;
}

void tsd_flush(void) {
  tsd_t *tsd = tsd_get();
  if (tsd->state == TSD_NOMINAL && tsd->heap != &heap_none) heap_flush(tsd->heap);
}

/* ---- ctl: thread.arena, thread.tcache.flush ------------------------------ */

static int tsd_ctl_arena(const size_t *idx, void *oldp, size_t *oldlenp, void *newp,
                         size_t newlen) {
  (void)idx;
  unsigned old = tsd_arena();
  if (newp != NULL) {
    unsigned i;
    int r = ctl_in(newp, newlen, &i, sizeof i);
    if (r) return r;
    if (i >= arenas_count || !tsd_set_arena(i)) return EINVAL;
  }
  return ctl_out(oldp, oldlenp, &old, sizeof old);
}

static int tsd_ctl_flush(const size_t *idx, void *oldp, size_t *oldlenp, void *newp,
                         size_t newlen) {
  (void)idx, (void)oldp, (void)oldlenp, (void)newp, (void)newlen; /* none: a command */
  tsd_flush();
  return 0;
}

static const ctl_row_t tsd_ctl_rows[] = {
    {"thread.arena", CTL_UNSIGNED, CTL_RW, 0, .fn = tsd_ctl_arena},
    {"thread.tcache.flush", CTL_NONE, CTL_WO, 0, .fn = tsd_ctl_flush},
};
const ctl_table_t tsd_ctl_table = {tsd_ctl_rows, ARRAY_LEN(tsd_ctl_rows)};

/* The child's thread has a kernel id of its own; its heap is usable only
 * if fork did not interrupt one of its slow paths (fork from a signal
 * handler): otherwise it starts a new one. */
void tsd_postfork_child(void) {
  tsd_t *tsd = tsd_get();
  tsd->lock_ranks = 0; /* whatever it held was re-initialised */
  if (tsd->heap != &heap_none && tsd->heap->busy) {
    tsd->heap = &heap_none; /* dropped, not walked: it may be mid-update */
    if (tsd->state == TSD_NOMINAL && opt_tcache) {
      heap_t *h = heap_create(arena_get(tsd->arena));
      if (h != NULL) tsd->heap = h;
    }
  }
  if (tsd->state == TSD_NOMINAL) {
    arena_t *a = arena_get(tsd->arena);
    if (a) atomic_fetch_add_explicit(&a->nthreads, 1, memory_order_relaxed);
  }
}
