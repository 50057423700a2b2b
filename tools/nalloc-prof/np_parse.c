/* np_parse.c -- reader for the text heap-profile formats.
 *
 *  gperftools legacy text (what nalloc writes by default):
 *    heap profile: <n>: <s> [<an>: <as>] @ <label>[/<R>]
 *    <n>: <s> [<an>: <as>] @ 0x<pc> 0x<pc> ...      (leaf first)
 *    ...
 *    MAPPED_LIBRARIES:          (or "--- Memory map:")
 *    <verbatim /proc/pid/maps>
 *
 *  jemalloc threaded heap_v2 (jeprof's format):
 *    heap_v2/<R>
 *      t*: <n>: <s> [<an>: <as>]
 *      t<id>: <n>: <s> [<an>: <as>] [thread name]
 *    @ 0x<pc> 0x<pc> ...
 *      t*: <n>: <s> [<an>: <as>]       per-stack total (the main view)
 *      t<id>: ...                        per-thread rows (--thread=<id>)
 *    <blank>
 *    MAPPED_LIBRARIES: ...
 *
 * Tolerant where a writer may differ harmlessly (CRLF, tabs, padding, no
 * space after ':', upper-case hex, missing final newline); strict where
 * guessing would print wrong numbers (unknown labels, malformed records:
 * those are errors naming the line, so a truncated file is reported rather
 * than silently read). Header labels are interpreted as google-pprof /
 * jeprof do; see np_unbias.c for the scaling itself. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "np_profile.h"
#include "np_util.h"

const char *const np_counter_names[NP_NCOUNTERS] = {
    "inuse_objects", "inuse_space", "alloc_objects", "alloc_space"};

/* A cursor over one line [s, s+n). */
typedef struct np_cur {
  const char *s;
  size_t n, i;
} np_cur;

static void np_ws(np_cur *c) {
  while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t')) c->i++;
}

static bool np_lit(np_cur *c, char ch) {
  np_ws(c);
  if (c->i < c->n && c->s[c->i] == ch) {
    c->i++;
    return true;
  }
  return false;
}

/* Signed decimal; false if absent or out of int64 range. */
static bool np_int(np_cur *c, int64_t *out) {
  np_ws(c);
  bool neg = false;
  size_t i = c->i;
  if (i < c->n && c->s[i] == '-') {
    neg = true;
    i++;
  }
  if (i >= c->n || !isdigit((unsigned char)c->s[i])) return false;
  uint64_t v = 0;
  for (; i < c->n && isdigit((unsigned char)c->s[i]); i++) {
    unsigned d = (unsigned)(c->s[i] - '0');
    if (v > (UINT64_C(9223372036854775807) - d) / 10) return false;
    v = v * 10 + d;
  }
  c->i = i;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return true;
}

/* "n: s [an: as]" -- the bracket is optional (alloc = 0 then). */
static bool np_counts(np_cur *c, int64_t v[NP_NCOUNTERS]) {
  v[2] = v[3] = 0;
  if (!np_int(c, &v[0]) || !np_lit(c, ':') || !np_int(c, &v[1])) return false;
  size_t save = c->i;
  if (np_lit(c, '[')) {
    if (!np_int(c, &v[2]) || !np_lit(c, ':') || !np_int(c, &v[3]) ||
        !np_lit(c, ']'))
      return false;
  } else {
    c->i = save;
  }
  return true;
}

/* Addresses after '@': hex with optional 0x, any case, whitespace
 * separated. Returns false on a token that is not an address. */
