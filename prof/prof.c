/* prof.c -- the profiler's entry points for the allocator (prof_hook.h):
 * boot, the sampling countdown, the counts of a sampled object at malloc
 * and free, thread exit and fork.
 *
 * The fast path costs nothing here: alloc/ counts requested bytes down in
 * tsd->prof_countdown and calls in only when it goes negative. With
 * opt.prof off the countdown is never armed, so none of this runs. */
#include "prof_internal.h"
#include "prof_http.h"

/* ---- options and run-time switches ------------------------------------ */
bool opt_prof = false;
bool opt_prof_active = true;
bool opt_prof_thread_active_init = true;
unsigned opt_lg_prof_sample = 19;
ssize_t opt_lg_prof_interval = -1;
bool opt_prof_gdump = false;
bool opt_prof_final = false;
bool opt_prof_leak = false;
char opt_prof_prefix[PROF_PREFIX_MAX] = "nalloc";
unsigned opt_prof_unwind = PROF_UNWIND_DWARF;
unsigned opt_prof_depth = 128;
unsigned opt_prof_format = PROF_FORMAT_GPERFTOOLS;
int opt_prof_signal = 0;

static const char *const prof_unwind_choices[] = {"dwarf", "libunwind", "fp", NULL};
static const char *const prof_format_choices[] = {"gperftools", "jemalloc", NULL};

static const conf_entry_t prof_conf_rows[] = {
    {"prof", CONF_BOOL, &opt_prof, 0, 0, NULL, 0,
     "heap profiling on (needed by every other prof key)"},
    {"prof_active", CONF_BOOL, &opt_prof_active, 0, 0, NULL, 0,
     "sample from the start (else wait for prof.active=true)"},
    {"prof_thread_active_init", CONF_BOOL, &opt_prof_thread_active_init, 0, 0,
     NULL, 0, "initial thread.prof.active of new threads"},
    {"lg_prof_sample", CONF_UNSIGNED, &opt_lg_prof_sample, 0, PROF_LG_MAX, NULL,
     0, "mean bytes between samples = 2^N; 0 records every allocation"},
    {"lg_prof_interval", CONF_SSIZE, &opt_lg_prof_interval, -1, PROF_LG_MAX,
     NULL, 0, "dump every ~2^N bytes allocated (.i files); -1 off"},
    {"prof_gdump", CONF_BOOL, &opt_prof_gdump, 0, 0, NULL, 0,
     "dump on each new peak of the live heap (.u files)"},
    {"prof_final", CONF_BOOL, &opt_prof_final, 0, 0, NULL, 0,
     "dump at exit (.f file)"},
    {"prof_leak", CONF_BOOL, &opt_prof_leak, 0, 0, NULL, 0,
     "print a summary of live memory at exit and write the final profile"},
    {"prof_prefix", CONF_STR, opt_prof_prefix, 0, 0, NULL, PROF_PREFIX_MAX,
     "file name prefix of automatic dumps; empty turns them off"},
    {"prof_unwind", CONF_ENUM, &opt_prof_unwind, 0, 0, prof_unwind_choices, 0,
     "backtraces: dwarf (cached DWARF rules), libunwind or fp (frame pointers)"},
    {"prof_depth", CONF_UNSIGNED, &opt_prof_depth, 1, PROF_DEPTH_MAX, NULL, 0,
     "maximum frames per backtrace"},
    {"prof_format", CONF_ENUM, &opt_prof_format, 0, 0, prof_format_choices, 0,
     "gperftools (all readers) or jemalloc (jeprof, per-thread)"},
    {"prof_signal", CONF_SIGNAL, &opt_prof_signal, 0, 0, NULL, 0,
     "dump when this signal arrives (.s files); 0 off"},
};
const conf_table_t prof_conf_table = {prof_conf_rows, ARRAY_LEN(prof_conf_rows)};

