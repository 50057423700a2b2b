/* prof_pprof.c -- nalloc's text dump turned into the pprof protobuf that
 * `go tool pprof` and continuous profilers fetch from /debug/pprof/heap.
 *
 * Reading our own text (prof_dump_fd) rather than the profiler's tables
 * keeps the server out of prof_dump.c's locking and formats: what is
 * served is exactly what a prof.dump file at the same moment holds. The
 * conversion is the one Go's pprof applies to that text (legacy_profile.go,
 * reference §1.1): in a sampled dump (heap_v2/R) each line's pair is
 * scaled by 1/(1-exp(-avg/R)); every frame is a return address, so the
 * location is written at address - 1 (inside the call); executable lines
 * of MAPPED_LIBRARIES become the mappings. Lines with the same stack are
 * summed, and a second dump can be subtracted (the ?seconds=N delta), so
 * stacks live in a hash table keyed by their frames.
 * The dump's '#nalloc' view lines (prof_dump.c; the text readers skip
 * them) become, when present: samples per (stack, NUMA node) carrying a
 * `numa_node` label, in place of the stack's one sample; a
 * `temporary_objects` sample type (exact mode); and a `lifetime_objects`
 * sample type on samples labelled `lifetime` (the bucket's upper bound as
 * text, and `lifetime_max` in nanoseconds), one per stack and bucket.
 *
 * profile.proto field numbers used (github.com/google/pprof):
 *   Profile 1 sample_type 2 sample 3 mapping 4 location 6 string_table
 *           9 time_nanos 10 duration_nanos 11 period_type 12 period
 *           14 default_sample_type
 *   ValueType 1 type 2 unit;  Sample 1 location_id 2 value (packed)
 *           3 label;  Label 1 key 2 str 3 num 4 num_unit
 *   Mapping 1 id 2 memory_start 3 memory_limit 4 file_offset 5 filename
 *           6 build_id;  Location 1 id 2 mapping_id 3 address */
#define _GNU_SOURCE
#include "prof_http.h"

#include <string.h>
#include <time.h>

#define PH_LIFE_N 14 /* PROF_LIFE_N */

typedef struct {
  uint64_t pc0;  /* first frame in p->pcs */
  uint32_t npc;
  int32_t node;  /* -1: the stack's own entry; else its part on that node */
  double v[4];   /* alloc objects, alloc bytes, in-use objects, in-use bytes */
  double temp;   /* temporary allocations (own entry) */
  double life[PH_LIFE_N]; /* sampled objects by lifetime (own entry) */
} ph_stack_t;

struct ph_prof_s {
  ph_buf_t pcs;     /* uint64_t frames of every stack */
  ph_buf_t stacks;  /* ph_stack_t */
  uint32_t *tab;    /* open addressing: stack index + 1, 0 empty */
  size_t tabcap;
  ph_buf_t maps;    /* MAPPED_LIBRARIES of the last dump added with +1 */
  uint64_t period;  /* R of that dump; 0 when every allocation is recorded */
  bool nodes, temp, life; /* view lines were read */
};

ph_prof_t *ph_prof_new(void) { return ph_mem(sizeof(ph_prof_t)); }

void ph_prof_free(ph_prof_t *p) {
  if (p == NULL) return;
  ph_buf_free(&p->pcs);
  ph_buf_free(&p->stacks);
  ph_buf_free(&p->maps);
  ph_mem_free(p->tab, p->tabcap * sizeof *p->tab);
  ph_mem_free(p, sizeof *p);
}

/* ---- the stack table ---------------------------------------------------- */

