/* prof_dump.c -- writing a heap profile, and the exit leak report.
 *
 * A dump runs in passes, as jemalloc's prof_dump does, but the tables are
 * shaped so that it needs no pinning and holds a lock malloc wants only for
 * the copy:
 *   1. snapshot (prof_tdatas_lock held, no I/O): copy every live tdata's
 *      tctx counters and every gctx's retired counters into a private array
 *      (base_alloc'd), note the dead threads this dump may free, then free
 *      them (their totals folded into the gctxs);
 *   2. sort the copy by (stack, thread) with no lock held;
 *   3. write it (only prof_dump_lock held, which malloc never takes),
 *      then the process's mappings copied verbatim from /proc/self/maps.
 * Other threads keep allocating and freeing meanwhile: gctxs are immortal,
 * and tctx counters are read with atomic loads.
 *
 * Formats (reference §0-§1): gperftools text (`heap profile: ... @
 * heapprofile` when every allocation is recorded, `@ heap_v2/R` when
 * sampling, lines pre-biased so the readers' unbiasing gives our
 * estimates back), or jemalloc's threaded heap_v2 text for jeprof --thread.
 * Output goes through a static 64 KiB buffer and write(2): no stdio, no
 * malloc. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

nlock_t prof_dump_lock = NLOCK_INITIALIZER(LOCK_PROF_DUMP);

#define UID_RETIRED UINT64_MAX

typedef struct rec_s {
  prof_gctx_t *g;
  uint64_t uid; /* UID_RETIRED: the gctx's retired counters */
  prof_cnt_t cur, acc;
} rec_t;

typedef struct thr_s {
  uint64_t uid;
  prof_cnt_t cur, acc;
  char name[PROF_NAME_MAX];
} thr_t;

typedef struct snap_s {
  rec_t *recs;
  size_t nrec, caprec;
  thr_t *thr;
  size_t nthr, capthr;
  unsigned lg;
} snap_t;

/* ---- number formatting -------------------------------------------------- */

size_t prof_fmt_u64(char *buf, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  return n;
}

/* Lowercase with 0x: Go's pprof only reads 0x[0-9a-f]+ (reference §0). */
size_t prof_fmt_hex(char *buf, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  buf[0] = '0';
  buf[1] = 'x';
  for (size_t i = 0; i < n; i++) buf[2 + i] = tmp[n - 1 - i];
  return n + 2;
}

/* ---- buffered writer (prof_dump_lock) ----------------------------------- */

static struct {
  int fd;
  int err;
  size_t len;
  char buf[1 << 16];
} wr;

static void wr_flush(void) {
  const char *p = wr.buf;
  size_t n = wr.len;
  while (n > 0 && wr.err == 0) {
    ssize_t w = write(wr.fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      wr.err = errno;
      break;
    }
    p += w;
    n -= (size_t)w;
  }
  wr.len = 0;
}

static void wr_put(const char *s, size_t n) {
  while (n > 0) {
    if (wr.len == sizeof wr.buf) wr_flush();
    size_t k = sizeof wr.buf - wr.len;
    if (k > n) k = n;
    memcpy(wr.buf + wr.len, s, k);
    wr.len += k;
    s += k;
    n -= k;
  }
}

static void wr_str(const char *s) { wr_put(s, strlen(s)); }

static void wr_u64(uint64_t v) {
  char b[24];
  wr_put(b, prof_fmt_u64(b, v));
}

static void wr_hex(uint64_t v) {
  char b[24];
  wr_put(b, prof_fmt_hex(b, v));
}

/* "<n>: <b> [<an>: <ab>]" */
static void wr_counts(const uint64_t c[4]) {
  wr_u64(c[0]);
  wr_str(": ");
  wr_u64(c[1]);
  wr_str(" [");
  wr_u64(c[2]);
  wr_str(": ");
  wr_u64(c[3]);
  wr_str("]");
}