static bool np_addrs(np_cur *c, np_record *r) {
  size_t cap = 0;
  for (;;) {
    np_ws(c);
    if (c->i >= c->n) return true;
    const char *t = c->s + c->i;
    size_t len = 0;
    while (c->i + len < c->n && t[len] != ' ' && t[len] != '\t') len++;
    c->i += len;
    size_t j = 0;
    if (len > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) j = 2;
    if (j == len || len - j > 16) return false;
    uint64_t v = 0;
    for (; j < len; j++) {
      int ch = tolower((unsigned char)t[j]);
      if (!isxdigit(ch)) return false;
      v = v * 16 + (uint64_t)(isdigit(ch) ? ch - '0' : ch - 'a' + 10);
    }
    *NP_PUSH(r->pcs, r->npcs, cap) = v;
  }
}

static int np_fail(char *err, size_t errlen, const char *file, int line,
                   const char *what, const char *s, size_t n) {
  if (n > 60) n = 60;
  char shown[64];
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    shown[k++] = isprint((unsigned char)s[i]) ? s[i] : '?';
  shown[k] = 0;
  snprintf(err, errlen, "%s:%d: %s: \"%s\"", file, line, what, shown);
  return -1;
}

static bool np_starts(const char *s, size_t n, const char *pfx) {
  size_t k = strlen(pfx);
  return n >= k && memcmp(s, pfx, k) == 0;
}

/* Interprets the label after '@' in a gperftools header the way
 * google-pprof's ReadHeapProfile does (Go pprof agrees except where noted
 * in np_unbias.c). */
static int np_gperf_label(np_profile *p, np_cur *c, char *err, size_t errlen,
                          const char *file) {
  np_ws(c);
  size_t b = c->i;
  while (c->i < c->n && (isalnum((unsigned char)c->s[c->i]) ||
                         c->s[c->i] == '_'))
    c->i++;
  size_t ln = c->i - b;
  if (ln >= sizeof p->label)
    return np_fail(err, errlen, file, 1, "unknown profile type", c->s + b, ln);
  memcpy(p->label, c->s + b, ln);
  p->label[ln] = 0;
  if (c->i < c->n && c->s[c->i] == '/') {
    c->i++;
    int64_t r;
    if (!np_int(c, &r) || r < 0)
      return np_fail(err, errlen, file, 1, "bad sampling period in header",
                     c->s, c->n);
    p->period = (uint64_t)r;
  }
  np_ws(c);
  if (c->i != c->n)
    return np_fail(err, errlen, file, 1, "unexpected text after header label",
                   c->s, c->n);
  const char *l = p->label;
  if (!strcmp(l, "heapprofile") || !strcmp(l, "growth") ||
      !strcmp(l, "fragmentation")) {
    p->sampling = NP_SAMPLING_NONE;
  } else if (!strcmp(l, "heap_v2") || !strcmp(l, "heapz_v2")) {
    /* Go pprof leaves R <= 1 unscaled (perl would inflate small objects);
     * an exact profile should not grow when read. */
    p->sampling = p->period == 1 ? NP_SAMPLING_NONE : NP_SAMPLING_V2;
    p->adjustment = p->period ? (double)p->period : 128 * 1024;
  } else if (!strcmp(l, "heap")) {
    p->sampling = NP_SAMPLING_V1;
    p->adjustment = p->period ? (double)p->period / 2 : 128 * 1024;
  } else {
    return np_fail(err, errlen, file, 1, "unknown profile type in header",
                   c->s, c->n);
  }
  if (p->sampling != NP_SAMPLING_NONE && p->adjustment < 1) p->adjustment = 1;
  return 0;
}

