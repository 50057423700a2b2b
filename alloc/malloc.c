/* malloc.c -- the allocator's slow paths and lifecycle: start-up, thread
 * set-up and teardown, allocation and free beyond the thread cache,
 * profiling hand-off, realloc, aligned allocation, fork. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "background.h"
#include "conf.h"
#include "entry.h"
#include "numa.h"
#include "../prof/prof_hook.h"

__thread tsd_t nalloc_tsd __attribute__((tls_model("initial-exec"))) = {
    .tcache = &tcache_empty};

static _Atomic int boot_state; /* 0: not started, 1: running, 2: done */
static pthread_mutex_t boot_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tsd_key;
static bool tsd_key_ok;

#define MAX_REQUEST ((size_t)1 << 46)

void nalloc_prefork(void);
void nalloc_postfork_parent(void);
void nalloc_postfork_child(void);

static void tsd_cleanup(void *arg);

/* Global start-up: everything here is malloc-free, because the first
 * malloc of the process (often from ld.so or libc itself) lands here. */
static void nalloc_boot(void) {
  if (likely(atomic_load_explicit(&boot_state, memory_order_acquire) == 2)) return;
  pthread_mutex_lock(&boot_mtx);
  if (atomic_load_explicit(&boot_state, memory_order_relaxed) != 2) {
    atomic_store_explicit(&boot_state, 1, memory_order_relaxed);
    conf_boot();
    sc_boot();
    numa_boot();
    if (arena_get(0) == NULL) nalloc_fatal("cannot map memory for the first arena");
    tsd_key_ok = pthread_key_create(&tsd_key, tsd_cleanup) == 0;
    prof_boot();
    atomic_store_explicit(&boot_state, 2, memory_order_release);
    pthread_atfork(nalloc_prefork, nalloc_postfork_parent, nalloc_postfork_child);
  }
  pthread_mutex_unlock(&boot_mtx);
}

static void tsd_boot(tsd_t *tsd) {
  if (tsd->state == TSD_TEARDOWN) return; /* exiting thread: no cache any more */
  nalloc_boot();
  tsd->state = TSD_NOMINAL;
  tsd->arena = (uint16_t)numa_pick_arena();
  arena_t *a = arena_get(tsd->arena);
  if (a == NULL) {
    tsd->arena = 0;
    a = arena_get(0);
  }
  atomic_fetch_add_explicit(&a->nthreads, 1, memory_order_relaxed);
  tsd->prof_countdown = opt_prof ? prof_next_wait(tsd) : INT64_MAX;
  /* The key's value may need calloc (keys past 32): by now a nested call
   * finds the thread nominal with no cache and serves itself directly. */
  if (tsd_key_ok) pthread_setspecific(tsd_key, tsd);
  if (opt_tcache) {
    tcache_t *tc = tcache_create();
    if (tc != NULL) tsd->tcache = tc;
  }
}

static void tsd_cleanup(void *arg) {
  (void)arg;
  tsd_t *tsd = tsd_get();
  tcache_t *tc = tsd->tcache;
  tsd->state = TSD_TEARDOWN;
  tsd->tcache = &tcache_empty;
  tcache_destroy(tc);
  arena_t *a = arena_get(tsd->arena);
  if (a) atomic_fetch_sub_explicit(&a->nthreads, 1, memory_order_relaxed);
  if (opt_prof) prof_thread_exit(tsd);
}

/* Moves the calling thread to arena i (ctl thread.arena). */
bool tsd_set_arena(unsigned i) {
  tsd_t *tsd = tsd_get();
  if (tsd->state != TSD_NOMINAL) tsd_boot(tsd);
  arena_t *to = arena_get(i), *from = arena_get(tsd->arena);
  if (to == NULL) return false;
  if (from) atomic_fetch_sub_explicit(&from->nthreads, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&to->nthreads, 1, memory_order_relaxed);
  tsd->arena = (uint16_t)i;
  return true;
}

void tsd_ensure(void) {
  tsd_t *tsd = tsd_get();
  if (tsd->state == TSD_UNINIT) tsd_boot(tsd);
}

unsigned tsd_arena(void) {
  tsd_ensure();
  return tsd_get()->arena;
}

/* ---- profiling hand-off --------------------------------------------------- */

static void prof_slot_record(void *p, void *tctx, size_t size) {
  span_t *s = pagemap_get(p);
  if (s->kind == SPAN_LARGE) {
    s->large_tctx = tctx;
    s->large_size = size;
    return;
  }
  prof_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  if (ps == NULL) {
    size_t bytes = sizeof(prof_slot_t) * sc_info[s->cls].nslots;
    prof_slot_t *fresh = base_alloc(bytes);
    if (fresh == NULL) return; /* no metadata memory: leave unrecorded */
    if (atomic_compare_exchange_strong(&s->prof, &ps, fresh)) ps = fresh;
    else base_free(fresh, bytes);
    /* frees in this span now look for samples */
    atomic_store_explicit(&s->free_fast, 0, memory_order_relaxed);
  }
  ps[span_slot_index(s, p)] = prof_slot_pack(tctx, size);
}