/* The trailer that lets every reader symbolize PIE and shared-library
 * addresses: /proc/self/maps, byte for byte. */
static void wr_maps(void) {
  wr_str("\nMAPPED_LIBRARIES:\n");
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  for (;;) {
    if (wr.len == sizeof wr.buf) wr_flush();
    ssize_t r = read(fd, wr.buf + wr.len, sizeof wr.buf - wr.len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    wr.len += (size_t)r;
  }
  close(fd);
}

/* ---- snapshot ----------------------------------------------------------- */

static void cnt_add(prof_cnt_t *a, const prof_cnt_t *b) {
  for (int i = 0; i < C_N; i++) a->v[i] += b->v[i];
}

static void snap_free(snap_t *s) {
  base_free(s->recs, s->caprec * sizeof *s->recs);
  base_free(s->thr, s->capthr * sizeof *s->thr);
  s->recs = NULL;
  s->thr = NULL;
}

static bool snap_take(snap_t *s) {
  memset(s, 0, sizeof *s);
  for (;;) {
    size_t nt = atomic_load(&prof_ntctx_total) + atomic_load(&prof_ngctx_total);
    s->caprec = nt + nt / 4 + 256;
    s->capthr = atomic_load(&prof_ntdata_total) + 64;
    s->recs = base_alloc(s->caprec * sizeof *s->recs);
    s->thr = base_alloc(s->capthr * sizeof *s->thr);
    if (s->recs == NULL || s->thr == NULL) {
      snap_free(s);
      return false;
    }
    nlock_lock(&prof_tdatas_lock);
    if (atomic_load(&prof_ntdata_total) <= s->capthr) break;
    nlock_unlock(&prof_tdatas_lock); /* threads appeared: size again */
    snap_free(s);
  }
  s->lg = atomic_load(&prof_lg_sample);
  /* Pass 1: tdatas. Expired ones (before a prof.reset) are left out. */
  for (prof_tdata_t *td = prof_tdatas; td; td = td->next) {
    td->reclaim = false;
    if (atomic_load_explicit(&td->expired, memory_order_relaxed)) {
      if (atomic_load_explicit(&td->detached, memory_order_relaxed) &&
          prof_tdata_live(td) == 0)
        td->reclaim = true;
      continue;
    }
    thr_t *th = &s->thr[s->nthr++];
    th->uid = td->uid;
    memcpy(th->name, td->name, sizeof th->name);
    for (prof_tctx_t *t = atomic_load_explicit(&td->tctxs,
                                               memory_order_acquire);
         t; t = t->next) {
      prof_cnt_t cur, acc;
      prof_tctx_read(t, &cur, &acc);
      cnt_add(&th->cur, &cur);
      cnt_add(&th->acc, &acc);
      if (s->nrec < s->caprec && (cur.v[C_OBJS] || acc.v[C_OBJS])) {
        rec_t *r = &s->recs[s->nrec++];
        r->g = t->gctx;
        r->uid = td->uid;
        r->cur = cur;
        r->acc = acc;
      }
    }
    /* A thread that is gone and holds nothing live has now been dumped
     * one last time. */
    if (atomic_load_explicit(&td->detached, memory_order_relaxed) &&
        th->cur.v[C_OBJS] == 0)
      td->reclaim = true;
  }
  /* Pass 2: what dead threads left in the gctxs (read before this dump's
   * own reclaiming adds to it, so nothing is counted twice). */
  for (prof_gctx_t *g = atomic_load_explicit(&prof_gctx_all,
                                             memory_order_acquire);
       g && s->nrec < s->caprec; g = g->next_all) {
    rec_t r = {g, UID_RETIRED, {{0}}, {{0}}};
    bool any = false;
    for (int i = 0; i < C_N; i++) {
      r.acc.v[i] = atomic_load_explicit(&g->retired[i], memory_order_relaxed);
      any |= r.acc.v[i] != 0;
    }
    if (any) s->recs[s->nrec++] = r;
  }
  /* Pass 3: free the dead threads this dump was the last to show. */
  prof_tdata_t *td = prof_tdatas;
  while (td) {
    prof_tdata_t *nx = td->next;
    if (td->reclaim)
      prof_tdata_destroy_locked(
          td, !atomic_load_explicit(&td->expired, memory_order_relaxed));
    td = nx;
  }
  nlock_unlock(&prof_tdatas_lock);
  return true;
}

/* ---- sorting (heapsort: in place, no allocation) ------------------------ */

static bool rec_less(const rec_t *a, const rec_t *b) {
  if (a->g->id != b->g->id) return a->g->id < b->g->id;
  return a->uid < b->uid;
}

static void sift(rec_t *v, size_t i, size_t n) {
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && rec_less(&v[c], &v[c + 1])) c++;
    if (!rec_less(&v[i], &v[c])) return;
    rec_t t = v[i];
    v[i] = v[c];
    v[c] = t;
    i = c;
  }
}

