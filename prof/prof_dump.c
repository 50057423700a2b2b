/* prof_dump.c -- writing a heap profile (now, or the peak one).
 *
 * A dump runs in passes, as jemalloc's prof_dump does, but the tables are
 * shaped so that it needs no pinning and holds a lock malloc wants only for
 * the copy:
 *   1. snapshot (prof_tdatas_lock held, no I/O): copy every thread
 *      record's tctx counters (live threads and exited ones whose objects
 *      are still live) and every gctx's reclaimed counts into a private
 *      array, note in each tctx what this dump saw (its owner may then
 *      reclaim it if it stays idle), and sweep the exited threads' empty
 *      records;
 *   2. sort the copy by (stack, size bucket, thread) with no lock held;
 *   3. write it (only prof_dump_lock held, which malloc never takes),
 *      then the process's mappings copied verbatim from /proc/self/maps;
 *   4. free the gctxs nothing points to any more, whose counts are now
 *      written (prof_gctx_reap_locked): gctxs are freed only here, so the
 *      pointers the copy holds stay valid through passes 2 and 3.
 * Other threads keep allocating and freeing meanwhile; tctx counters are
 * read with atomic loads.
 *
 * Formats (reference §0-§1): gperftools text (`heap profile: ... @
 * heapprofile` when every allocation is recorded, `@ heap_v2/R` when
 * sampling), or jemalloc's threaded heap_v2 text for jeprof --thread.
 * When sampling, each stack gets one line per size bucket (prof_bkt), with
 * counts pre-biased (prof_invert) so that the readers' per-line unbiasing,
 * which assumes one object size per line, gives our estimates back: a
 * stack that allocates 16 B and 1 KiB objects keeps both right. The
 * gperftools format ends its records with the views of issue 14 ('#nalloc'
 * lines that every reader skips: see write_views).
 *
 * Files are created with O_NOFOLLOW and mode 0600 (a dump holds code
 * addresses and the memory map), automatic names also with O_EXCL.
 * Output goes through a static 64 KiB buffer and write(2): no stdio, no
 * malloc. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

nlock_t prof_dump_lock = NLOCK_INITIALIZER(LOCK_PROF_DUMP);

#define UID_RETIRED UINT64_MAX

typedef struct rec_s {
  prof_gctx_t *g;
  uint64_t uid; /* UID_RETIRED: counts of reclaimed tctxs (g->ret) */
  unsigned bkt, node;
  uint64_t temp; /* temporary allocations (exact mode) */
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
  bool peak;
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

NALLOC_BIG_BSS static struct {
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
  prof_mem_free(s->recs, s->caprec * sizeof *s->recs, PM_DUMP);
  prof_mem_free(s->thr, s->capthr * sizeof *s->thr, PM_DUMP);
  s->recs = NULL;
  s->thr = NULL;
}

/* One thread record's rows (the orphans' record has no thread row, and
 * may hold tctxs from before a prof.reset, left out). A normal dump notes
 * in each tctx that it saw it idle (nothing live): if nothing is allocated
 * from it until its owner next samples, the owner reclaims it, and the
 * next dump no longer shows it (prof_internal.h). */
static void snap_trec(snap_t *s, prof_trec_t *r, const prof_peak_view_t *pv) {
  thr_t scratch, *th = &scratch;
  if (r != &prof_orphans) th = &s->thr[s->nthr++];
  memset(th, 0, sizeof *th);
  th->uid = r->uid;
  memcpy(th->name, r->name, sizeof th->name);
  unsigned gen = atomic_load_explicit(&prof_reset_gen, memory_order_relaxed);
  for (prof_tctx_t *t = atomic_load_explicit(&r->tctxs, memory_order_acquire);
       t; t = t->next) {
    prof_cnt_t cur, acc;
    if (t->gen != (uint16_t)gen) continue;
    if (s->peak) {
      prof_peak_read(pv, t, &cur);
      acc = cur;
    } else {
      prof_tctx_read(t, &cur, &acc);
      t->dumped = cur.v[C_OBJS] == 0 ? acc.v[C_OBJS] : UINT64_MAX;
    }
    cnt_add(&th->cur, &cur);
    cnt_add(&th->acc, &acc);
    if (s->nrec < s->caprec && (cur.v[C_OBJS] || acc.v[C_OBJS])) {
      rec_t *x = &s->recs[s->nrec++];
      x->g = t->gctx;
      x->uid = r->uid;
      x->bkt = t->bkt;
      x->node = t->node;
      x->temp = s->peak ? 0 : atomic_load_explicit(&t->temp,
                                                    memory_order_relaxed);
      x->cur = cur;
      x->acc = acc;
    }
  }
}

