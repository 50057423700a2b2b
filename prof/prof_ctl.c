/* prof_ctl.c -- the profiler's NALLOC_CONF keys and nalloc_ctl names.
 * The conf parser and the ctl dispatcher live in alloc/; they read these
 * tables (opt.<key> is generated from each conf row). Names and meanings
 * follow jemalloc's where jemalloc has them. With opt.prof off every
 * prof.* / thread.prof.* name answers ENOENT, as jemalloc's do. */
#include "prof_internal.h"
#include "prof_http.h"

#include <string.h>

static const char *const unwind_choices[] = {"dwarf", "libunwind", "fp", NULL};
static const char *const format_choices[] = {"gperftools", "jemalloc", NULL};

const conf_entry_t prof_conf_entries[] = {
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
    {"prof_unwind", CONF_ENUM, &opt_prof_unwind, 0, 0, unwind_choices, 0,
     "backtraces: dwarf (cached DWARF rules), libunwind or fp (frame pointers)"},
    {"prof_depth", CONF_UNSIGNED, &opt_prof_depth, 1, PROF_DEPTH_MAX, NULL, 0,
     "maximum frames per backtrace"},
    {"prof_format", CONF_ENUM, &opt_prof_format, 0, 0, format_choices, 0,
     "gperftools (all readers) or jemalloc (jeprof, per-thread)"},
    {"prof_signal", CONF_SIGNAL, &opt_prof_signal, 0, 0, NULL, 0,
     "dump when this signal arrives (.s files); 0 off"},
    {"prof_http", CONF_STR, opt_prof_http, 0, 0, NULL, PROF_HTTP_ADDR_MAX,
     "serve live profiles (go tool pprof) at HOST:PORT or unix:PATH"},
    {"prof_http_any", CONF_BOOL, &opt_prof_http_any, 0, 0, NULL, 0,
     "let prof_http listen on an address other than loopback"},
    {"prof_http_fork", CONF_BOOL, &opt_prof_http_fork, 0, 0, NULL, 0,
     "fork children serve too (TCP port 0, or unix PATH.<pid>)"},
    {"prof_peak", CONF_BOOL, &opt_prof_peak, 0, 0, NULL, 0,
     "keep the peak-heap profile in memory (prof.dump_peak writes it)"},
    {"prof_peak_final", CONF_BOOL, &opt_prof_peak_final, 0, 0, NULL, 0,
     "write the peak-heap profile at exit (.p file); implies prof_peak"},
};
const size_t prof_conf_nentries =
    sizeof prof_conf_entries / sizeof prof_conf_entries[0];

/* ---- handlers ----------------------------------------------------------- */

#define NEED_PROF()           \
  do {                        \
    (void)idx;                \
    if (!opt_prof) return ENOENT; \
  } while (0)

#define WRITEONLY()                              \
  do {                                           \
    if (oldp != NULL || oldlenp != NULL) return EPERM; \
  } while (0)

/* Read-old-then-write-new on a bool, with mallctl's size checks done
 * before anything changes. The new value must be 0 or 1: it is read as a
 * byte, since any other byte in a _Bool is undefined behaviour and would
 * read back as itself. */
static int rw_bool(_Atomic bool *v, void *oldp, size_t *oldlenp, void *newp,
                   size_t newlen) {
  bool old = atomic_load(v), nv = false;
  if (newp != NULL) {
    unsigned char byte;
    int e = ctl_in(newp, newlen, &byte, sizeof byte);
    if (e) return e;
    if (byte > 1) return EINVAL;
    nv = byte == 1;
  } else if (newlen != 0) {
    return EINVAL;
  }
  int e = ctl_out(oldp, oldlenp, &old, sizeof old);
  if (e) return e;
  if (newp != NULL) atomic_store(v, nv);
  return 0;
}

static int ctl_prof_dump(const size_t *idx, void *oldp, size_t *oldlenp,
                         void *newp, size_t newlen) {
  NEED_PROF();
  WRITEONLY();
  const char *path = NULL;
  if (newp != NULL) {
    int e = ctl_in(newp, newlen, &path, sizeof path);
    if (e) return e;
  } else if (newlen != 0) {
    return EINVAL;
  }
  return prof_dump_request(path);
}

static int ctl_prof_active(const size_t *idx, void *oldp, size_t *oldlenp,
                           void *newp, size_t newlen) {
  NEED_PROF();
  return rw_bool(&prof_active, oldp, oldlenp, newp, newlen);
}

static int ctl_prof_gdump(const size_t *idx, void *oldp, size_t *oldlenp,
                          void *newp, size_t newlen) {
  NEED_PROF();
  int e = rw_bool(&prof_gdump_on, oldp, oldlenp, newp, newlen);
  if (e == 0 && newp != NULL) { /* the sampled path reads prof_slow only */
    if (atomic_load(&prof_gdump_on))
      atomic_fetch_or(&prof_slow, PROF_SLOW_GDUMP);
    else
      atomic_fetch_and(&prof_slow, ~(unsigned)PROF_SLOW_GDUMP);
  }
  return e;
}

static int ctl_prof_dump_peak(const size_t *idx, void *oldp, size_t *oldlenp,
                              void *newp, size_t newlen) {
  NEED_PROF();
  WRITEONLY();
  if (!opt_prof_peak) return ENOENT; /* nothing kept: needs prof_peak */
  const char *path = NULL;
  if (newp != NULL) {
    int e = ctl_in(newp, newlen, &path, sizeof path);
    if (e) return e;
  } else if (newlen != 0) {
    return EINVAL;
  }
  return prof_dump_peak_request(path);
}

/* prof.stats.<kind>: bytes of profiler memory in use by each kind of
 * record; prof.stats.mapped: what the profiler's allocator has mapped. */
