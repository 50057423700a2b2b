/* prof_peak.c -- the peak-heap profile (prof_peak, prof.dump_peak,
 * prof_peak_final): the live counts of every stack at the moment the
 * profiled live heap was highest, kept in memory and written on demand.
 *
 * Nothing is copied while the heap grows. When it first shrinks after a
 * new highest point, that state is the peak: the global epoch moves on, and
 * from then on the first change to each tctx copies its live counts
 * (copy-on-write, the tctx's PC_PK set stamped with the epoch). A tctx untouched
 * since still holds its peak counts in its live counters. So the peak
 * costs one copy per tctx touched after each new peak, and an epoch check
 * per update; a heap that never sets a new peak costs the check only.
 *
 * The live total is counted per thread (tdata->pk_d, in bytes: requested
 * in exact mode, the unbiased estimate when sampling) and published to
 * one shared counter only when it moved by PK_B (64 KiB; when sampling at
 * rate R, the larger of that and 4R: pk_step), or when it may have set
 * a new peak (pk_hi: the room left below the highest total) or left one
 * (pk_lo: any decrease while this thread holds a peak). With one thread
 * every decision sees the exact total, so the peak profile is exact (in
 * exact mode). With several, a thread decides from the shared total plus
 * its own part: the moment chosen can be off by what the other threads
 * have not published, at most pk_step bytes each; the counts written are
 * still those of one moment (each tctx's copy of the same epoch). */
#include "prof_internal.h"

#define PK_B ((int64_t)64 << 10)

/* The move that a thread keeps to itself: PK_B, or when sampling at rate
 * R = 2^lg, 4R. A sampled object counts its estimate (about R for every
 * block much smaller than R), so with PK_B every sampled malloc and free
 * published (an atomic add on the shared total, and bench-random spent
 * ~46 instructions a sample in prof_peak_rise and prof_peak_fall); with
 * 4R a thread publishes after a net move of about four samples. The
 * moment chosen can be off by 4R per other thread, well inside the
 * estimate's own spread (sd ~ R sqrt(live samples)); with one thread the
 * decision is still exact (pk_hi is the room left below the highest). */
static int64_t pk_step(unsigned lg) {
  if (lg == 0) return PK_B;
  if (lg > 40) return (int64_t)1 << 42;
  int64_t b = (int64_t)4 << lg;
  return b > PK_B ? b : PK_B;
}

bool opt_prof_peak = false;
bool opt_prof_peak_final = false;

static const conf_entry_t prof_peak_conf_rows[] = {
    {"prof_peak", CONF_BOOL, &opt_prof_peak, 0, 0, NULL, 0,
     "keep the peak-heap profile in memory (prof.dump_peak writes it)"},
    {"prof_peak_final", CONF_BOOL, &opt_prof_peak_final, 0, 0, NULL, 0,
     "write the peak-heap profile at exit (.p file); implies prof_peak"},
};
const conf_table_t prof_peak_conf_table = {prof_peak_conf_rows,
                                           ARRAY_LEN(prof_peak_conf_rows)};

_Atomic uint64_t prof_pk_epoch = 1;
static _Atomic int64_t pk_total; /* published live bytes */
static _Atomic int64_t pk_max;   /* highest total seen */
static _Atomic int64_t pk_level; /* the total at the copied peak */
static _Atomic bool pk_at;       /* the current state is the peak */

void prof_peak_boot(void) {
  if (opt_prof_peak_final) opt_prof_peak = true;
  atomic_store(&pk_at, true); /* an empty heap is its own peak so far */
  if (opt_prof_peak)
    atomic_fetch_or_explicit(&prof_slow, PROF_SLOW_PEAK, memory_order_relaxed);
}