static uint64_t ph_hash(const uint64_t *pc, size_t n, int32_t node) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n ^ (uint64_t)(node + 1) << 40;
  for (size_t i = 0; i < n; i++) {
    h ^= pc[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h;
}

static ph_stack_t *ph_stacks(ph_prof_t *p) { return (ph_stack_t *)p->stacks.p; }
static size_t ph_nstacks(const ph_prof_t *p) {
  return p->stacks.len / sizeof(ph_stack_t);
}

static bool ph_tab_grow(ph_prof_t *p) {
  size_t cap = p->tabcap ? p->tabcap * 2 : 4096;
  uint32_t *t = ph_mem(cap * sizeof *t);
  if (t == NULL) return false;
  const ph_stack_t *s = ph_stacks(p);
  const uint64_t *pcs = (const uint64_t *)p->pcs.p;
  for (size_t i = 0; i < ph_nstacks(p); i++) {
    size_t k = ph_hash(pcs + s[i].pc0, s[i].npc, s[i].node) & (cap - 1);
    while (t[k] != 0) k = (k + 1) & (cap - 1);
    t[k] = (uint32_t)(i + 1);
  }
  ph_mem_free(p->tab, p->tabcap * sizeof *p->tab);
  p->tab = t;
  p->tabcap = cap;
  return true;
}

/* The entry of the stack with frames pc[0, n) (node -1) or of its part on
 * a node, created with zero counts if new. */
static ph_stack_t *ph_stack_get(ph_prof_t *p, const uint64_t *pc, size_t n,
                                int32_t node) {
  if (ph_nstacks(p) + 1 > p->tabcap / 2 && !ph_tab_grow(p)) return NULL;
  const uint64_t *pcs = (const uint64_t *)p->pcs.p;
  size_t k = ph_hash(pc, n, node) & (p->tabcap - 1);
  for (; p->tab[k] != 0; k = (k + 1) & (p->tabcap - 1)) {
    ph_stack_t *s = &ph_stacks(p)[p->tab[k] - 1];
    if (s->npc == n && s->node == node &&
        memcmp(pcs + s->pc0, pc, n * sizeof *pc) == 0)
      return s;
  }
  if (ph_nstacks(p) >= UINT32_MAX - 1) return NULL;
  ph_stack_t s;
  memset(&s, 0, sizeof s);
  s.pc0 = p->pcs.len / sizeof *pc;
  s.npc = (uint32_t)n;
  s.node = node;
  ph_buf_put(&p->pcs, pc, n * sizeof *pc);
  ph_buf_put(&p->stacks, &s, sizeof s);
  if (p->pcs.err || p->stacks.err) return NULL;
  p->tab[k] = (uint32_t)ph_nstacks(p);
  return &ph_stacks(p)[ph_nstacks(p) - 1];
}

/* ---- reading a dump ----------------------------------------------------- */

static void ph_skip_sp(const char **s, const char *e) {
  while (*s < e && (**s == ' ' || **s == '\t')) (*s)++;
}

static bool ph_dec(const char **s, const char *e, uint64_t *v) {
  ph_skip_sp(s, e);
  const char *p = *s;
  uint64_t x = 0;
  while (p < e && *p >= '0' && *p <= '9' && x < ((uint64_t)1 << 60))
    x = x * 10 + (uint64_t)(*p++ - '0');
  if (p == *s) return false;
  *s = p;
  *v = x;
  return true;
}

static bool ph_lit(const char **s, const char *e, const char *lit) {
  ph_skip_sp(s, e);
  size_t n = strlen(lit);
  if ((size_t)(e - *s) < n || memcmp(*s, lit, n) != 0) return false;
  *s += n;
  return true;
}

/* "n: b [an: ab]" */
static bool ph_counts(const char **s, const char *e, uint64_t c[4]) {
  return ph_dec(s, e, &c[0]) && ph_lit(s, e, ":") && ph_dec(s, e, &c[1]) &&
         ph_lit(s, e, "[") && ph_dec(s, e, &c[2]) && ph_lit(s, e, ":") &&
         ph_dec(s, e, &c[3]) && ph_lit(s, e, "]");
}

static double ph_one_minus_exp_neg(double t) {
  if (t < 1e-4) return t * (1 - t * (0.5 - t / 6));
  return 1 - prof_exp(-t);
}

/* pprof's unbiasing of one (objects, bytes) pair of a heap_v2/R line. */
static void ph_unbias(uint64_t n, uint64_t b, uint64_t r, double *on,
                      double *ob) {
  double scale = 1;
  if (r > 1 && n > 0 && b > 0)
    scale = 1 / ph_one_minus_exp_neg((double)b / (double)n / (double)r);
  *on = (double)n * scale;
  *ob = (double)b * scale;
}

/* "@ 0x.. 0x.." into frames; false on anything else. */
static size_t ph_frames(const char *s, const char *e, uint64_t *pc, size_t cap,
                        bool *ok) {
  size_t n = 0;
  *ok = false;
  if (!ph_lit(&s, e, "@")) return 0;
  for (;;) {
    ph_skip_sp(&s, e);
    if (s == e || *s == '\r') break;
    if (e - s < 3 || s[0] != '0' || s[1] != 'x') return 0;
    s += 2;
    uint64_t x = 0;
    const char *d0 = s;
    for (; s < e; s++) {
      int v = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
      if (v < 0) break;
      x = x << 4 | (uint64_t)v;
    }
    if (s == d0 || s - d0 > 16 || n == cap) return 0;
    pc[n++] = x;
  }
  *ok = true;
  return n;
}

static bool ph_header(const char *s, const char *e, uint64_t *period) {
  uint64_t c[4];
  if (!ph_lit(&s, e, "heap profile:") || !ph_counts(&s, e, c) ||
      !ph_lit(&s, e, "@"))
    return false;
  ph_skip_sp(&s, e);
  if (ph_lit(&s, e, "heapprofile")) {
    *period = 0;
    return true;
  }
  return ph_lit(&s, e, "heap_v2/") && ph_dec(&s, e, period);
}

#define PH_MAXF 1024

static void ph_add_counts(ph_stack_t *st, const uint64_t c[4], uint64_t r,
                          int sign) {
  double v[4];
  ph_unbias(c[2], c[3], r, &v[0], &v[1]); /* alloc pair */
  ph_unbias(c[0], c[1], r, &v[2], &v[3]); /* in-use pair */
  for (int i = 0; i < 4; i++) st->v[i] += sign * v[i];
}

/* A line starting with '#': one of the '#nalloc' view lines, or a comment
 * (skipped, as Go's pprof does). False when a view line is malformed. */
static bool ph_view_line(ph_prof_t *p, const char *s, const char *e,
                         uint64_t r, int sign, uint64_t *pc) {
  uint64_t c[4], node = 0, life[PH_LIFE_N], t = 0;
  int kind;
  if (ph_lit(&s, e, "#nalloc node ")) {
    if (!ph_dec(&s, e, &node) || node > 255 || !ph_counts(&s, e, c))
      return false;
    kind = 0;
  } else if (ph_lit(&s, e, "#nalloc temporary ")) {
    if (!ph_dec(&s, e, &t)) return false;
    kind = 1;
  } else if (ph_lit(&s, e, "#nalloc lifetime ")) {
    for (int k = 0; k < PH_LIFE_N; k++)
      if (!ph_dec(&s, e, &life[k])) return false;
    kind = 2;
  } else {
    return true;
  }
  bool ok;
  size_t n = ph_frames(s, e, pc, PH_MAXF, &ok);
  if (!ok) return false;
  ph_stack_t *st = ph_stack_get(p, pc, n, kind == 0 ? (int32_t)node : -1);
  if (st == NULL) return false;
  if (kind == 0) {
    ph_add_counts(st, c, r, sign);
    p->nodes = true;
  } else if (kind == 1) {
    st->temp += sign * (double)t;
    p->temp = true;
  } else {
    for (int k = 0; k < PH_LIFE_N; k++) st->life[k] += sign * (double)life[k];
    p->life = true;
  }
  return true;
}

bool ph_prof_add(ph_prof_t *p, const char *text, size_t len, int sign) {
  const char *s = text, *end = text + len;
  uint64_t r = 0, pc[PH_MAXF];
  bool first = true;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    if (first) {
      if (!ph_header(s, e, &r)) return false;
      first = false;
    } else if (e == s || (e - s == 1 && *s == '\r')) {
      break; /* the blank line before MAPPED_LIBRARIES */
    } else if (*s == '#') {
      if (!ph_view_line(p, s, e, r, sign, pc)) return false;
    } else {
      uint64_t c[4];
      const char *q = s;
      bool ok;
      if (!ph_counts(&q, e, c)) return false;
      size_t n = ph_frames(q, e, pc, PH_MAXF, &ok);
      if (!ok) return false;
      ph_stack_t *st = ph_stack_get(p, pc, n, -1);
      if (st == NULL) return false;
      ph_add_counts(st, c, r, sign);
    }
    s = nl ? nl + 1 : end;
  }
  if (first) return false;
  if (sign > 0) {
    static const char tag[] = "MAPPED_LIBRARIES:\n";
    const char *m = memmem(s, (size_t)(end - s), tag, sizeof tag - 1);
    p->maps.len = 0;
    if (m != NULL) ph_buf_put(&p->maps, m + sizeof tag - 1,
                              (size_t)(end - m) - (sizeof tag - 1));
    p->period = r;
  }
  return !p->maps.err;
}

