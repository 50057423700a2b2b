/* prof_ctl.c -- the profiler's nalloc_ctl names (prof.*, thread.prof.*):
 * rows, and the handlers of the names that need code. The dispatcher
 * lives in alloc/ctl.c and makes each row's checks (ctl.h). Names and
 * meanings follow jemalloc's where jemalloc has them. With opt.prof off
 * every prof.* / thread.prof.* name answers ENOENT (CTL_PROF), as
 * jemalloc's do. The profiler's options are rows beside their variables
 * (prof.c, prof_http.c, prof_peak.c), as is prof.http_address. */
#include "prof_internal.h"

#include <string.h>

/* prof.dump and prof.dump_peak: the new value, a path, may be left out
 * (automatic name). */
static int prof_ctl_dump(const size_t *idx, void *oldp, size_t *oldlenp,
                         void *newp, size_t newlen) {
  (void)idx, (void)oldp, (void)oldlenp;
  const char *path = NULL;
  int e = ctl_in_opt(newp, newlen, &path, sizeof path);
  return e ? e : prof_dump_request(path);
}

static int prof_ctl_dump_peak(const size_t *idx, void *oldp, size_t *oldlenp,
                              void *newp, size_t newlen) {
  (void)idx, (void)oldp, (void)oldlenp;
  if (!opt_prof_peak) return ENOENT; /* nothing kept: needs prof_peak */
  const char *path = NULL;
  int e = ctl_in_opt(newp, newlen, &path, sizeof path);
  return e ? e : prof_dump_peak_request(path);
}

static int prof_ctl_gdump(const size_t *idx, void *oldp, size_t *oldlenp,
                          void *newp, size_t newlen) {
  (void)idx;
  int e = ctl_rw_bool(&prof_gdump_on, oldp, oldlenp, newp, newlen);
  if (e == 0 && newp != NULL) { /* the sampled path reads prof_slow only */
    if (atomic_load(&prof_gdump_on))
      atomic_fetch_or(&prof_slow, PROF_SLOW_GDUMP);
    else
      atomic_fetch_and(&prof_slow, ~(unsigned)PROF_SLOW_GDUMP);
  }
  return e;
}

static int prof_ctl_thread_active(const size_t *idx, void *oldp,
                                  size_t *oldlenp, void *newp, size_t newlen) {
  (void)idx;
  prof_tdata_t *td = prof_tdata_get(tsd_get(), true);
  if (td == NULL) return EAGAIN;
  return ctl_rw_bool(&td->active, oldp, oldlenp, newp, newlen);
}

static int prof_ctl_thread_name(const size_t *idx, void *oldp,
                                size_t *oldlenp, void *newp, size_t newlen) {
  (void)idx;
  prof_tdata_t *td = prof_tdata_get(tsd_get(), true);
  if (td == NULL) return EAGAIN;
  const char *nv = NULL;
  int e = ctl_in_opt(newp, newlen, &nv, sizeof nv);
  if (e) return e;
  if (newp != NULL) {
    if (nv == NULL) return EINVAL;
    for (size_t n = 0; nv[n]; n++) /* printable, one token: it ends a dump line */
      if (n + 1 >= PROF_NAME_MAX || nv[n] < 0x20 || nv[n] > 0x7e) return EINVAL;
  }
  const char *old = td->rec.name;
  e = ctl_out(oldp, oldlenp, &old, sizeof old);
  if (e) return e;
  if (nv != NULL) {
    nlock_lock(&prof_tdatas_lock);
    size_t n = strlen(nv);
    memcpy(td->rec.name, nv, n + 1);
    nlock_unlock(&prof_tdatas_lock);
  }
  return 0;
}

/* prof.reset: the new value, lg_sample, may be left out (keep it). */
static int prof_ctl_reset(const size_t *idx, void *oldp, size_t *oldlenp,
                          void *newp, size_t newlen) {
  (void)idx, (void)oldp, (void)oldlenp;
  size_t lg = atomic_load(&prof_lg_sample);
  int e = ctl_in_opt(newp, newlen, &lg, sizeof lg);
  if (e) return e;
  if (lg > PROF_LG_MAX) return EINVAL;
  prof_reset((unsigned)lg);
  return 0;
}

static uint64_t prof_ctl_lg_sample(void) {
  return atomic_load(&prof_lg_sample);
}

static uint64_t prof_ctl_interval(void) {
  return opt_lg_prof_interval < 0 ? 0 : (uint64_t)1 << opt_lg_prof_interval;
}

/* prof.stats.<kind>: bytes of profiler memory in use by each kind of
 * record; prof.stats.mapped: what the profiler's allocator has mapped;
 * prof.stats.n*: records alive. */
static uint64_t prof_ctl_mapped(void) { return prof_mem_mapped(); }
static uint64_t prof_ctl_gctx(void) { return prof_mem_used(PM_GCTX); }
static uint64_t prof_ctl_tctx(void) { return prof_mem_used(PM_TCTX); }
static uint64_t prof_ctl_tdata(void) {
  return prof_mem_used(PM_TDATA) + prof_mem_used(PM_TREC);
}
static uint64_t prof_ctl_tables(void) { return prof_mem_used(PM_TAB); }
static uint64_t prof_ctl_ngctx(void) { return atomic_load(&prof_ngctx_total); }
static uint64_t prof_ctl_ntctx(void) { return atomic_load(&prof_ntctx_total); }
static uint64_t prof_ctl_nthreads(void) { return atomic_load(&prof_ntdata_total); }

static const ctl_row_t prof_ctl_rows[] = {
    {"prof.dump", CTL_STR, CTL_WO, CTL_PROF, .fn = prof_ctl_dump},
    {"prof.active", CTL_BOOL, CTL_RW, CTL_PROF, .v.ab = &prof_active},
    {"prof.reset", CTL_SIZE, CTL_WO, CTL_PROF, .fn = prof_ctl_reset},
    {"prof.lg_sample", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_lg_sample},
    {"prof.interval", CTL_U64, CTL_RO, CTL_PROF, .get = prof_ctl_interval},
    {"prof.gdump", CTL_BOOL, CTL_RW, CTL_PROF, .fn = prof_ctl_gdump},
    {"prof.thread_active_init", CTL_BOOL, CTL_RW, CTL_PROF, .v.ab = &prof_thread_active_init},
    {"thread.prof.active", CTL_BOOL, CTL_RW, CTL_PROF, .fn = prof_ctl_thread_active},
    {"thread.prof.name", CTL_STR, CTL_RW, CTL_PROF, .fn = prof_ctl_thread_name},
    {"prof.dump_peak", CTL_STR, CTL_WO, CTL_PROF, .fn = prof_ctl_dump_peak},
    {"prof.stats.mapped", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_mapped},
    {"prof.stats.gctx", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_gctx},
    {"prof.stats.tctx", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_tctx},
    {"prof.stats.tdata", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_tdata},
    {"prof.stats.tables", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_tables},
    {"prof.stats.ngctx", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_ngctx},
    {"prof.stats.ntctx", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_ntctx},
    {"prof.stats.nthreads", CTL_SIZE, CTL_RO, CTL_PROF, .get = prof_ctl_nthreads},
};
const ctl_table_t prof_ctl_table = {prof_ctl_rows, ARRAY_LEN(prof_ctl_rows)};