static void max_at_least(_Atomic int64_t *m, int64_t v) {
  int64_t o = atomic_load_explicit(m, memory_order_relaxed);
  while (o < v &&
         !atomic_compare_exchange_weak_explicit(m, &o, v, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

/* A thread's bounds after it published (its pk_d is 0). Holding a peak,
 * every decrease must come here; otherwise only a new highest total or a
 * move of PK_B. */
static void bounds(prof_tdata_t *td, bool hold, int64_t total) {
  int64_t b = pk_step(td->lg);
  if (hold) {
    td->pk_hi = b;
    td->pk_lo = INT64_MAX;
    return;
  }
  int64_t room = atomic_load_explicit(&pk_max, memory_order_relaxed) - total;
  td->pk_hi = room < b ? (room > 0 ? room : 0) : b;
  td->pk_lo = -b;
}

static int64_t publish(prof_tdata_t *td) {
  int64_t d = td->pk_d;
  td->pk_d = 0;
  return atomic_fetch_add_explicit(&pk_total, d, memory_order_relaxed) + d;
}

void prof_peak_rise(prof_tdata_t *td) {
  bool hold = td->pk_lo == INT64_MAX;
  int64_t total = publish(td);
  if (total > atomic_load_explicit(&pk_max, memory_order_relaxed)) {
    max_at_least(&pk_max, total);
    if (!atomic_load_explicit(&pk_at, memory_order_relaxed))
      atomic_store_explicit(&pk_at, true, memory_order_relaxed);
    hold = true;
  }
  bounds(td, hold, total);
}

/* The state just before this free of `s` bytes was the highest: it is the
 * peak from now on. The epoch moves before the freed tctx's counts do. */
static void leave_peak(int64_t level) {
  if (!atomic_exchange_explicit(&pk_at, false, memory_order_relaxed)) return;
  max_at_least(&pk_max, level);
  atomic_store_explicit(&pk_level, level, memory_order_relaxed);
  atomic_fetch_add_explicit(&prof_pk_epoch, 1, memory_order_release);
}

void prof_peak_fall(prof_tdata_t *td, int64_t s) {
  int64_t total = publish(td);
  if (atomic_load_explicit(&pk_at, memory_order_relaxed)) leave_peak(total + s);
  bounds(td, false, total);
}

void prof_peak_sub_global(int64_t bytes) {
  int64_t total =
      atomic_fetch_sub_explicit(&pk_total, bytes, memory_order_relaxed) - bytes;
  if (atomic_load_explicit(&pk_at, memory_order_relaxed))
    leave_peak(total + bytes);
}

/* Thread exit: its part of the total goes to the shared counter. */
void prof_peak_detach(prof_tdata_t *td) {
  if (td->pk_d != 0) (void)publish(td);
}

/* prof.reset: the peak starts again from the current state (the total
 * still counts objects sampled before, whose frees will subtract them). */
void prof_peak_reset(void) {
  atomic_store_explicit(&pk_max,
                        atomic_load_explicit(&pk_total, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(&pk_at, true, memory_order_relaxed);
  atomic_fetch_add_explicit(&prof_pk_epoch, 1, memory_order_release);
}

/* Copy-on-write of one tctx (prof_peak_cow found an older epoch). A CAS
 * decides who copies when the owner and a remote free race; the copier
 * marks the tctx busy while it writes, so that a dump never takes a half
 * copy for a whole one. */
void prof_peak_copy(prof_tctx_t *t) {
  uint64_t e = atomic_load_explicit(&prof_pk_epoch, memory_order_acquire);
  uint64_t te = atomic_load_explicit(prof_tctx_pk_epoch(t), memory_order_relaxed);
  if (te == e || te == PROF_PK_BUSY) return;
  if (!atomic_compare_exchange_strong_explicit(prof_tctx_pk_epoch(t), &te, PROF_PK_BUSY,
                                               memory_order_acquire,
                                               memory_order_relaxed))
    return;
  prof_cnt_t cur;
  prof_tctx_read(t, &cur, NULL);
  _Atomic uint64_t *pk = prof_tctx_cnt(t, PC_PK);
  for (unsigned i = 0, nc = prof_tctx_nc(t); i < nc; i++)
    atomic_store_explicit(&pk[i], cur.v[i], memory_order_relaxed);
  atomic_store_explicit(prof_tctx_pk_epoch(t), e, memory_order_release);
  /* the counter updates that follow must not be seen before the stamp */
  atomic_thread_fence(memory_order_release);
}

prof_peak_view_t prof_peak_view(void) {
  prof_peak_view_t v;
  v.now = atomic_load_explicit(&pk_at, memory_order_acquire);
  v.epoch = atomic_load_explicit(&prof_pk_epoch, memory_order_acquire);
  return v;
}

static void read_copy(prof_tctx_t *t, prof_cnt_t *cur) {
  _Atomic uint64_t *pk = prof_tctx_cnt(t, PC_PK);
  unsigned nc = prof_tctx_nc(t);
  for (unsigned i = 0; i < nc; i++)
    cur->v[i] = atomic_load_explicit(&pk[i], memory_order_relaxed);
  if (nc == PROF_EXACT_NC) prof_cnt_exact(cur);
}

/* Live counts of t at the peak: its copy if it changed since, else its
 * counters now. A copy made while we read the counters wins (the counters
 * may already have moved past the peak). */
void prof_peak_read(const prof_peak_view_t *v, prof_tctx_t *t,
                    prof_cnt_t *cur) {
  if (v->now) {
    prof_tctx_read(t, cur, NULL);
    return;
  }
  if (atomic_load_explicit(prof_tctx_pk_epoch(t), memory_order_acquire) == v->epoch) {
    read_copy(t, cur);
    return;
  }
  prof_tctx_read(t, cur, NULL);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(prof_tctx_pk_epoch(t), memory_order_acquire) == v->epoch)
    read_copy(t, cur);
}

bool prof_peak_held(prof_tctx_t *t) {
  if (!(atomic_load_explicit(&prof_slow, memory_order_relaxed) & PROF_SLOW_PEAK))
    return false;
  uint64_t te = atomic_load_explicit(prof_tctx_pk_epoch(t), memory_order_acquire);
  if (te == PROF_PK_BUSY) return true;
  return te == atomic_load_explicit(&prof_pk_epoch, memory_order_acquire) &&
         atomic_load_explicit(&prof_tctx_cnt(t, PC_PK)[C_OBJS],
                              memory_order_relaxed) != 0;
}

int64_t prof_peak_bytes(void) {
  return atomic_load_explicit(&pk_at, memory_order_relaxed)
             ? atomic_load_explicit(&pk_total, memory_order_relaxed)
             : atomic_load_explicit(&pk_level, memory_order_relaxed);
}