/* What reclaimed tctxs left in the gctxs. A gctx nothing points to whose
 * counts the previous dump wrote is left out: nothing happened to it since,
 * and it is freed after this dump (prof_gctx_reap_locked). */
static void snap_ret(snap_t *s) {
  nlock_lock(&prof_gctx_lock); /* for nref */
  for (prof_gctx_t *g = atomic_load_explicit(&prof_gctx_all,
                                             memory_order_acquire);
       g; g = g->next_all) {
    g->idle = !g->ret_new && g->nref == 0;
    if (g->idle) continue;
    g->ret_new = false;
    prof_gext_t *gx = atomic_load_explicit(&g->ext, memory_order_acquire);
    for (prof_ret_t *r = gx ? gx->ret : NULL; r && s->nrec < s->caprec;
         r = r->next) {
      rec_t x = {g, UID_RETIRED, r->bkt, r->node, r->temp, {{0}}, {{0}}};
      for (int i = 0; i < C_N; i++) x.acc.v[i] = r->acc[i];
      if (x.acc.v[C_OBJS]) s->recs[s->nrec++] = x;
    }
  }
  nlock_unlock(&prof_gctx_lock);
}

static bool snap_take(snap_t *s, bool peak) {
  memset(s, 0, sizeof *s);
  for (;;) {
    size_t nt = atomic_load(&prof_ntctx_total) + atomic_load(&prof_nret_total);
    s->caprec = nt + nt / 4 + 256;
    s->capthr = atomic_load(&prof_ntdata_total) + 64;
    s->recs = prof_mem_alloc(s->caprec * sizeof *s->recs, PM_DUMP);
    s->thr = prof_mem_alloc(s->capthr * sizeof *s->thr, PM_DUMP);
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
  s->peak = peak;
  prof_peak_view_t pv = prof_peak_view();
  /* Expired records (before a prof.reset) are left out. */
  for (prof_trec_t *r = prof_tdatas; r; r = r->next) {
    if (atomic_load_explicit(&r->expired, memory_order_relaxed)) continue;
    snap_trec(s, r, &pv);
    if (!peak) /* its owner reclaims what stays idle until it next samples */
      atomic_fetch_or_explicit(&((prof_tdata_t *)r)->attn, PROF_ATTN_SWEEP,
                               memory_order_relaxed);
  }
  for (prof_trec_t *r = prof_dead; r; r = r->next)
    if (!atomic_load_explicit(&r->expired, memory_order_relaxed))
      snap_trec(s, r, &pv);
  snap_trec(s, &prof_orphans, &pv);
  if (!peak) {
    snap_ret(s);
    /* exited threads, now shown: keep their tctxs, not their records */
    prof_trec_t *r = prof_dead;
    while (r) {
      prof_trec_t *nx = r->next;
      if (!atomic_load_explicit(&r->expired, memory_order_relaxed))
        prof_dead_orphan_locked(r);
      r = nx;
    }
    prof_dead_sweep_locked();
  }
  nlock_unlock(&prof_tdatas_lock);
  return true;
}

/* ---- sorting (heapsort: in place, no allocation) ------------------------ */

static bool rec_less(const rec_t *a, const rec_t *b) {
  if (a->g->id != b->g->id) return a->g->id < b->g->id;
  if (a->bkt != b->bkt) return a->bkt < b->bkt;
  if (a->node != b->node) return a->node < b->node;
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
    wr_hex((uint64_t)(uintptr_t)prof_gctx_pc(g, i));
  }
}

/* Calls fn for each line of the (sorted) snapshot, a (stack, size
 * bucket), or with `by_stack` each stack, with its summed counters and its
 * records [b, e). */