_Atomic bool prof_active;
_Atomic bool prof_thread_active_init;
_Atomic bool prof_gdump_on;
_Atomic unsigned prof_lg_sample;
_Atomic unsigned prof_slow;

void prof_boot(void) {
  if (!opt_prof) return;
  if (opt_lg_prof_sample > PROF_LG_MAX) opt_lg_prof_sample = PROF_LG_MAX;
  if (opt_prof_depth < 1) opt_prof_depth = 1;
  if (opt_prof_depth > PROF_DEPTH_MAX) opt_prof_depth = PROF_DEPTH_MAX;
  os_stamp_boot(); /* the lifetimes' clock */
  atomic_store(&prof_lg_sample, opt_lg_prof_sample);
  atomic_store(&prof_active, opt_prof_active);
  atomic_store(&prof_thread_active_init, opt_prof_thread_active_init);
  atomic_store(&prof_gdump_on, opt_prof_gdump);
  if (opt_prof_gdump) atomic_fetch_or(&prof_slow, PROF_SLOW_GDUMP);
  prof_peak_boot();
}

void prof_boot_late(void) {
  if (!opt_prof) {
    /* only to say that prof_http needs prof:true; tested here so that an
     * unprofiled process does not fault prof_http.c's code page in */
    if (opt_prof_http[0] != '\0') prof_http_boot();
    return;
  }
  if (opt_prof_leak) { /* the report is printed at exit */
    nalloc_log_keep();
    prof_leak_boot();
  }
  prof_bt_prime();
  prof_triggers_boot_late();
  prof_http_boot();
}

/* ---- sampling ----------------------------------------------------------- */

/* The thread's next wait, drawn from its PRNG; kept for the interval
 * trigger's count of the bytes consumed. */
static inline int64_t tdata_draw(prof_tdata_t *td) {
  int64_t w = prof_draw_wait(&td->prng, td->lg);
  td->last_wait = w;
  return w;
}

int64_t prof_next_wait(tsd_t *tsd) {
  prof_tdata_t *td = tsd->prof_tdata;
  /* Exact mode without interval dumps: every allocation is sampled and
   * there are no bytes to account, so there is nothing to draw. */
  if (likely(td != NULL) && td->exact &&
      !(atomic_load_explicit(&td->attn, memory_order_relaxed) &
        PROF_ATTN_EXPIRED))
    return -1;
  /* A thread's tdata is made at its first sample (sample_setup), not
   * here at its start: most short-lived threads never sample, and the
   * tdata (~182 KB, mapped on its own, ten-odd pages touched) cost
   * bench-threads 10 page faults and an mmap/munmap a thread (1.4-2.7x
   * its unprofiled time). An expired one is renewed. With interval dumps
   * on, a thread's tdata is still made at its start: the trigger counts
   * the bytes of every wait, the first one included (td->last_wait). */
  if (td != NULL || opt_lg_prof_interval >= 0)
    td = prof_tdata_get(tsd, tsd->reentrant == 0);
  if (unlikely(td == NULL)) {
    /* No tdata yet (no sample yet, TSD not nominal, or out of metadata
     * memory): an unbiased wait from a shared seed is good enough for
     * this once. */
    static _Atomic uint64_t seed = 0x5eed;
    uint64_t s = atomic_fetch_add(&seed, 0x9e3779b97f4a7c15ull);
    return prof_draw_wait(&s, atomic_load_explicit(&prof_lg_sample,
                                                   memory_order_relaxed));
  }
  if (td->exact) return -1;
  /* Bytes consumed since the countdown was set: the interval trigger's
   * byte count (exact in exact mode, within one request otherwise). */
  if (opt_lg_prof_interval >= 0) {
    int64_t used = td->last_wait - tsd->prof_countdown;
    if (used > 0) prof_interval_account(tsd, td, (uint64_t)used);
  }
  return tdata_draw(td);
}

/* Owner-only counter update: relaxed load + store, no locked instruction
 * (the dump reads these with relaxed loads; see prof_tctx_read). */
