/* pb_decode.c -- an independent reader for `nalloc-prof proto` output,
 * written from profile.proto and sharing no code with the encoder.
 *
 * Usage: pb_decode FILE.pb.gz [SAMPLE_TYPE]
 * Checks the message's consistency (string 0 is "", every id referenced
 * exists, every sample has one value per sample type) and prints
 *   type <name> <unit>       for each sample type
 *   total <value>            for SAMPLE_TYPE (default: default_sample_type)
 *   flat <value> <function>  leaf function of each sample, summed
 *   cum <value> <function>   every function on the stack, once per sample
 * so the test can compare it with `nalloc-prof top`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void die(const char *m) {
  fprintf(stderr, "pb_decode: %s\n", m);
  exit(1);
}

typedef struct { const uint8_t *p, *end; } rd;

static uint64_t varint(rd *r) {
  uint64_t v = 0;
  for (int s = 0; s < 64; s += 7) {
    if (r->p >= r->end) die("truncated varint");
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) return v;
  }
  die("varint too long");
  return 0;
}

/* Next field: returns 0 at end; *sub is set for length-delimited fields. */
static int field(rd *r, int *wt, uint64_t *val, rd *sub) {
  if (r->p >= r->end) return 0;
  uint64_t key = varint(r);
  *wt = (int)(key & 7);
  if (*wt == 0) {
    *val = varint(r);
  } else if (*wt == 2) {
    uint64_t n = varint(r);
    if (n > (uint64_t)(r->end - r->p)) die("truncated field");
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
  } else {
    die("unexpected wire type");
  }
  return (int)(key >> 3);
}

#define MAXN 100000
static char *strs[MAXN];
static int nstrs;
static int64_t st_type[8], st_unit[8];
static int nst;
typedef struct { uint64_t locs[256]; int nlocs; int64_t vals[8]; int nvals; } sample;
static sample *samples;
static int nsamples;
typedef struct { uint64_t id, mapping; uint64_t fn[16]; int nfn; } loc;
static loc locs[MAXN];
static int nlocs;
typedef struct { uint64_t id; int64_t name; } func;
static func funcs[MAXN];
static int nfuncs;
static uint64_t map_ids[4096];
static int nmaps;
static int64_t default_type;

static void packed(int wt, uint64_t val, rd *sub, uint64_t *out, int *n,
                   int max) {
  if (wt == 0) {
    if (*n < max) out[(*n)++] = val;
    return;
  }
  while (sub->p < sub->end)
    if (*n < max) out[(*n)++] = varint(sub);
    else varint(sub);
}