static int stat_out(void *oldp, size_t *oldlenp, void *newp, size_t newlen,
                    size_t v) {
  CTL_READONLY();
  return ctl_out(oldp, oldlenp, &v, sizeof v);
}
#define PROF_STAT(fn, expr)                                                \
  static int fn(const size_t *idx, void *oldp, size_t *oldlenp, void *newp, \
                size_t newlen) {                                           \
    NEED_PROF();                                                           \
    return stat_out(oldp, oldlenp, newp, newlen, (expr));                  \
  }
PROF_STAT(ctl_stats_mapped, prof_mem_mapped())
PROF_STAT(ctl_stats_gctx, prof_mem_used(PM_GCTX))
PROF_STAT(ctl_stats_tctx, prof_mem_used(PM_TCTX))
PROF_STAT(ctl_stats_tdata, prof_mem_used(PM_TDATA) + prof_mem_used(PM_TREC))
PROF_STAT(ctl_stats_tables, prof_mem_used(PM_TAB))
PROF_STAT(ctl_stats_ngctx, atomic_load(&prof_ngctx_total))
PROF_STAT(ctl_stats_ntctx, atomic_load(&prof_ntctx_total))
PROF_STAT(ctl_stats_nthreads, atomic_load(&prof_ntdata_total))

static int ctl_prof_thread_active_init(const size_t *idx, void *oldp,
                                       size_t *oldlenp, void *newp,
                                       size_t newlen) {
  NEED_PROF();
  return rw_bool(&prof_thread_active_init, oldp, oldlenp, newp, newlen);
}

static int ctl_thread_prof_active(const size_t *idx, void *oldp,
                                  size_t *oldlenp, void *newp, size_t newlen) {
  NEED_PROF();
  prof_tdata_t *td = prof_tdata_get(tsd_get(), true);
  if (td == NULL) return EAGAIN;
  return rw_bool(&td->active, oldp, oldlenp, newp, newlen);
}

static int ctl_thread_prof_name(const size_t *idx, void *oldp,
                                size_t *oldlenp, void *newp, size_t newlen) {
  NEED_PROF();
  prof_tdata_t *td = prof_tdata_get(tsd_get(), true);
  if (td == NULL) return EAGAIN;
  const char *nv = NULL;
  if (newp != NULL) {
    int e = ctl_in(newp, newlen, &nv, sizeof nv);
    if (e) return e;
    if (nv == NULL) return EINVAL;
    size_t n = 0;
    for (; nv[n]; n++) /* printable, one token: it ends a dump line */
      if (n + 1 >= PROF_NAME_MAX || nv[n] < 0x20 || nv[n] > 0x7e) return EINVAL;
  } else if (newlen != 0) {
    return EINVAL;
  }
  const char *old = td->rec.name;
  int e = ctl_out(oldp, oldlenp, &old, sizeof old);
  if (e) return e;
  if (nv != NULL) {
    nlock_lock(&prof_tdatas_lock);
    size_t n = strlen(nv);
    memcpy(td->rec.name, nv, n + 1);
    nlock_unlock(&prof_tdatas_lock);
  }
  return 0;
}

static int ctl_prof_reset(const size_t *idx, void *oldp, size_t *oldlenp,
                          void *newp, size_t newlen) {
  NEED_PROF();
  WRITEONLY();
  size_t lg = atomic_load(&prof_lg_sample);
  if (newp != NULL) {
    int e = ctl_in(newp, newlen, &lg, sizeof lg);
    if (e) return e;
    if (lg > PROF_LG_MAX) return EINVAL;
  } else if (newlen != 0) {
    return EINVAL;
  }
  prof_reset((unsigned)lg);
  return 0;
}

static int ctl_prof_lg_sample(const size_t *idx, void *oldp, size_t *oldlenp,
                              void *newp, size_t newlen) {
  NEED_PROF();
  CTL_READONLY();
  size_t lg = atomic_load(&prof_lg_sample);
  return ctl_out(oldp, oldlenp, &lg, sizeof lg);
}

static int ctl_prof_interval(const size_t *idx, void *oldp, size_t *oldlenp,
                             void *newp, size_t newlen) {
  NEED_PROF();
  CTL_READONLY();
  uint64_t v = opt_lg_prof_interval < 0 ? 0 : (uint64_t)1 << opt_lg_prof_interval;
  return ctl_out(oldp, oldlenp, &v, sizeof v);
}

const ctl_entry_t prof_ctl_entries[] = {
    {"prof.dump", ctl_prof_dump},
    {"prof.active", ctl_prof_active},
    {"prof.reset", ctl_prof_reset},
    {"prof.lg_sample", ctl_prof_lg_sample},
    {"prof.interval", ctl_prof_interval},
    {"prof.gdump", ctl_prof_gdump},
    {"prof.thread_active_init", ctl_prof_thread_active_init},
    {"thread.prof.active", ctl_thread_prof_active},
    {"thread.prof.name", ctl_thread_prof_name},
    {"prof.http_address", ctl_prof_http_address},
    {"prof.dump_peak", ctl_prof_dump_peak},
    {"prof.stats.mapped", ctl_stats_mapped},
    {"prof.stats.gctx", ctl_stats_gctx},
    {"prof.stats.tctx", ctl_stats_tctx},
    {"prof.stats.tdata", ctl_stats_tdata},
    {"prof.stats.tables", ctl_stats_tables},
    {"prof.stats.ngctx", ctl_stats_ngctx},
    {"prof.stats.ntctx", ctl_stats_ntctx},
    {"prof.stats.nthreads", ctl_stats_nthreads},
};
const size_t prof_ctl_nentries =
    sizeof prof_ctl_entries / sizeof prof_ctl_entries[0];