#define OWN_ADD(a, d)                                                  \
  atomic_store_explicit(&(a), atomic_load_explicit(&(a),               \
                                                   memory_order_relaxed) + \
                                  (d),                                 \
                        memory_order_relaxed)

/* a[i] += v[i] for the nc counters of a tctx, the objects (i = 0) last
 * (a free's: see free_remote), written out for sampled mode's four (the
 * loop cost ~28 instructions at each sampled malloc and free on
 * bench-random). */
static NALLOC_ALWAYS_INLINE void own_add_all(_Atomic uint64_t *a, const uint64_t *v,
                                             unsigned nc) {
  if (likely(nc == C_N)) {
    OWN_ADD(a[C_UBYTES], v[C_UBYTES]);
    OWN_ADD(a[C_UOBJS], v[C_UOBJS]);
    OWN_ADD(a[C_BYTES], v[C_BYTES]);
    OWN_ADD(a[C_OBJS], v[C_OBJS]);
    return;
  }
  for (int i = (int)nc - 1; i >= 0; i--) OWN_ADD(a[i], v[i]);
}

/* The counts one object of `size` requested bytes adds to t: objects and
 * bytes, and when sampling the terms of their unbiased estimates
 * (prof_unbias_terms; exact mode keeps none). */
static NALLOC_ALWAYS_INLINE void sample_counts(const prof_tctx_t *t, size_t size,
                                               uint64_t v[C_N]) {
  v[C_OBJS] = 1;
  v[C_BYTES] = size;
  v[C_UOBJS] = v[C_UBYTES] = 0;
  if (t->lg != 0) {
    prof_terms_t u = prof_unbias_terms(size, t->lg);
    v[C_UOBJS] = u.uobjs;
    v[C_UBYTES] = u.ubytes;
  }
}
/* The estimate of bytes in the heap that such an object adds, for the
 * peak and gdump totals (only they need it). */
static NALLOC_ALWAYS_INLINE int64_t sample_est(const prof_tctx_t *t, size_t size,
                                               const uint64_t v[C_N]) {
  if (t->lg == 0) return (int64_t)size;
  return prof_terms_ubytes(size, t->lg, v[C_UBYTES]);
}

/* Everything but exact mode's case: sweep what the last dump found idle,
 * draw the next wait, make or renew the thread's tdata, and note the
 * request's size bucket. */
static NALLOC_NOINLINE prof_tdata_t *sample_setup(tsd_t *tsd, size_t size) {
  tsd->prof_busy++; /* sweeps, table rebuilds, new tdatas: see prof_postfork_child */
  prof_tdata_t *td = tsd->prof_tdata;
  if (td != NULL &&
      (atomic_load_explicit(&td->attn, memory_order_relaxed) & PROF_ATTN_SWEEP))
    prof_tdata_sweep(td);
  if (td == NULL) /* the thread's first sample: its PRNG draws from now on */
    prof_tdata_get(tsd, true);
  tsd->prof_countdown = prof_next_wait(tsd);
  td = tsd->prof_tdata;
  if (unlikely(td == NULL || (atomic_load_explicit(&td->attn,
                                                   memory_order_relaxed) &
                              PROF_ATTN_EXPIRED)))
    td = prof_tdata_get(tsd, true);
  if (td != NULL) td->want_bkt = td->lg != 0 ? (uint8_t)prof_bkt(size) : 0;
  tsd->prof_busy--;
  return td;
}

/* The sampled path beyond exact mode's plain count: the size bucket's
 * tctx, unbiased counts, the peak profile, the gdump total and pending
 * automatic dumps. */