static int np_parse_header(np_profile *p, const char *s, size_t n, char *err,
                           size_t errlen, const char *file) {
  np_cur c = {s, n, 0};
  np_ws(&c);
  if (np_starts(s + c.i, n - c.i, "heap profile:")) {
    p->format = NP_FMT_GPERF;
    c.i += strlen("heap profile:");
    if (!np_counts(&c, p->header))
      return np_fail(err, errlen, file, 1, "malformed header", s, n);
    if (np_lit(&c, '@')) return np_gperf_label(p, &c, err, errlen, file);
    np_ws(&c);
    if (c.i != c.n)
      return np_fail(err, errlen, file, 1, "malformed header", s, n);
    /* No label: google-pprof treats it as an old remote-heap (v1, 128 KiB)
     * profile when the in-use and alloc pairs are equal; Go rejects it. */
    if (p->header[0] == p->header[2] && p->header[1] == p->header[3]) {
      p->sampling = NP_SAMPLING_V1;
      p->adjustment = 128 * 1024;
      np_warn("%s: header has no profile type; assuming 1-in-128KiB "
              "sampling as google-pprof does",
              file);
    }
    return 0;
  }
  if (np_starts(s + c.i, n - c.i, "heap")) {
    /* jeprof sends every other "heap..." header to its threaded reader,
     * which needs heap_v2/<R>. */
    p->format = NP_FMT_JEMALLOC;
    if (!np_starts(s + c.i, n - c.i, "heap_v2/"))
      return np_fail(err, errlen, file, 1,
                     "threaded heap profiles need a 'heap_v2/<rate>' header",
                     s, n);
    c.i += strlen("heap_v2/");
    int64_t r;
    if (!np_int(&c, &r) || r <= 0)
      return np_fail(err, errlen, file, 1, "bad sampling period in header", s,
                     n);
    np_ws(&c);
    if (c.i != c.n)
      return np_fail(err, errlen, file, 1, "malformed header", s, n);
    strcpy(p->label, "heap_v2");
    p->period = (uint64_t)r;
    /* jeprof scales every line, R = 1 included: jemalloc pre-biases its
     * counts for exactly that. */
    p->sampling = NP_SAMPLING_V2;
    p->adjustment = (double)r;
    return 0;
  }
  if (n >= 2 && (unsigned char)s[0] == 0x1f && (unsigned char)s[1] == 0x8b) {
    snprintf(err, errlen,
             "%s: gzip-compressed data (a pprof protobuf?); nalloc-prof reads "
             "text heap profiles (\"heap profile:\" or \"heap_v2/\")",
             file);
    return -1;
  }
  return np_fail(err, errlen, file, 1,
                 "not a heap profile (expected \"heap profile:\" or "
                 "\"heap_v2/<rate>\")",
                 s, n);
}

/* "t*:" or "t<digits>:" at the cursor; *tid = -1 for t*. */
static bool np_thread_tag(np_cur *c, long *tid) {
  np_ws(c);
  size_t i = c->i;
  if (i >= c->n || c->s[i] != 't') return false;
  i++;
  if (i < c->n && c->s[i] == '*') {
    *tid = -1;
    i++;
  } else {
    if (i >= c->n || !isdigit((unsigned char)c->s[i])) return false;
    long v = 0;
    while (i < c->n && isdigit((unsigned char)c->s[i])) {
      if (v > 100000000) return false;
      v = v * 10 + (c->s[i++] - '0');
    }
    *tid = v;
  }
  if (i >= c->n || c->s[i] != ':') return false;
  c->i = i + 1;
  return true;
}

static void np_add_record(np_profile *p, np_record *r) {
  np_unbias_record(p, r);
  for (int k = 2; k < 4; k++)
    if (r->raw[k]) p->has_alloc = true;
  if (r->raw[2] != r->raw[0] || r->raw[3] != r->raw[1]) p->alloc_differs = true;
  *NP_PUSH(p->recs, p->nrecs, p->caprecs) = *r;
}

/* A '#nalloc' view line (prof_dump.c): 1 and *r filled, 0 for any other
 * comment, -1 when malformed. Node lines are unbiased like records (they
 * carry a record's values); the others are counts of objects. */