/* ---- protobuf encoding -------------------------------------------------- */

static size_t pb_vlen(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

static size_t pb_venc(unsigned char *o, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    o[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  o[n++] = (unsigned char)v;
  return n;
}

static void pb_varint(ph_buf_t *b, uint64_t v) {
  unsigned char t[10];
  ph_buf_put(b, t, pb_venc(t, v));
}

/* A varint field into a small message under construction. */
static size_t pb_field(unsigned char *o, unsigned field, uint64_t v) {
  size_t n = pb_venc(o, (uint64_t)field << 3);
  return n + pb_venc(o + n, v);
}

static void pb_bytes(ph_buf_t *b, unsigned field, const void *s, size_t n) {
  pb_varint(b, (uint64_t)field << 3 | 2);
  pb_varint(b, n);
  ph_buf_put(b, s, n);
}

/* The string table is built beside the message and appended at the end:
 * field order does not matter in protobuf. */
typedef struct {
  ph_buf_t tab;
  uint64_t n;
} pb_strings_t;

static uint64_t pb_string(pb_strings_t *st, const char *s, size_t n) {
  pb_bytes(&st->tab, 6, s, n);
  return st->n++;
}

static void pb_value_type(ph_buf_t *b, unsigned field, uint64_t type,
                          uint64_t unit) {
  unsigned char m[32];
  size_t n = pb_field(m, 1, type);
  n += pb_field(m + n, 2, unit);
  pb_bytes(b, field, m, n);
}

/* ---- mappings and locations --------------------------------------------- */

typedef struct {
  uint64_t start, end, off;
} ph_map_t;

static bool ph_hexu(const char **s, const char *e, char stop, uint64_t *v) {
  const char *p = *s;
  uint64_t x = 0;
  for (; p < e && p - *s < 17; p++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
    if (d < 0) break;
    x = x << 4 | (uint64_t)d;
  }
  if (p == *s || p == e || *p != stop) return false;
  *s = p + 1;
  *v = x;
  return true;
}

/* Writes one Mapping per executable line of the maps text; records their
 * ranges in maps[] (ids are index + 1). */
static size_t ph_mappings(ph_prof_t *p, ph_buf_t *out, pb_strings_t *st,
                          ph_map_t *maps, size_t cap) {
  size_t n = 0;
  const char *s = p->maps.p, *end = s + p->maps.len;
  while (s != NULL && s < end && n < cap) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end, *q = s;
    s = nl ? nl + 1 : NULL;
    ph_map_t m;
    if (!ph_hexu(&q, e, '-', &m.start) || !ph_hexu(&q, e, ' ', &m.end) ||
        e - q < 5 || q[2] != 'x')
      continue;
    q += 5;
    if (!ph_hexu(&q, e, ' ', &m.off)) continue;
    for (int f = 0; f < 2; f++) { /* dev, inode */
      while (q < e && *q != ' ') q++;
      while (q < e && *q == ' ') q++;
    }
    char path[512], bid[130];
    size_t plen = (size_t)(e - q) < sizeof path - 1 ? (size_t)(e - q) : sizeof path - 1;
    memcpy(path, q, plen);
    path[plen] = '\0';
    maps[n++] = m;
    unsigned char msg[128];
    size_t k = pb_field(msg, 1, n);
    k += pb_field(msg + k, 2, m.start);
    k += pb_field(msg + k, 3, m.end);
    k += pb_field(msg + k, 4, m.off);
    if (plen) k += pb_field(msg + k, 5, pb_string(st, path, plen));
    if (path[0] == '/' && ph_elf_build_id(m.start, m.end, path, bid, sizeof bid))
      k += pb_field(msg + k, 6, pb_string(st, bid, strlen(bid)));
    pb_bytes(out, 3, msg, k);
  }
  return n;
}

static uint64_t ph_map_id(const ph_map_t *maps, size_t n, uint64_t a) {
  size_t lo = 0, hi = n;
  while (lo < hi) { /* /proc/self/maps is sorted */
    size_t mid = lo + (hi - lo) / 2;
    if (maps[mid].end <= a) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && a >= maps[lo].start ? lo + 1 : 0;
}

/* Location ids by frame address: a table beside the stacks. */
typedef struct {
  uint64_t *key;  /* address + 1; 0 empty */
  uint32_t *id;
  size_t cap;
  uint32_t n;
} ph_locs_t;

static uint32_t ph_loc(ph_locs_t *l, uint64_t pc, ph_buf_t *out,
                       const ph_map_t *maps, size_t nmaps) {
  size_t k = (pc * 0x9e3779b97f4a7c15ull >> 20) & (l->cap - 1);
  for (; l->key[k] != 0; k = (k + 1) & (l->cap - 1))
    if (l->key[k] == pc + 1) return l->id[k];
  l->key[k] = pc + 1;
  l->id[k] = ++l->n;
  uint64_t a = pc ? pc - 1 : 0; /* a return address: the call is before it */
  unsigned char msg[40];
  size_t m = pb_field(msg, 1, l->n);
  uint64_t mid = ph_map_id(maps, nmaps, a);
  if (mid) m += pb_field(msg + m, 2, mid);
  m += pb_field(msg + m, 3, a);
  pb_bytes(out, 4, msg, m);
  return l->n;
}

static int64_t ph_round(double v) {
  return (int64_t)(v >= 0 ? v + 0.5 : v - 0.5);
}

/* String indices of the sample types and labels beyond the fixed ones. */
typedef struct {
  uint64_t node_key, node_unit, life_key, life_max_key, ns_unit;
  uint64_t life_str[PH_LIFE_N];
  unsigned nv; /* values per sample: 4, + temporary, + lifetime */
  int temp_i, life_i; /* their index in a sample's values, -1: none */
} ph_extra_t;

/* One Sample: locations, nv values, and up to two labels (already
 * encoded Label messages in lab[0..nlab)). */
static void ph_sample_out(ph_buf_t *out, const uint32_t *ids, uint32_t n,
                          const int64_t *v, unsigned nv,
                          const unsigned char (*lab)[48], const size_t *lablen,
                          int nlab) {
  size_t ll = 0, vl = 0, body;
  for (uint32_t k = 0; k < n; k++) ll += pb_vlen(ids[k]);
  for (unsigned k = 0; k < nv; k++) vl += pb_vlen((uint64_t)v[k]);
  body = 1 + pb_vlen(ll) + ll + 1 + pb_vlen(vl) + vl;
  for (int i = 0; i < nlab; i++) body += 1 + pb_vlen(lablen[i]) + lablen[i];
  pb_varint(out, 2 << 3 | 2);
  pb_varint(out, body);
  pb_varint(out, 1 << 3 | 2);
  pb_varint(out, ll);
  for (uint32_t k = 0; k < n; k++) pb_varint(out, ids[k]);
  pb_varint(out, 2 << 3 | 2);
  pb_varint(out, vl);
  for (unsigned k = 0; k < nv; k++) pb_varint(out, (uint64_t)v[k]);
  for (int i = 0; i < nlab; i++) pb_bytes(out, 3, lab[i], lablen[i]);
}

/* Upper bounds of the lifetime buckets (prof_life_bkt): 2^(10+2k) ns. */
static const char *const ph_life_names[PH_LIFE_N] = {
    "<1us",  "<4us",  "<16us", "<66us", "<262us", "<1ms",  "<4ms",
    "<17ms", "<67ms", "<268ms", "<1.1s", "<4.3s", "<17s", ">=17s"};

/* The samples of one entry: its four counts (with a numa_node label on a
 * node's part; a stack's own entry has none when the dump split it by
 * node), its temporary count, and one sample per lifetime bucket. */
static void ph_entry(ph_prof_t *p, const ph_stack_t *s, const ph_extra_t *x,
                     const uint32_t *ids, ph_buf_t *out) {
  int64_t v[6] = {0, 0, 0, 0, 0, 0};
  unsigned char lab[2][48];
  size_t ll[2];
  bool any = false;
  if (s->node >= 0 || !p->nodes)
    for (int k = 0; k < 4; k++) any |= (v[k] = ph_round(s->v[k])) != 0;
  if (s->node < 0 && x->temp_i >= 0)
    any |= (v[x->temp_i] = ph_round(s->temp)) != 0;
  int nlab = 0;
  if (s->node >= 0) {
    /* with a unit: pprof drops a numeric label whose num and unit are
     * both 0, and node 0 is a node like the others */
    ll[0] = pb_field(lab[0], 1, x->node_key);
    ll[0] += pb_field(lab[0] + ll[0], 3, (uint64_t)s->node);
    ll[0] += pb_field(lab[0] + ll[0], 4, x->node_unit);
    nlab = 1;
  }
  if (any) ph_sample_out(out, ids, s->npc, v, x->nv, lab, ll, nlab);
  if (s->node >= 0 || x->life_i < 0) return;
  for (int b = 0; b < PH_LIFE_N; b++) {
    int64_t w[6] = {0, 0, 0, 0, 0, 0};
    if ((w[x->life_i] = ph_round(s->life[b])) == 0) continue;
    ll[0] = pb_field(lab[0], 1, x->life_key);
    ll[0] += pb_field(lab[0] + ll[0], 2, x->life_str[b]);
    ll[1] = pb_field(lab[1], 1, x->life_max_key);
    ll[1] += pb_field(lab[1] + ll[1], 3,
                      b == PH_LIFE_N - 1 ? 0 : (uint64_t)1 << (10 + 2 * b));
    ll[1] += pb_field(lab[1] + ll[1], 4, x->ns_unit);
    ph_sample_out(out, ids, s->npc, w, x->nv, lab, ll,
                  b == PH_LIFE_N - 1 ? 1 : 2);
  }
}

/* The samples of every entry whose rounded values are not all zero.
 * Locations are written as they are first met. */
static void ph_samples(ph_prof_t *p, ph_buf_t *out, ph_buf_t *locbuf,
                       ph_locs_t *l, const ph_map_t *maps, size_t nmaps,
                       const ph_extra_t *x) {
  const uint64_t *pcs = (const uint64_t *)p->pcs.p;
  uint32_t ids[PH_MAXF];
  for (size_t i = 0; i < ph_nstacks(p) && !out->err; i++) {
    const ph_stack_t *s = &ph_stacks(p)[i];
    bool any = false;
    for (int k = 0; k < 4; k++) any |= ph_round(s->v[k]) != 0;
    any |= ph_round(s->temp) != 0;
    for (int b = 0; b < PH_LIFE_N; b++) any |= ph_round(s->life[b]) != 0;
    if (!any) continue;
    for (uint32_t k = 0; k < s->npc; k++)
      ids[k] = ph_loc(l, pcs[s->pc0 + k], locbuf, maps, nmaps);
    ph_entry(p, s, x, ids, out);
  }
}

bool ph_prof_write(ph_prof_t *p, const char *default_type, uint64_t time_ns,
                   uint64_t duration_ns, ph_buf_t *out) {
  ph_buf_t pb = {0}, locbuf = {0};
  pb_strings_t st = {{0}, 0};
  static const char *const fixed[] = {"",          "alloc_objects", "count",
                                      "alloc_space", "bytes", "inuse_objects",
                                      "inuse_space", "space"};
  enum { S_AO = 1, S_COUNT, S_AS, S_BYTES, S_IO, S_IS, S_SPACE, S_NFIXED };
  for (int i = 0; i < S_NFIXED; i++) pb_string(&st, fixed[i], strlen(fixed[i]));
  pb_value_type(&pb, 1, S_AO, S_COUNT);
  pb_value_type(&pb, 1, S_AS, S_BYTES);
  pb_value_type(&pb, 1, S_IO, S_COUNT);
  pb_value_type(&pb, 1, S_IS, S_BYTES);
  ph_extra_t x = {.nv = 4, .temp_i = -1, .life_i = -1};
  if (p->temp) {
    pb_value_type(&pb, 1, pb_string(&st, "temporary_objects", 17), S_COUNT);
    x.temp_i = (int)x.nv++;
  }
  if (p->life) {
    pb_value_type(&pb, 1, pb_string(&st, "lifetime_objects", 16), S_COUNT);
    x.life_i = (int)x.nv++;
    x.life_key = pb_string(&st, "lifetime", 8);
    x.life_max_key = pb_string(&st, "lifetime_max", 12);
    x.ns_unit = pb_string(&st, "nanoseconds", 11);
    for (int b = 0; b < PH_LIFE_N; b++)
      x.life_str[b] = pb_string(&st, ph_life_names[b], strlen(ph_life_names[b]));
  }
  if (p->nodes) {
    x.node_key = pb_string(&st, "numa_node", 9);
    x.node_unit = pb_string(&st, "node", 4);
  }

  size_t nlines = 1, cap = 1;
  for (size_t i = 0; i < p->maps.len; i++) nlines += p->maps.p[i] == '\n';
  size_t npcs = p->pcs.len / sizeof(uint64_t);
  while (cap < 2 * npcs + 16) cap *= 2;
  ph_map_t *maps = ph_mem(nlines * sizeof *maps);
  ph_locs_t l = {ph_mem(cap * sizeof(uint64_t)), ph_mem(cap * sizeof(uint32_t)),
                 cap, 0};
  bool ok = maps != NULL && l.key != NULL && l.id != NULL;
  if (ok) {
    size_t nmaps = ph_mappings(p, &pb, &st, maps, nlines);
    ph_samples(p, &pb, &locbuf, &l, maps, nmaps, &x);
    ph_buf_put(&pb, locbuf.p, locbuf.len);
    ph_buf_put(&pb, st.tab.p, st.tab.len);
    unsigned char m[64];
    size_t k = pb_field(m, 9, time_ns);
    if (duration_ns) k += pb_field(m + k, 10, duration_ns);
    ph_buf_put(&pb, m, k);
    pb_value_type(&pb, 11, S_SPACE, S_BYTES);
    k = pb_field(m, 12, p->period ? p->period : 1);
    for (uint64_t i = S_AO; i <= S_IS; i++)
      if (strcmp(fixed[i], default_type) == 0) k += pb_field(m + k, 14, i);
    ph_buf_put(&pb, m, k);
    ok = !pb.err && !locbuf.err && !st.tab.err;
    if (ok) ph_gzip(pb.p, pb.len, out);
    ok = ok && !out->err;
  }
  ph_mem_free(maps, nlines * sizeof *maps);
  ph_mem_free(l.key, cap * sizeof(uint64_t));
  ph_mem_free(l.id, cap * sizeof(uint32_t));
  ph_buf_free(&pb);
  ph_buf_free(&locbuf);
  ph_buf_free(&st.tab);
  return ok;
}