static void *sample_slow_busy(tsd_t *tsd, prof_tdata_t *td, prof_tctx_t *t,
                              size_t size, unsigned *how) {
  if (t->bkt != td->want_bkt &&
      (t = prof_tctx_bucket_fast(td, t, td->want_bkt)) == NULL)
    return NULL;
  uint64_t v[C_N];
  sample_counts(t, size, v);
  unsigned slow = atomic_load_explicit(&prof_slow, memory_order_relaxed);
  if (slow & PROF_SLOW_PEAK) prof_peak_cow(t);
  _Atomic uint64_t *a = prof_tctx_cnt(t, PC_ALLOC);
  own_add_all(a, v, prof_tctx_nc(t));
  *how = (t->lg >= 16 ? PROF_OWN_PAGE : 0) | (t->lg != 0 ? PROF_TIMED : 0);
  if (slow & (PROF_SLOW_PEAK | PROF_SLOW_GDUMP)) {
    int64_t est = sample_est(t, size, v);
    if (slow & PROF_SLOW_PEAK) {
      td->pk_d += est;
      if (td->pk_d > td->pk_hi) prof_peak_rise(td);
    }
    if (slow & PROF_SLOW_GDUMP) prof_gdump_account(tsd, est);
  }
  if (slow & PROF_SLOW_PENDING) prof_triggers_run_pending(tsd);
  return t;
}

static NALLOC_NOINLINE void *sample_slow(tsd_t *tsd, prof_tdata_t *td,
                                         prof_tctx_t *t, size_t size,
                                         unsigned *how) {
  tsd->prof_busy++; /* a new tctx goes into the owner's table, dumps run */
  void *r = sample_slow_busy(tsd, td, t, size, how);
  tsd->prof_busy--;
  return r;
}

/* Sampled mode's common case, sample_slow's without its frame (no call
 * but the tail calls: no register to save) and its prof_busy (it changes
 * no table): nothing to do for the peak, gdump or a dump, and the size
 * bucket's tctx found by the first probe (the walk's tctx is of the
 * bucket of the stack's last sample). Out of prof_sample, whose exact
 * mode it cost a register (a spill in the replay's word check). */
static NALLOC_NOINLINE void *sample_fast(tsd_t *tsd, prof_tdata_t *td,
                                         prof_tctx_t *t, size_t size,
                                         unsigned *how, unsigned slow) {
  if (t->lg != 0 && likely(slow == 0)) {
    prof_tctx_t *b = t->bkt == td->want_bkt
                         ? t
                         : prof_tctx_bucket_probe(td, t, td->want_bkt);
    if (likely(b != NULL)) {
      nalloc_assert(b->lg == t->lg);
      prof_terms_t u = prof_unbias_terms(size, b->lg);
      _Atomic uint64_t *a = &b->u.s.cnt[PC_ALLOC * C_N];
      OWN_ADD(a[C_UBYTES], u.ubytes); /* own_add_all's order */
      OWN_ADD(a[C_UOBJS], u.uobjs);
      OWN_ADD(a[C_BYTES], size);
      OWN_ADD(a[C_OBJS], 1);
      *how = (b->lg >= 16 ? PROF_OWN_PAGE : 0) | PROF_TIMED;
      return b;
    }
  }
  return sample_slow(tsd, td, t, size, how);
}

/* One call per sampled allocation, so that an exact profile pays for one
 * call and, most often, no stack walk (prof_bt_tctx): a malloc costs it
 * two counter updates (and with the peak profile kept, an epoch check
 * and a thread-local sum). */