static int np_view_line(np_profile *p, np_cur *c, np_record *r) {
  static const char node[] = "#nalloc node ", temp[] = "#nalloc temporary ",
                    life[] = "#nalloc lifetime ";
  const char *s = c->s + c->i;
  size_t n = c->n - c->i;
  int64_t x;
  if (np_starts(s, n, node)) {
    c->i += sizeof node - 1;
    if (!np_int(c, &x) || x < 0 || x > 255 || !np_counts(c, r->raw)) return -1;
    r->kind = NP_REC_NODE;
    r->node = (int)x;
  } else if (np_starts(s, n, temp)) {
    c->i += sizeof temp - 1;
    if (!np_int(c, &x) || x < 0) return -1;
    r->kind = NP_REC_TEMP;
    r->raw[NP_ALLOC_OBJECTS] = x;
  } else if (np_starts(s, n, life)) {
    c->i += sizeof life - 1;
    r->kind = NP_REC_LIFE;
    r->life = np_xcalloc(NP_LIFE_N, sizeof *r->life);
    for (int k = 0; k < NP_LIFE_N; k++) {
      if (!np_int(c, &x) || x < 0) {
        free(r->life);
        return -1;
      }
      r->life[k] = (uint64_t)x;
    }
  } else {
    return 0;
  }
  if (!np_lit(c, '@') || !np_addrs(c, r)) {
    free(r->life);
    free(r->pcs);
    return -1;
  }
  if (r->kind == NP_REC_NODE && (r->raw[0] < 0 || r->raw[1] < 0 ||
                                 r->raw[2] < 0 || r->raw[3] < 0))
    return -1;
  if (r->kind == NP_REC_NODE) np_unbias_record(p, r);
  else
    for (int k = 0; k < NP_NCOUNTERS; k++) r->v[k] = (double)r->raw[k];
  return 1;
}