static void rec_sort(rec_t *v, size_t n) {
  if (n < 2) return;
  for (size_t i = n / 2; i-- > 0;) sift(v, i, n);
  for (size_t end = n - 1; end > 0; end--) {
    rec_t t = v[0];
    v[0] = v[end];
    v[end] = t;
    sift(v, 0, end);
  }
}

/* ---- writing ------------------------------------------------------------ */

/* The four numbers written for one line. In the gperftools format with
 * every allocation recorded they are the raw counts; otherwise the
 * pre-biased values (prof_invert) for the label's rate. */
static void line_values(const snap_t *s, bool raw, const prof_cnt_t *cur,
                        const prof_cnt_t *acc, uint64_t out[4]) {
  if (raw) {
    out[0] = cur->v[C_OBJS];
    out[1] = cur->v[C_BYTES];
    out[2] = acc->v[C_OBJS];
    out[3] = acc->v[C_BYTES];
    if (out[0] == 0) out[1] = 0;
    if (out[2] == 0) out[3] = 0;
    return;
  }
  prof_invert(cur->v[C_UOBJS], cur->v[C_UBYTES], s->lg, &out[0], &out[1]);
  prof_invert(acc->v[C_UOBJS], acc->v[C_UBYTES], s->lg, &out[2], &out[3]);
}

static void wr_stack(const prof_gctx_t *g) {
  wr_str("@");
  for (unsigned i = 0; i < g->nframes; i++) {
    wr_str(" ");
    wr_hex((uint64_t)(uintptr_t)g->pcs[i]);
  }
}

/* Calls fn for each stack of the (sorted) snapshot with its summed
 * counters and its records [b, e). */
typedef void (*group_fn)(const snap_t *s, const rec_t *b, const rec_t *e,
                         const prof_cnt_t *cur, const prof_cnt_t *acc,
                         void *arg);
static void for_each_stack(const snap_t *s, group_fn fn, void *arg) {
  size_t i = 0;
  while (i < s->nrec) {
    size_t j = i;
    prof_cnt_t cur = {{0}}, acc = {{0}};
    while (j < s->nrec && s->recs[j].g == s->recs[i].g) {
      cnt_add(&cur, &s->recs[j].cur);
      cnt_add(&acc, &s->recs[j].acc);
      j++;
    }
    if (cur.v[C_OBJS] || acc.v[C_OBJS])
      fn(s, &s->recs[i], &s->recs[j], &cur, &acc, arg);
    i = j;
  }
}

static void gp_total(const snap_t *s, const rec_t *b, const rec_t *e,
                     const prof_cnt_t *cur, const prof_cnt_t *acc, void *arg) {
  (void)b, (void)e;
  uint64_t v[4], *tot = arg;
  line_values(s, s->lg == 0, cur, acc, v);
  for (int i = 0; i < 4; i++) tot[i] += v[i];
}