NALLOC_NO_ASAN void *prof_sample(tsd_t *tsd, size_t size, const void *caller,
                                 const void *frame, unsigned *how) {
  prof_tdata_t *td = tsd->prof_tdata;
  unsigned attn = td != NULL ? atomic_load_explicit(&td->attn,
                                                    memory_order_relaxed)
                              : PROF_ATTN_EXPIRED;
  if (likely(attn == 0 && td->exact)) {
    tsd->prof_countdown = -1; /* exact: nothing to draw, nothing to count */
  } else if (likely(attn == 0 && opt_lg_prof_interval < 0)) {
    /* sampled mode's common case: sample_setup's draw and bucket, without
     * its calls (prof_next_wait, prof_tdata_get): ~50 instructions a
     * sample on bench-random */
    tsd->prof_countdown = tdata_draw(td);
    td->want_bkt = (uint8_t)prof_bkt(size);
  } else if ((td = sample_setup(tsd, size)) == NULL) {
    return NULL;
  }
  if (!atomic_load_explicit(&prof_active, memory_order_relaxed) ||
      !atomic_load_explicit(&td->active, memory_order_relaxed))
    return NULL;
  prof_tctx_t *t = prof_bt_tctx(td, caller, frame);
  if (unlikely(t == NULL)) return NULL;
  unsigned slow = atomic_load_explicit(&prof_slow, memory_order_relaxed);
  if (unlikely(t->lg != 0 || (slow & ~(unsigned)PROF_SLOW_PEAK) != 0))
    return sample_fast(tsd, td, t, size, how, slow);
  if (unlikely(slow)) prof_peak_cow(t);
  OWN_ADD(prof_tctx_xcnt(t, PC_ALLOC)[C_OBJS], 1);
  OWN_ADD(prof_tctx_xcnt(t, PC_ALLOC)[C_BYTES], size);
  if (unlikely(slow)) {
    td->pk_d += (int64_t)size;
    if (unlikely(td->pk_d > td->pk_hi)) prof_peak_rise(td);
  }
  return t;
}

void prof_sample_cancel(tsd_t *tsd, void *tctx, size_t size) {
  prof_tctx_t *t = tctx;
  prof_tdata_t *td = tsd->prof_tdata;
  if (atomic_load_explicit(&t->owner, memory_order_relaxed) !=
      (prof_trec_t *)td) { /* reset meanwhile: count it freed */
    prof_sample_free(tctx, size, NULL, 0);
    return;
  }
  uint64_t v[C_N];
  sample_counts(t, size, v);
  int64_t est = sample_est(t, size, v);
  _Atomic uint64_t *a = prof_tctx_cnt(t, PC_ALLOC);
  for (int i = (int)prof_tctx_nc(t) - 1; i >= 0; i--) OWN_ADD(a[i], -v[i]);
  unsigned slow = atomic_load_explicit(&prof_slow, memory_order_relaxed);
  if (slow & PROF_SLOW_PEAK) td->pk_d -= est; /* it never existed */
  if (slow & PROF_SLOW_GDUMP) prof_gdump_account(tsd, -est);
}

/* A free's part in the peak total, before the tctx's counts move. */
static void free_peak(tsd_t *tsd, prof_tdata_t *td, prof_tctx_t *t,
                      int64_t est) {
  if (td == NULL && tsd->state == TSD_NOMINAL && tsd->reentrant == 0)
    td = prof_tdata_get(tsd, true);
  if (td != NULL) {
    td->pk_d -= est;
    if (td->pk_d < td->pk_lo) prof_peak_fall(td, est);
  } else {
    prof_peak_sub_global(est);
  }
  prof_peak_cow(t);
}

/* Another thread's object (or a thread that exited, or a tdata replaced
 * by prof.reset). The object count goes last: once the tctx reads as
 * empty it may be freed (see prof_internal.h), and this is our last touch.
 * When the owner is gone its own counters are frozen, so we can tell that
 * this free empties the tctx and ask for a sweep. */
static void free_remote(prof_tctx_t *t, const uint64_t v[C_N]) {
  bool dead = atomic_load_explicit(&t->dead, memory_order_acquire);
  uint64_t lim = 0;
  if (dead)
    lim = atomic_load_explicit(&prof_tctx_cnt(t, PC_ALLOC)[C_OBJS],
                               memory_order_relaxed) -
          atomic_load_explicit(&prof_tctx_cnt(t, PC_FREED)[C_OBJS],
                               memory_order_relaxed);
  _Atomic uint64_t *r = prof_tctx_cnt(t, PC_REMOTE);
  for (int i = (int)prof_tctx_nc(t) - 1; i > C_OBJS; i--)
    if (v[i] != 0) /* exact mode has no unbiased counts to add */
      atomic_fetch_add_explicit(&r[i], v[i], memory_order_release);
  uint64_t old =
      atomic_fetch_add_explicit(&r[C_OBJS], 1, memory_order_release);
  if (dead && old + 1 == lim) prof_dead_zeroed();
}