int np_parse(const char *filename, const char *data, size_t len,
             np_profile *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  p->filename = np_xstrdup(filename);
  if (len == 0) {
    snprintf(err, errlen, "%s: empty file, not a heap profile", filename);
    return -1;
  }
  if (memchr(data, 0, len)) {
    /* Text profiles never contain NUL bytes: a binary file. Check the gzip
     * magic first for a better message. */
    if (!(len >= 2 && (unsigned char)data[0] == 0x1f &&
          (unsigned char)data[1] == 0x8b)) {
      snprintf(err, errlen, "%s: binary data, not a text heap profile",
               filename);
      return -1;
    }
  }
  int lineno = 0;
  bool in_maps = false, have_header = false;
  np_record *cur_stack = NULL; /* jemalloc: the last "@ ..." line */
  np_record stack = {0};
  size_t npos = 0;
  int rc = 0;
  while (npos < len) {
    const char *s = data + npos;
    const char *nl = memchr(s, '\n', len - npos);
    size_t n = nl ? (size_t)(nl - s) : len - npos;
    npos += n + (nl ? 1 : 0);
    lineno++;
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
      n--;
    if (!have_header) {
      size_t k = 0;
      while (k < n && isspace((unsigned char)s[k])) k++;
      if (k == n) continue; /* leading blank lines */
      if (np_parse_header(p, s, n, err, errlen, filename) < 0) goto fail;
      have_header = true;
      continue;
    }
    np_cur c = {s, n, 0};
    np_ws(&c);
    if (c.i == n) continue; /* blank */
    if (in_maps) {
      np_mapping m;
      if (np_maps_parse_line(s, n, &m))
        *NP_PUSH(p->maps, p->nmaps, p->capmaps) = m;
      continue; /* non-executable or foreign lines are ignored */
    }
    if (np_starts(s + c.i, n - c.i, "MAPPED_LIBRARIES:") ||
        np_starts(s + c.i, n - c.i, "--- Memory map:")) {
      in_maps = true;
      continue;
    }
    if (p->format == NP_FMT_GPERF) {
      np_record r = {0};
      r.thread = -1;
      r.line = lineno;
      if (s[c.i] == '#') {
        int k = np_view_line(p, &c, &r);
        if (k < 0) {
          rc = np_fail(err, errlen, filename, lineno, "malformed #nalloc line",
                       s, n);
          goto fail;
        }
        if (k > 0) {
          *NP_PUSH(p->recs, p->nrecs, p->caprecs) = r;
          if (r.kind == NP_REC_NODE && r.node >= p->nnodes) p->nnodes = r.node + 1;
          p->has_temp |= r.kind == NP_REC_TEMP;
          p->has_life |= r.kind == NP_REC_LIFE;
        }
        continue; /* other '#' lines: comments, as Go's pprof reads them */
      }
      if (!np_counts(&c, r.raw) || !np_lit(&c, '@')) {
        rc = np_fail(err, errlen, filename, lineno,
                     "malformed record (truncated file?)", s, n);
        goto fail;
      }
      if (!np_addrs(&c, &r)) {
        free(r.pcs);
        rc = np_fail(err, errlen, filename, lineno, "bad address in stack", s,
                     n);
        goto fail;
      }
      if (r.raw[0] < 0 || r.raw[1] < 0 || r.raw[2] < 0 || r.raw[3] < 0) {
        /* google-pprof drops such lines silently; say so instead. */
        np_warn("%s:%d: negative counter, record ignored", filename, lineno);
        free(r.pcs);
        continue;
      }
      np_add_record(p, &r);
      continue;
    }
    /* jemalloc threaded format */
    if (s[c.i] == '@') {
      c.i++;
      free(stack.pcs);
      memset(&stack, 0, sizeof stack);
      if (!np_addrs(&c, &stack)) {
        rc = np_fail(err, errlen, filename, lineno, "bad address in stack", s,
                     n);
        goto fail;
      }
      cur_stack = &stack;
      continue;
    }
    long tid;
    np_record r = {0};
    if (!np_thread_tag(&c, &tid) || !np_counts(&c, r.raw)) {
      rc = np_fail(err, errlen, filename, lineno,
                   "malformed line (truncated file?)", s, n);
      goto fail;
    }
    np_ws(&c);
    if (!cur_stack) {
      /* Header rows: totals (ignored: we sum the records) and names. */
      if (tid >= 0 && c.i < n) {
        np_thread_name *t = NP_PUSH(p->threads, p->nthreads, p->capthreads);
        t->id = tid;
        t->name = np_xstrndup(s + c.i, n - c.i);
      }
      continue;
    }
    if (r.raw[0] < 0 || r.raw[1] < 0 || r.raw[2] < 0 || r.raw[3] < 0) {
      np_warn("%s:%d: negative counter, line ignored", filename, lineno);
      continue;
    }
    r.thread = tid;
    r.line = lineno;
    r.npcs = cur_stack->npcs;
    r.pcs = np_xmalloc((r.npcs ? r.npcs : 1) * sizeof *r.pcs);
    if (r.npcs) memcpy(r.pcs, cur_stack->pcs, r.npcs * sizeof *r.pcs);
    np_add_record(p, &r);
  }
  free(stack.pcs);
  if (!have_header) {
    snprintf(err, errlen, "%s: empty file, not a heap profile", filename);
    return -1;
  }
  return 0;
fail:
  free(stack.pcs);
  (void)rc;
  return -1;
}

int np_load(const char *filename, np_profile *out, char *err, size_t errlen) {
  char *data;
  size_t len;
  memset(out, 0, sizeof *out);
  if (np_read_file(filename, &data, &len, err, errlen) < 0) return -1;
  int r = np_parse(filename, data, len, out, err, errlen);
  free(data);
  return r;
}

void np_profile_free(np_profile *p) {
  for (size_t i = 0; i < p->nrecs; i++) {
    free(p->recs[i].pcs);
    free(p->recs[i].life);
  }
  for (size_t i = 0; i < p->nmaps; i++) free(p->maps[i].path);
  for (size_t i = 0; i < p->nthreads; i++) free(p->threads[i].name);
  free(p->recs);
  free(p->maps);
  free(p->threads);
  free(p->filename);
  memset(p, 0, sizeof *p);
}