static void gp_line(const snap_t *s, const rec_t *b, const rec_t *e,
                    const prof_cnt_t *cur, const prof_cnt_t *acc, void *arg) {
  (void)e, (void)arg;
  uint64_t v[4];
  line_values(s, s->lg == 0, cur, acc, v);
  if (!(v[0] || v[1] || v[2] || v[3])) return;
  wr_counts(v);
  wr_str(" ");
  wr_stack(b->g);
  wr_str("\n");
}

static void write_gperftools(const snap_t *s) {
  uint64_t tot[4] = {0, 0, 0, 0};
  for_each_stack(s, gp_total, tot);
  wr_str("heap profile: ");
  wr_counts(tot);
  if (s->lg == 0) {
    wr_str(" @ heapprofile\n");
  } else {
    wr_str(" @ heap_v2/");
    wr_u64((uint64_t)1 << s->lg);
    wr_str("\n");
  }
  for_each_stack(s, gp_line, NULL);
}

static void je_line(const snap_t *s, const rec_t *b, const rec_t *e,
                    const prof_cnt_t *cur, const prof_cnt_t *acc, void *arg) {
  (void)arg;
  uint64_t v[4];
  wr_stack(b->g);
  wr_str("\n  t*: ");
  line_values(s, false, cur, acc, v);
  wr_counts(v);
  wr_str("\n");
  for (const rec_t *r = b; r < e; r++) {
    if (r->uid == UID_RETIRED) continue;
    line_values(s, false, &r->cur, &r->acc, v);
    wr_str("  t");
    wr_u64(r->uid);
    wr_str(": ");
    wr_counts(v);
    wr_str("\n");
  }
}

/* jemalloc's threaded format (jeprof only; R = 1 in exact mode, which
 * jeprof also rescales, so the values are pre-biased there too). */
static void write_jemalloc(const snap_t *s) {
  prof_cnt_t cur = {{0}}, acc = {{0}};
  for (size_t i = 0; i < s->nrec; i++) {
    cnt_add(&cur, &s->recs[i].cur);
    cnt_add(&acc, &s->recs[i].acc);
  }
  uint64_t v[4];
  wr_str("heap_v2/");
  wr_u64((uint64_t)1 << s->lg);
  wr_str("\n  t*: ");
  line_values(s, false, &cur, &acc, v);
  wr_counts(v);
  wr_str("\n");
  for (size_t i = 0; i < s->nthr; i++) {
    const thr_t *th = &s->thr[i];
    if (!(th->cur.v[C_OBJS] || th->acc.v[C_OBJS])) continue;
    wr_str("  t");
    wr_u64(th->uid);
    wr_str(": ");
    line_values(s, false, &th->cur, &th->acc, v);
    wr_counts(v);
    if (th->name[0]) {
      wr_str(" ");
      wr_str(th->name);
    }
    wr_str("\n");
  }
  for_each_stack(s, je_line, NULL);
}

/* ---- leak report -------------------------------------------------------- */

#define LEAK_TOP 5
typedef struct leak_s {
  uint64_t objs, bytes, stacks;
  struct {
    const prof_gctx_t *g;
    uint64_t objs, bytes;
  } top[LEAK_TOP];
} leak_t;

static void leak_group(const snap_t *s, const rec_t *b, const rec_t *e,
                       const prof_cnt_t *cur, const prof_cnt_t *acc,
                       void *arg) {
  (void)e, (void)acc;
  leak_t *l = arg;
  if (cur->v[C_OBJS] == 0) return;
  uint64_t o = s->lg == 0 ? cur->v[C_OBJS] : cur->v[C_UOBJS] >> PROF_FP;
  uint64_t by = s->lg == 0 ? cur->v[C_BYTES] : cur->v[C_UBYTES];
  l->objs += o;
  l->bytes += by;
  l->stacks++;
  int k = LEAK_TOP;
  while (k > 0 && (l->top[k - 1].g == NULL || l->top[k - 1].bytes < by)) k--;
  if (k == LEAK_TOP) return;
  for (int j = LEAK_TOP - 1; j > k; j--) l->top[j] = l->top[j - 1];
  l->top[k].g = b->g;
  l->top[k].objs = o;
  l->top[k].bytes = by;
}