/* The owner frees its latest block: nothing was allocated in between, a
 * temporary allocation in heaptrack's sense. Exact mode only: when
 * sampling, prof_last is the latest sampled block, not the latest block. */
static NALLOC_ALWAYS_INLINE void free_temp(tsd_t *tsd, prof_tctx_t *t,
                                           const void *p) {
  if (p == tsd->prof_last) {
    tsd->prof_last = NULL;
    OWN_ADD(t->temp, 1);
  }
}

static NALLOC_NOINLINE void sample_free_slow(tsd_t *tsd, prof_tdata_t *td,
                                             prof_tctx_t *t, size_t size,
                                             const void *p, uint64_t birth) {
  unsigned off = atomic_load_explicit(&prof_slow, memory_order_relaxed);
  if (off & PROF_SLOW_OFF) return; /* fork child: the records may be mid-update */
  uint64_t v[C_N];
  sample_counts(t, size, v);
  unsigned slow = atomic_load_explicit(&prof_slow, memory_order_relaxed);
  if (slow & (PROF_SLOW_PEAK | PROF_SLOW_GDUMP)) {
    int64_t est = sample_est(t, size, v);
    if (slow & PROF_SLOW_GDUMP) prof_gdump_account(tsd, -est);
    if (slow & PROF_SLOW_PEAK) free_peak(tsd, td, t, est);
  }
  if (birth != 0) { /* before the last touch (objects) */
    prof_life_add(t, os_stamp_ns_inline(birth, os_stamp()));
  }
  if (atomic_load_explicit(&t->owner, memory_order_relaxed) ==
      (prof_trec_t *)td) {
    if (t->lg == 0) free_temp(tsd, t, p);
    own_add_all(prof_tctx_cnt(t, PC_FREED), v, prof_tctx_nc(t));
    return;
  }
  free_remote(t, v);
}

/* The owner's free in exact mode with the peak profile kept, when it
 * leaves a peak or copies t (pk_d already counts it): out of line, so
 * that prof_sample_free needs no stack frame. */
static NALLOC_NOINLINE void free_own_peak(tsd_t *tsd, prof_tdata_t *td,
                                          prof_tctx_t *t, size_t size,
                                          const void *p) {
  if (td->pk_d < td->pk_lo) prof_peak_fall(td, (int64_t)size);
  prof_peak_cow(t);
  free_temp(tsd, t, p);
  OWN_ADD(prof_tctx_xcnt(t, PC_FREED)[C_BYTES], size);
  OWN_ADD(prof_tctx_xcnt(t, PC_FREED)[C_OBJS], 1);
}

void prof_sample_free(void *tctx, size_t size, const void *p, uint64_t birth) {
  prof_tctx_t *t = tctx;
  tsd_t *tsd = tsd_get();
  prof_tdata_t *td = tsd->prof_tdata;
  unsigned slow = atomic_load_explicit(&prof_slow, memory_order_relaxed);
  if (likely(atomic_load_explicit(&t->owner, memory_order_relaxed) ==
                 (prof_trec_t *)td &&
             t->lg == 0 && (slow & ~(unsigned)PROF_SLOW_PEAK) == 0)) {
    if (unlikely(slow)) { /* the peak profile: only tail calls here */
      td->pk_d -= (int64_t)size;
      if (unlikely(td->pk_d < td->pk_lo ||
                   atomic_load_explicit(prof_tctx_pk_epoch(t), memory_order_relaxed) !=
                       atomic_load_explicit(&prof_pk_epoch,
                                            memory_order_relaxed))) {
        free_own_peak(tsd, td, t, size, p);
        return;
      }
    }
    free_temp(tsd, t, p);
    OWN_ADD(prof_tctx_xcnt(t, PC_FREED)[C_BYTES], size);
    OWN_ADD(prof_tctx_xcnt(t, PC_FREED)[C_OBJS], 1);
    return;
  }
  sample_free_slow(tsd, td, t, size, p, birth);
}