typedef void (*group_fn)(const snap_t *s, const rec_t *b, const rec_t *e,
                         const prof_cnt_t *cur, const prof_cnt_t *acc,
                         void *arg);
static void for_each_line(const snap_t *s, bool by_stack, group_fn fn,
                          void *arg) {
  size_t i = 0;
  while (i < s->nrec) {
    size_t j = i;
    prof_cnt_t cur = {{0}}, acc = {{0}};
    while (j < s->nrec && s->recs[j].g == s->recs[i].g &&
           (by_stack || s->recs[j].bkt == s->recs[i].bkt)) {
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

/* ---- the views of issue 14 ---------------------------------------------
 * Lines that start with '#', after the records and before the blank line
 * and MAPPED_LIBRARIES: Go's pprof skips them as comments, google-pprof
 * and jeprof skip every line that is not a record (reference §1.1), so
 * the three readers see exactly the profile they saw before. nalloc-prof
 * and the HTTP server's protobuf read them:
 *   #nalloc node N <n>: <b> [<an>: <ab>] @ <stack>
 *       the part of a (stack, size bucket) line on NUMA node N, with the
 *       same values a record has (pre-biased when sampling); written when
 *       there is more than one node;
 *   #nalloc temporary <objects> @ <stack>
 *       exact mode: allocations freed by their thread before it allocated
 *       anything else;
 *   #nalloc lifetime <c0> ... <c13> @ <stack>
 *       sampled mode: sampled objects freed, by lifetime (prof_life_bkt). */

static void wr_node_lines(const snap_t *s) {
  size_t i = 0;
  while (i < s->nrec) {
    const rec_t *b = &s->recs[i];
    prof_cnt_t cur = {{0}}, acc = {{0}};
    size_t j = i;
    for (; j < s->nrec && s->recs[j].g == b->g && s->recs[j].bkt == b->bkt &&
           s->recs[j].node == b->node;
         j++) {
      cnt_add(&cur, &s->recs[j].cur);
      cnt_add(&acc, &s->recs[j].acc);
    }
    i = j;
    uint64_t v[4];
    line_values(s, s->lg == 0, &cur, &acc, v);
    if (!(v[0] || v[1] || v[2] || v[3])) continue;
    wr_str("#nalloc node ");
    wr_u64(b->node);
    wr_str(" ");
    wr_counts(v);
    wr_str(" ");
    wr_stack(b->g);
    wr_str("\n");
  }
}

static void views_stack(const snap_t *s, const rec_t *b, const rec_t *e,
                        const prof_cnt_t *cur, const prof_cnt_t *acc,
                        void *arg) {
  (void)cur, (void)acc, (void)arg;
  if (s->lg == 0) {
    uint64_t t = 0;
    for (const rec_t *r = b; r < e; r++) t += r->temp;
    if (t == 0) return;
    wr_str("#nalloc temporary ");
    wr_u64(t);
  } else {
    uint32_t c[PROF_LIFE_N];
    bool any = false;
    prof_gext_t *gx = atomic_load_explicit(&b->g->ext, memory_order_acquire);
    if (gx == NULL) return;
    prof_life_t *l = &gx->life;
    for (int k = 0; k < PROF_LIFE_N; k++)
      any |= (c[k] = atomic_load_explicit(&l->n[k], memory_order_relaxed)) != 0;
    if (!any) return;
    wr_str("#nalloc lifetime");
    for (int k = 0; k < PROF_LIFE_N; k++) {
      wr_str(" ");
      wr_u64(c[k]);
    }
  }
  wr_str(" ");
  wr_stack(b->g);
  wr_str("\n");
}

static void write_views(const snap_t *s) {
  if (node_count > 1) wr_node_lines(s);
  if (!s->peak) for_each_line(s, true, views_stack, NULL);
}

static void write_gperftools(const snap_t *s) {
  uint64_t tot[4] = {0, 0, 0, 0};
  for_each_line(s, false, gp_total, tot);
  wr_str("heap profile: ");
  wr_counts(tot);
  if (s->lg == 0) {
    wr_str(" @ heapprofile\n");
  } else {
    wr_str(" @ heap_v2/");
    wr_u64((uint64_t)1 << s->lg);
    wr_str("\n");
  }
  for_each_line(s, false, gp_line, NULL);
  write_views(s);
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
  /* One row per thread: a thread that moved between NUMA nodes has a
   * record per node (sorted apart), summed here as jeprof expects. */
  for (const rec_t *r = b; r < e; r++) {
    if (r->uid == UID_RETIRED) continue;
    bool seen = false;
    for (const rec_t *q = b; q < r && !seen; q++) seen = q->uid == r->uid;
    if (seen) continue;
    prof_cnt_t tc = r->cur, ta = r->acc;
    for (const rec_t *q = r + 1; q < e; q++)
      if (q->uid == r->uid) {
        cnt_add(&tc, &q->cur);
        cnt_add(&ta, &q->acc);
      }
    line_values(s, false, &tc, &ta, v);
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
  for_each_line(s, false, je_line, NULL);
}

/* ---- leak summary ------------------------------------------------------- */

static void leak_group(const snap_t *s, const rec_t *b, const rec_t *e,
                       const prof_cnt_t *cur, const prof_cnt_t *acc,
                       void *arg) {
  (void)e, (void)acc;
  prof_leak_t *l = arg;
  if (cur->v[C_OBJS] == 0) return;
  uint64_t o = s->lg == 0 ? cur->v[C_OBJS] : cur->v[C_UOBJS] >> PROF_FP;
  uint64_t by = s->lg == 0 ? cur->v[C_BYTES] : cur->v[C_UBYTES];
  l->objs += o;
  l->bytes += by;
  l->stacks++;
  unsigned k = l->ntop;
  while (k > 0 && l->top[k - 1].bytes < by) k--;
  if (k == PROF_LEAK_TOP) return;
  if (l->ntop < PROF_LEAK_TOP) l->ntop++;
  for (unsigned j = l->ntop - 1; j > k; j--) l->top[j] = l->top[j - 1];
  l->top[k].objs = o;
  l->top[k].bytes = by;
  unsigned n = b->g->nframes < PROF_LEAK_FRAMES ? b->g->nframes : PROF_LEAK_FRAMES;
  l->top[k].nframes = n;
  /* past PROF_LEAF from the tail: the dump holds prof_dump_lock, so
   * neither the gctx nor its chunks can be reaped meanwhile */
  for (unsigned i = 0; i < n; i++) l->top[k].pcs[i] = prof_gctx_pc(b->g, i);
}

/* ---- entry point -------------------------------------------------------- */

/* O_NOFOLLOW: a symlink planted at the dump's path is refused (ELOOP), not
 * followed to whatever it names; 0600: dumps hold code addresses and the
 * memory map. */
static int dump_open(const char *path, bool excl) {
  int fl = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW;
  fl |= excl ? O_EXCL : O_TRUNC;
  return open(path, fl, 0600);
}

int prof_dump_file(const char *path, unsigned flags, bool excl) {
  tsd_t *tsd = tsd_get();
  bool leak = flags & PROF_DUMP_LEAK;
  tsd->reentrant++;
  nlock_lock(&prof_dump_lock);
  int err = 0, fd = -1;
  if (path != NULL && (fd = dump_open(path, excl)) < 0) err = errno;
  prof_leak_t lk;
  memset(&lk, 0, sizeof lk);
  snap_t s;
  if (fd < 0 && !leak) goto out;
  if (!snap_take(&s, flags & PROF_DUMP_PEAK)) {
    if (fd >= 0) close(fd);
    err = ENOMEM;
    goto out;
  }
  rec_sort(s.recs, s.nrec);
  if (leak) { /* even when the file cannot be written */
    lk.lg = s.lg;
    for_each_line(&s, true, leak_group, &lk);
  }
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
  if (!(flags & PROF_DUMP_PEAK)) {
    nlock_lock(&prof_tdatas_lock);
    nlock_lock(&prof_gctx_lock);
    prof_gctx_reap_locked();
    nlock_unlock(&prof_gctx_lock);
    nlock_unlock(&prof_tdatas_lock);
  }
out:
  nlock_unlock(&prof_dump_lock);
  /* outside the locks: the report may start nalloc-prof */
  if (leak) prof_leak_report(&lk, fd >= 0 && err == 0 ? path : NULL);
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
  if (snap_take(&s, false)) {
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