static size_t put(char *buf, size_t at, size_t cap, const char *s) {
  while (*s && at + 1 < cap) buf[at++] = *s++;
  buf[at] = 0;
  return at;
}

static void leak_report(const snap_t *s) {
  leak_t l;
  memset(&l, 0, sizeof l);
  for_each_stack(s, leak_group, &l);
  nalloc_log("Leak summary: %llu bytes in %llu objects from %llu stacks "
             "(%s, lg_prof_sample %u)",
             (unsigned long long)l.bytes, (unsigned long long)l.objs,
             (unsigned long long)l.stacks,
             s->lg == 0 ? "exact" : "sampled estimate", s->lg);
  for (int k = 0; k < LEAK_TOP && l.top[k].g; k++) {
    char line[900], num[24];
    size_t at = 0;
    for (unsigned i = 0; i < l.top[k].g->nframes && i < 8; i++) {
      void *pc = l.top[k].g->pcs[i];
      if (i) at = put(line, at, sizeof line, " <- ");
      num[prof_fmt_hex(num, (uint64_t)(uintptr_t)pc)] = 0;
      at = put(line, at, sizeof line, num);
      Dl_info di;
      /* dladdr knows exported symbols only; enough for a hint, the
       * profile written next has the full picture. */
      if (dladdr((char *)pc - 1, &di) && di.dli_sname) {
        at = put(line, at, sizeof line, " ");
        at = put(line, at, sizeof line, di.dli_sname);
      }
    }
    nalloc_log("  #%d: %llu bytes in %llu objects at %s", k + 1,
               (unsigned long long)l.top[k].bytes,
               (unsigned long long)l.top[k].objs, line);
  }
}

/* ---- entry point -------------------------------------------------------- */

int prof_dump_file(const char *path, bool leak) {
  tsd_t *tsd = tsd_get();
  tsd->reentrant++;
  nlock_lock(&prof_dump_lock);
  int err = 0, fd = -1;
  if (path != NULL) {
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) err = errno;
  }
  snap_t s;
  if (fd < 0 && !leak) goto out;
  if (!snap_take(&s)) {
    if (fd >= 0) close(fd);
    err = ENOMEM;
    goto out;
  }
  rec_sort(s.recs, s.nrec);
  if (leak) leak_report(&s); /* even when the file cannot be written */
  if (fd >= 0) {
    wr.fd = fd;
    wr.err = 0;
    wr.len = 0;
    if (opt_prof_format == PROF_FORMAT_JEMALLOC)
      write_jemalloc(&s);
    else
      write_gperftools(&s);
    wr_maps();
    wr_flush();
    err = wr.err;
    if (close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  }
  snap_free(&s);
out:
  nlock_unlock(&prof_dump_lock);
  tsd->reentrant--;
  return err;
}

/* The profile as prof_dump_file writes it (gperftools text, then the
 * mappings), to a descriptor the caller owns: the HTTP server's memfd
 * (prof_http.c). 0 or an errno value. */
int prof_dump_fd(int fd) {
  tsd_t *tsd = tsd_get();
  tsd->reentrant++;
  nlock_lock(&prof_dump_lock);
  snap_t s;
  int err = ENOMEM;
  if (snap_take(&s)) {
    rec_sort(s.recs, s.nrec);
    wr.fd = fd;
    wr.err = 0;
    wr.len = 0;
    write_gperftools(&s);
    wr_maps();
    wr_flush();
    err = wr.err;
    snap_free(&s);
  }
  nlock_unlock(&prof_dump_lock);
  tsd->reentrant--;
  return err;
}