/* p's record in small span s, or NULL while nothing in s was sampled. */
static prof_slot_t *prof_slot_small(span_t *s, const void *p) {
  prof_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  return ps != NULL ? ps + span_slot_index(s, p) : NULL;
}

/* If p was sampled, tells the profiler it is gone. */
static void prof_slot_release(span_t *s, void *p) {
  void *tctx;
  size_t size;
  if (s->kind == SPAN_LARGE) {
    if ((tctx = s->large_tctx) == NULL) return;
    size = s->large_size;
    s->large_tctx = NULL;
  } else {
    prof_slot_t *ps = prof_slot_small(s, p);
    if (ps == NULL || *ps == 0) return;
    tctx = prof_slot_tctx(*ps);
    size = prof_slot_size(*ps);
    *ps = 0;
  }
  prof_sample_free(tctx, size);
}

static bool prof_slot_sampled(span_t *s, void *p) {
  if (s->kind == SPAN_LARGE) return s->large_tctx != NULL;
  prof_slot_t *ps = prof_slot_small(s, p);
  return ps != NULL && *ps != 0;
}

/* ---- allocation ------------------------------------------------------------ */

/* Everything but a small block from a non-empty thread cache: a refill,
 * no cache, alignment, a page run of its own, a large block. */
static NALLOC_NOINLINE void *alloc_other(tsd_t *tsd, size_t size, size_t align,
                                         bool zero, bool own_page) {
  if (unlikely(size > MAX_REQUEST || align > MAX_REQUEST)) {
    errno = ENOMEM;
    return NULL;
  }
  size_t csize = size;
  if (align > 16 && align <= PAGE) csize = size < align ? align : size;
  if (csize <= SC_SMALL_MAX && align <= PAGE && !own_page) {
    unsigned cls = sc_index(csize);
    if (align > 16)
      while (sc_info[cls].size % align) cls++; /* powers of two are classes */
    tcache_t *tc = tsd->tcache;
    tbin_t *b = &tc->bins[cls];
    void *p = NULL;
    if (b->count) {
      p = b->slots[--b->count];
    } else if (b->max) {
      p = tcache_refill(tsd, tc, cls);
    } else {
      arena_t *a = arena_get(tsd->state == TSD_UNINIT ? 0 : tsd->arena);
      if (a == NULL || arena_refill(a, cls, &p, 1) != 1) p = NULL;
    }
    if (unlikely(p == NULL)) {
      errno = ENOMEM;
      return NULL;
    }
    if (zero) memset(p, 0, size);
    return p;
  }
  arena_t *a = arena_get(tsd->state == TSD_UNINIT ? 0 : tsd->arena);
  if (a == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  return arena_alloc_large(a, size ? size : 1, align, zero);
}

/* `own_page`: serve a small request from a page run of its own, as the
 * profiler asks for sampled blocks (see malloc_sampled). The common case,
 * a small block the thread cache holds, is inline. */
static inline void *alloc_core(tsd_t *tsd, size_t size, size_t align,
                               bool zero, bool own_page) {
  if (likely(size <= SC_SMALL_MAX && align <= 16 && !own_page)) {
    tbin_t *b = &tsd->tcache->bins[sc_index(size)];
    if (likely(b->count != 0)) {
      void *p = b->slots[--b->count];
      if (zero) memset(p, 0, size);
      return p;
    }
  }
  return alloc_other(tsd, size, align, zero, own_page);
}

/* A request the profiler samples (the countdown went below zero). A
 * sampled block gets a page run of its own when the profiler says samples
 * are rare, as in jemalloc: then small spans hold no sampled block, and
 * free's fast path never has to ask whether a block was sampled. Denser
 * sampling, and exact mode, keep sampled blocks in small spans (per-slot
 * records). Kept out of malloc_slow, so that a refill does not pay for
 * this path's registers. */
static NALLOC_NOINLINE void *malloc_sampled(tsd_t *tsd, size_t size,
                                            size_t align, bool zero,
                                            const void *caller,
                                            const void *frame) {
  void *tctx = NULL;
  bool own_page = false;
  if (tsd->reentrant == 0 && tsd->state == TSD_NOMINAL)
    tctx = prof_sample(tsd, size, caller,
                       frame ? frame : __builtin_frame_address(0), &own_page);
  void *p = alloc_core(tsd, size, align, zero, own_page);
  if (unlikely(tctx != NULL)) {
    if (p != NULL) prof_slot_record(p, tctx, size);
    else prof_sample_cancel(tsd, tctx, size);
  }
  return p;
}

void *malloc_slow(size_t size, size_t align, bool zero, const void *caller,
                  const void *frame) {
  tsd_t *tsd = tsd_get();
  if (unlikely(tsd->state != TSD_NOMINAL)) tsd_boot(tsd);
  int64_t charge = size > ((size_t)1 << 62) ? (int64_t)1 << 62 : (int64_t)size;
  tsd->prof_countdown -= charge;
  if (unlikely(tsd->prof_countdown < 0)) {
    if (opt_prof) return malloc_sampled(tsd, size, align, zero, caller, frame);
    tsd->prof_countdown = INT64_MAX;
  }
  return alloc_core(tsd, size, align, zero, false);
}

/* ---- free ------------------------------------------------------------------ */

static _Noreturn void bad_pointer(const char *fn, const void *p) {
  nalloc_fatal("%s(%p): invalid pointer: not a block nalloc returned, or already "
               "freed", fn, p);
}

/* The span of p, checked: p must be the start of a live block. */
static span_t *span_checked(const char *fn, void *p, span_t *s) {
  if (s == NULL) s = pagemap_get(p);
  if (s == NULL || (uintptr_t)p < s->start || (uintptr_t)p >= span_end(s))
    bad_pointer(fn, p);
  if (s->kind == SPAN_SMALL) {
    uintptr_t off = (uintptr_t)p - s->start;
    if ((uintptr_t)sc_slot_of(s->cls, off) * sc_info[s->cls].size != off) bad_pointer(fn, p);
  } else if (s->kind != SPAN_LARGE || (uintptr_t)p != s->start) {
    bad_pointer(fn, p);
  }
  return s;
}

/* p passed span_slot_ok for s: it starts a slot of a small span, or it is
 * the first byte of a large span or free run (slot_size 0 makes any other
 * offset fail, and a record keeps stale slot sizes only while it is not
 * small, which the kind checks below catch). */
void free_checked(void *p, span_t *s) {
  uint8_t kind = s->kind;
  if (unlikely(kind != SPAN_SMALL)) {
    if (kind != SPAN_LARGE || (uintptr_t)p != s->start) bad_pointer("free", p);
    prof_slot_release(s, p);
    arena_free_large(s);
    return;
  }
  prof_slot_release(s, p);
  tcache_t *tc = tsd_get()->tcache;
  tbin_t *b = &tc->bins[s->cls];
  if (b->max == 0) {
    arena_flush(&p, 1);
    return;
  }
  if (b->count > 0 && b->slots[b->count - 1] == p)
    nalloc_fatal("free(%p): double free", p);
  if (b->count == b->max) tcache_flush_bin(tc, s->cls, b->max / 2);
  b->slots[b->count++] = p;
}

void free_slow(void *p, span_t *s) {
  free_checked(p, span_checked("free", p, s));
}

static size_t span_usable(span_t *s) {
  return s->kind == SPAN_SMALL ? sc_info[s->cls].size : s->usize;
}

size_t entry_usable_size(void *p) {
  if (p == NULL) return 0;
  return span_usable(span_checked("malloc_usable_size", p, NULL));
}

/* Charges a realloc that may stay in place to the sampling countdown:
 * false (nothing charged) when the request is to be sampled. */
static bool realloc_charge(size_t size) {
  tsd_t *tsd = tsd_get();
  int64_t charge = size > ((size_t)1 << 62) ? (int64_t)1 << 62 : (int64_t)size;
  if (tsd->prof_countdown - charge < 0) return false;
  tsd->prof_countdown -= charge;
  return true;
}

void *entry_realloc(void *p, size_t size, const void *caller) {
  if (p == NULL) return entry_alloc(size, false, caller);
  if (size == 0) {
    entry_free(p);
    return NULL;
  }
  span_t *s = span_checked("realloc", p, NULL);
  size_t old = span_usable(s);
  /* A realloc is an allocation of `size` for the sampling countdown,
   * whether or not the block moves (else a block that grows in place is
   * never sampled). A sampled request, like a sampled object (whose record
   * must go to the realloc caller's stack), takes the moving path, where
   * malloc_slow charges the countdown itself. */
  if (!prof_slot_sampled(s, p) && realloc_charge(size)) {
    if (s->kind == SPAN_SMALL && size <= SC_SMALL_MAX && sc_index(size) == s->cls)
      return p;
    if (s->kind == SPAN_LARGE && size > SC_SMALL_MAX && size <= MAX_REQUEST &&
        arena_resize_large(s, size))
      return p;
  }
  void *q = malloc_slow(size, 0, false, caller, NULL);
  if (q == NULL) return NULL; /* the old block stays valid */
  memcpy(q, p, old < size ? old : size);
  entry_free(p);
  return q;
}

static bool pow2(size_t x) { return x && (x & (x - 1)) == 0; }

/* posix_memalign, aligned_alloc, memalign, valloc, pvalloc: the checks
 * differ as glibc's do; the allocation is one path. */
void *entry_aligned(size_t align, size_t size, int kind, int *err, const void *caller) {
  *err = 0;
  switch (kind) {
  case ALIGNED_POSIX:
    if (!pow2(align) || align % sizeof(void *)) {
      *err = EINVAL;
      return NULL;
    }
    break;
  case ALIGNED_C11:
    if (!pow2(align)) {
      *err = EINVAL;
      return NULL;
    }
    break;
  case ALIGNED_MEMALIGN:
    if (align > SIZE_MAX / 2 + 1) {
      *err = EINVAL;
      return NULL;
    }
    if (!pow2(align)) align = align ? (size_t)1 << (64 - __builtin_clzl(align)) : 1;
    break;
  case ALIGNED_VALLOC:
    align = PAGE;
    break;
  case ALIGNED_PVALLOC:
    align = PAGE;
    if (size > SIZE_MAX - PAGE) {
      *err = ENOMEM;
      return NULL;
    }
    size = size ? ALIGN_UP(size, PAGE) : PAGE;
    break;
  }
  if (align <= 16) {
    void *p = entry_alloc(size, false, caller);
    if (p == NULL) *err = ENOMEM;
    return p;
  }
  void *p = malloc_slow(size, align, false, caller, NULL);
  if (p == NULL) *err = ENOMEM;
  return p;
}

int entry_trim(size_t pad) {
  (void)pad;
  tsd_t *tsd = tsd_get();
  if (tsd->state == TSD_NOMINAL) tcache_flush_all(tsd->tcache);
  size_t purged = 0;
  for (unsigned i = 0; i < ARENAS_MAX; i++) {
    arena_t *a = atomic_load_explicit(&arenas[i], memory_order_acquire);
    if (a != NULL) purged += arena_purge(a, true);
  }
  return purged > 0;
}

/* ---- fork -------------------------------------------------------------------
 * glibc's fork runs the prepare handlers before it takes its stdio list
 * lock. Taking nalloc's locks first would deadlock against a thread that
 * holds that lock (fflush(NULL), fopen) and is waiting in malloc, so the
 * handler takes the (recursive) stdio list lock itself, before any of
 * nalloc's. */
extern void _IO_list_lock(void);
extern void _IO_list_unlock(void);
extern void _IO_list_resetlock(void);

void base_prefork(void);
void stats_prefork(void);
void stats_postfork_parent(void);
void stats_postfork_child(void);
void pagemap_prefork(void);
void pagemap_postfork_parent(void);
void pagemap_postfork_child(void);

void nalloc_prefork(void) {
  _IO_list_lock();
  prof_prefork();
  stats_prefork();
  arena_prefork();
  pagemap_prefork();
  base_prefork();
}

void nalloc_postfork_parent(void) {
  base_postfork_parent();
  pagemap_postfork_parent();
  arena_postfork_parent();
  stats_postfork_parent();
  prof_postfork_parent();
  _IO_list_unlock();
}

void nalloc_postfork_child(void) {
  tsd_get()->tid = 0; /* the child's thread has an id of its own */
  base_postfork_child();
  pagemap_postfork_child();
  arena_postfork_child();
  stats_postfork_child();
  prof_postfork_child();
  _IO_list_resetlock(); /* one thread left: no one else can hold it */
  tsd_t *tsd = tsd_get();
  if (tsd->state == TSD_NOMINAL) {
    arena_t *a = arena_get(tsd->arena);
    if (a) atomic_fetch_add_explicit(&a->nthreads, 1, memory_order_relaxed);
  }
}

/* ---- library constructor ------------------------------------------------------ */

static void stats_print_atexit(void) { entry_stats_print(); }

__attribute__((constructor)) static void nalloc_ctor(void) {
  nalloc_boot();
  tsd_t *tsd = tsd_get();
  /* libnuma allocates for nalloc here: not the program's memory, so not
   * sampled. */
  tsd->reentrant++;
  numa_discover();
  tsd->reentrant--;
  if (tsd->state == TSD_NOMINAL) tsd_set_arena(numa_pick_arena());
  prof_boot_late();
  background_start();
  if (opt_stats_print) {
    nalloc_log_keep();
    atexit(stats_print_atexit);
  }
}