void prof_thread_arena(tsd_t *tsd, unsigned i) {
  prof_tdata_t *td = tsd->prof_tdata;
  if (td != NULL) prof_tdata_moved(td, node_of_arena(i));
}

size_t prof_stats_mapped(void) { return prof_mem_mapped(); }

void prof_stats_print(void) {
  nalloc_log("prof: mapped=%zu gctx=%zu (%zu stacks) tctx=%zu (%zu) "
             "tdata=%zu (%zu threads) tables=%zu",
             prof_mem_mapped(), prof_mem_used(PM_GCTX),
             atomic_load(&prof_ngctx_total), prof_mem_used(PM_TCTX),
             atomic_load(&prof_ntctx_total),
             prof_mem_used(PM_TDATA) + prof_mem_used(PM_TREC),
             atomic_load(&prof_ntdata_total), prof_mem_used(PM_TAB));
}

void prof_thread_exit(tsd_t *tsd) {
  if (!opt_prof) return;
  prof_tdata_detach(tsd);
}

/* ---- fork --------------------------------------------------------------- */

void prof_prefork(void) {
  if (!opt_prof) return;
  nlock_prefork(&prof_dump_lock);
  nlock_prefork(&prof_tdatas_lock);
  nlock_prefork(&prof_gctx_lock);
  prof_bt_prefork();
  prof_mem_prefork();
}

void prof_postfork_parent(void) {
  if (!opt_prof) return;
  prof_mem_postfork_parent();
  prof_bt_postfork_parent();
  nlock_postfork_parent(&prof_gctx_lock);
  nlock_postfork_parent(&prof_tdatas_lock);
  nlock_postfork_parent(&prof_dump_lock);
}

/* fork() from a signal handler that interrupted the profiler in the
 * forking thread (a lock it held or waited out, or its tables: prof_busy,
 * or reentrant, raised around the stack walk and lookup) leaves records
 * the child cannot trust: a table being resized, a list being linked. The
 * child does not repair them; it stops profiling (opt.prof reads false,
 * as if prof:false; no dumps, not even at exit) and frees of blocks
 * sampled before the fork leave their records alone (PROF_SLOW_OFF). The
 * records stay allocated: nothing of them is freed or read again. */
static void prof_off_child(tsd_t *tsd) {
  opt_prof = false;
  atomic_store(&prof_active, false);
  atomic_fetch_or(&prof_slow, PROF_SLOW_OFF);
  tsd->prof_countdown = INT64_MAX;
  tsd->prof_busy = 0;
  nalloc_log("fork from a signal handler that interrupted the profiler: "
             "profiling is off in this child");
}

void prof_postfork_child(void) {
  if (!opt_prof) return;
  tsd_t *tsd = tsd_get();
  bool broken = prof_mem_postfork_child();
  broken |= prof_bt_postfork_child();
  broken |= nlock_postfork_child(&prof_gctx_lock);
  broken |= nlock_postfork_child(&prof_tdatas_lock);
  broken |= nlock_postfork_child(&prof_dump_lock);
  broken |= tsd->prof_busy != 0 || tsd->reentrant != 0;
  if (broken) prof_off_child(tsd);
  prof_http_postfork_child(); /* closes the parent's socket; serves if on */
  if (broken) return;
  prof_data_postfork_child(tsd);
  prof_triggers_postfork_child();
}