int main(int argc, char **argv) {
  if (argc < 2) die("usage: pb_decode FILE.pb.gz [SAMPLE_TYPE]");
  gzFile g = gzopen(argv[1], "rb");
  if (!g) die("cannot open input");
  size_t cap = 1 << 20, len = 0;
  uint8_t *buf = malloc(cap);
  int n;
  while ((n = gzread(g, buf + len, (unsigned)(cap - len))) > 0) {
    len += (size_t)n;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  if (n < 0) die("bad gzip data");
  gzclose(g);
  samples = calloc(MAXN, sizeof *samples);
  rd r = {buf, buf + len}, sub;
  int wt;
  uint64_t v;
  int f;
  while ((f = field(&r, &wt, &v, &sub))) {
    rd s2;
    int w2, f2;
    uint64_t v2;
    switch (f) {
    case 1: /* sample_type */
      if (nst >= 8) die("too many sample types");
      while ((f2 = field(&sub, &w2, &v2, &s2)))
        if (f2 == 1) st_type[nst] = (int64_t)v2;
        else if (f2 == 2) st_unit[nst] = (int64_t)v2;
      nst++;
      break;
    case 2: { /* sample */
      if (nsamples >= MAXN) die("too many samples");
      sample *sm = &samples[nsamples++];
      uint64_t vals[8];
      while ((f2 = field(&sub, &w2, &v2, &s2))) {
        if (f2 == 1) packed(w2, v2, &s2, sm->locs, &sm->nlocs, 256);
        else if (f2 == 2) packed(w2, v2, &s2, vals, &sm->nvals, 8);
      }
      for (int i = 0; i < sm->nvals; i++) sm->vals[i] = (int64_t)vals[i];
      break;
    }
    case 3: /* mapping */
      while ((f2 = field(&sub, &w2, &v2, &s2)))
        if (f2 == 1 && nmaps < 4096) map_ids[nmaps++] = v2;
      break;
    case 4: { /* location */
      if (nlocs >= MAXN) die("too many locations");
      loc *l = &locs[nlocs++];
      while ((f2 = field(&sub, &w2, &v2, &s2))) {
        if (f2 == 1) l->id = v2;
        else if (f2 == 2) l->mapping = v2;
        else if (f2 == 4) {
          rd s3;
          int w3, f3;
          uint64_t v3;
          while ((f3 = field(&s2, &w3, &v3, &s3)))
            if (f3 == 1 && l->nfn < 16) l->fn[l->nfn++] = v3;
        }
      }
      break;
    }
    case 5: { /* function */
      if (nfuncs >= MAXN) die("too many functions");
      func *fn = &funcs[nfuncs++];
      while ((f2 = field(&sub, &w2, &v2, &s2)))
        if (f2 == 1) fn->id = v2;
        else if (f2 == 2) fn->name = (int64_t)v2;
      break;
    }
    case 6: /* string_table */
      if (nstrs >= MAXN) die("too many strings");
      strs[nstrs] = strndup((const char *)sub.p, (size_t)(sub.end - sub.p));
      nstrs++;
      break;
    case 14: default_type = (int64_t)v; break;
    default: break;
    }
  }
  if (nstrs == 0 || strs[0][0]) die("string_table[0] must be \"\"");
  if (nst == 0) die("no sample types");
  for (int i = 0; i < nst; i++) {
    if (st_type[i] >= nstrs || st_unit[i] >= nstrs) die("bad string index");
    printf("type %s %s\n", strs[st_type[i]], strs[st_unit[i]]);
  }
  const char *want = argc > 2 ? argv[2] : strs[default_type];
  int idx = -1;
  for (int i = 0; i < nst; i++)
    if (!strcmp(strs[st_type[i]], want)) idx = i;
  if (idx < 0) die("requested sample type not in profile");
  /* Per-function sums, keyed by function name. */
  static char *names[MAXN];
  static int64_t flat[MAXN], cum[MAXN];
  int nnames = 0;
  int64_t total = 0;
  for (int s = 0; s < nsamples; s++) {
    sample *sm = &samples[s];
    if (sm->nvals != nst) die("sample value count != sample type count");
    int64_t x = sm->vals[idx];
    total += x;
    int seen[512], nseen = 0;
    int first = 1;
    for (int k = 0; k < sm->nlocs; k++) {
      loc *l = NULL;
      for (int i = 0; i < nlocs; i++)
        if (locs[i].id == sm->locs[k]) l = &locs[i];
      if (!l) die("sample references a missing location");
      if (l->mapping) {
        int ok = 0;
        for (int i = 0; i < nmaps; i++) ok |= map_ids[i] == l->mapping;
        if (!ok) die("location references a missing mapping");
      }
      for (int j = 0; j < l->nfn; j++) {
        func *fn = NULL;
        for (int i = 0; i < nfuncs; i++)
          if (funcs[i].id == l->fn[j]) fn = &funcs[i];
        if (!fn) die("line references a missing function");
        if (fn->name >= nstrs) die("bad function name index");
        const char *nm = strs[fn->name];
        int id = -1;
        for (int i = 0; i < nnames; i++)
          if (!strcmp(names[i], nm)) id = i;
        if (id < 0) names[id = nnames++] = (char *)nm;
        if (first) flat[id] += x;
        first = 0;
        int dup = 0;
        for (int i = 0; i < nseen; i++) dup |= seen[i] == id;
        if (!dup && nseen < 512) {
          seen[nseen++] = id;
          cum[id] += x;
        }
      }
      first = 0;
    }
  }
  printf("total %lld\n", (long long)total);
  for (int i = 0; i < nnames; i++)
    printf("flat %lld %s\ncum %lld %s\n", (long long)flat[i], names[i],
           (long long)cum[i], names[i]);
  for (int i = 0; i < nstrs; i++) free(strs[i]);
  free(samples);
  free(buf);
  return 0;
}
