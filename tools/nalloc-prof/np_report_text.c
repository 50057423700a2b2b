/* np_report_text.c -- the text reports: top (flat/cum per function or
 * line, like pprof --text), stacks (whole stacks with all four counters)
 * and collapsed (folded stacks for flamegraph.pl, speedscope, ...). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "np_report.h"

/* Counters are printed truncated toward zero, as google-pprof/jeprof print
 * their floating-point sums (Go truncates each sample instead); the small
 * epsilon keeps 13.999999 from float noise from becoming 13. */
long long np_round(double x) {
  return (long long)(x >= 0 ? x + 1e-6 : x - 1e-6);
}
const char *np_unit(int c) { return np_counter_is_space(c) ? "B" : "objects"; }

static void np_functab_ensure(np_functab *t, size_t n) {
  if (n <= t->cap) return;
  size_t c = t->cap;
  np_grow((void **)&t->flat, &c, n, sizeof *t->flat);
  t->cum = np_xrealloc(t->cum, c * sizeof *t->cum);
  memset(t->flat + t->cap, 0, (c - t->cap) * sizeof *t->flat);
  memset(t->cum + t->cap, 0, (c - t->cap) * sizeof *t->cum);
  t->cap = c;
}

void np_functab_build(const np_view *v, int counter, bool lines,
                      np_functab *t) {
  memset(t, 0, sizeof *t);
  uint32_t *fr = NULL, *seen = NULL;
  size_t capfr = 0, capseen = 0;
  for (size_t i = 0; i < v->nstacks; i++) {
    const np_stack *s = &v->stacks[i];
    double x = s->v[counter];
    size_t n = np_view_stack_frames(v, s, &fr, &capfr);
    for (size_t k = 0; k < n; k++) {
      uint32_t key = np_frame_key(v, fr[k], lines, &t->keys);
      np_functab_ensure(t, t->keys.n);
      if (t->keys.n > capseen) {
        size_t old = capseen;
        np_grow((void **)&seen, &capseen, t->keys.n, sizeof *seen);
        memset(seen + old, 0xff, (capseen - old) * sizeof *seen);
      }
      if (k == 0) t->flat[key] += x;
      /* A recursive function counts once per stack in cum. */
      if (seen[key] != (uint32_t)i) {
        seen[key] = (uint32_t)i;
        t->cum[key] += x;
      }
    }
  }
  t->n = t->keys.n;
  free(fr);
  free(seen);
}

void np_functab_free(np_functab *t) {
  np_intern_free(&t->keys);
  free(t->flat);
  free(t->cum);
  memset(t, 0, sizeof *t);
}

void np_stack_folded(const np_view *v, const np_stack *s, bool lines,
                     np_buf *b) {
  uint32_t *fr = NULL;
  size_t cap = 0;
  size_t n = np_view_stack_frames(v, s, &fr, &cap);
  np_intern keys = {0};
  for (size_t k = n; k-- > 0;) {
    const char *name =
        np_intern_key(&keys, np_frame_key(v, fr[k], lines, &keys));
    /* ';' separates frames in the folded format. */
    for (const char *c = name; *c; c++) np_buf_putc(b, *c == ';' ? ':' : *c);
    if (k) np_buf_putc(b, ';');
  }
  np_intern_free(&keys);
  free(fr);
}

static const np_functab *np_sort_tab;
static bool np_sort_cum;
static int np_cmp_func(const void *pa, const void *pb) {
  uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  const np_functab *t = np_sort_tab;
  const double *k1 = np_sort_cum ? t->cum : t->flat;
  const double *k2 = np_sort_cum ? t->flat : t->cum;
  if (k1[a] != k1[b]) return k1[a] < k1[b] ? 1 : -1;
  if (k2[a] != k2[b]) return k2[a] < k2[b] ? 1 : -1;
  return strcmp(np_intern_key(&t->keys, a), np_intern_key(&t->keys, b));
}

static double np_pct(double x, double total) {
  return total != 0 ? 100.0 * x / total : 0.0;
}

/* Flat value of function `key` (a key of t) in another table, 0 if absent. */
static double np_flat_in(const np_functab *t, const np_functab *other,
                         uint32_t key) {
  uint32_t k = np_intern_find(&other->keys, np_intern_key(&t->keys, key),
                              np_intern_len(&t->keys, key));
  return k < other->n ? other->flat[k] : 0;
}

/* Per function (flat: the stacks whose leaf it is), the lifetime
 * histogram of its sampled objects, NP_LIFE_N values per key of t. */
static double *np_life_tab(const np_view *life, const np_functab *t,
                           bool lines) {
  double *h = np_xcalloc((t->n ? t->n : 1) * NP_LIFE_N, sizeof *h);
  np_intern scratch = {0};
  uint32_t *fr = NULL;
  size_t cap = 0;
  for (size_t i = 0; i < life->nstacks; i++) {
    const np_stack *s = &life->stacks[i];
    if (np_view_stack_frames(life, s, &fr, &cap) == 0) continue;
    uint32_t lk = np_frame_key(life, fr[0], lines, &scratch);
    uint32_t k = np_intern_find(&t->keys, np_intern_key(&scratch, lk),
                                np_intern_len(&scratch, lk));
    if (k >= t->n) continue;
    for (int b = 0; b < NP_LIFE_N; b++) h[k * NP_LIFE_N + b] += s->life[b];
  }
  free(fr);
  np_intern_free(&scratch);
  return h;
}

/* The bucket holding the median of a lifetime histogram, as its upper
 * bound ("<4ms"; prof_life_bkt: bucket k < 2^(10+2k) ns), "-" if empty. */
static const char *np_life_median(const double *h) {
  static const char *const up[NP_LIFE_N] = {
      "<1us",  "<4us",  "<16us", "<66us", "<262us", "<1ms",  "<4ms",
      "<17ms", "<67ms", "<268ms", "<1.1s", "<4.3s", "<17s", ">=17s"};
  double n = 0, acc = 0;
  for (int b = 0; b < NP_LIFE_N; b++) n += h[b];
  if (n == 0) return "-";
  for (int b = 0; b < NP_LIFE_N; b++)
    if ((acc += h[b]) * 2 >= n) return up[b];
  return up[NP_LIFE_N - 1];
}

int np_report_top(const np_view *v, const np_ropts *o) {
  np_functab t;
  np_functab_build(v, o->counter, o->lines, &t);
  double total = v->total[o->counter];
  int nn = o->nnodes;
  np_functab *nt = np_xcalloc((size_t)nn + 1, sizeof *nt), at = {0};
  for (int k = 0; k < nn; k++)
    np_functab_build(o->nodes[k], o->counter, o->lines, &nt[k]);
  if (o->all) np_functab_build(o->all, NP_ALLOC_OBJECTS, o->lines, &at);
  double *life = o->life ? np_life_tab(o->life, &t, o->lines) : NULL;
  if (o->all)
    fprintf(o->out, "Total: %lld temporary allocations (freed before their "
                    "thread allocated again) of %lld\n",
            np_round(total), np_round(o->all->total[NP_ALLOC_OBJECTS]));
  else
    fprintf(o->out, "Total: %lld %s (%s)\n", np_round(total),
            np_unit(o->counter), np_counter_names[o->counter]);
  fprintf(o->out, "%12s %7s %7s %12s %7s", "flat", "flat%", "sum%", "cum",
          "cum%");
  for (int k = 0; k < nn; k++) {
    char h[16];
    snprintf(h, sizeof h, "node%d", k);
    fprintf(o->out, " %12s", h);
  }
  if (o->all) fprintf(o->out, " %12s %7s", "allocs", "temp%");
  if (life) fprintf(o->out, " %9s", "lifetime");
  fprintf(o->out, "  %s\n", o->lines ? "line" : "function");
  uint32_t *idx = np_xmalloc((t.n ? t.n : 1) * sizeof *idx);
  for (size_t i = 0; i < t.n; i++) idx[i] = (uint32_t)i;
  np_sort_tab = &t;
  np_sort_cum = o->cum;
  qsort(idx, t.n, sizeof *idx, np_cmp_func);
  double sum = 0;
  long shown = 0;
  for (size_t i = 0; i < t.n; i++) {
    uint32_t k = idx[i];
    if (np_round(t.flat[k]) == 0 && np_round(t.cum[k]) == 0) continue;
    if (o->nodecount && shown >= o->nodecount) break;
    sum += t.flat[k];
    fprintf(o->out, "%12lld %6.2f%% %6.2f%% %12lld %6.2f%%",
            np_round(t.flat[k]), np_pct(t.flat[k], total), np_pct(sum, total),
            np_round(t.cum[k]), np_pct(t.cum[k], total));
    for (int d = 0; d < nn; d++)
      fprintf(o->out, " %12lld", np_round(np_flat_in(&t, &nt[d], k)));
    if (o->all) {
      double a = np_flat_in(&t, &at, k);
      fprintf(o->out, " %12lld %6.2f%%", np_round(a), np_pct(t.flat[k], a));
    }
    if (life) fprintf(o->out, " %9s", np_life_median(life + k * NP_LIFE_N));
    fprintf(o->out, "  %s\n", np_intern_key(&t.keys, k));
    shown++;
  }
  free(idx);
  free(life);
  for (int d = 0; d < nn; d++) np_functab_free(&nt[d]);
  free(nt);
  if (o->all) np_functab_free(&at);
  np_functab_free(&t);
  return 0;
}

/* Stacks sort by the chosen counter, then by their folded text so the
 * order is the same on every run. */
typedef struct np_srow {
  const np_stack *s;
  char *folded;
} np_srow;
static int np_sort_counter;
static int np_cmp_srow(const void *pa, const void *pb) {
  const np_srow *a = pa, *b = pb;
  double x = a->s->v[np_sort_counter], y = b->s->v[np_sort_counter];
  if (x != y) return x < y ? 1 : -1;
  return strcmp(a->folded, b->folded);
}

static np_srow *np_sorted_stacks(const np_view *v, int counter, bool lines) {
  np_srow *rows = np_xcalloc(v->nstacks + 1, sizeof *rows);
  for (size_t i = 0; i < v->nstacks; i++) {
    np_buf b = {0};
    np_stack_folded(v, &v->stacks[i], lines, &b);
    rows[i].s = &v->stacks[i];
    rows[i].folded = b.data ? b.data : np_xstrdup("");
  }
  np_sort_counter = counter;
  qsort(rows, v->nstacks, sizeof *rows, np_cmp_srow);
  return rows;
}

int np_report_stacks(const np_view *v, const np_ropts *o) {
  np_srow *rows = np_sorted_stacks(v, o->counter, o->lines);
  double total = v->total[o->counter];
  fprintf(o->out, "Total: %lld %s (%s) in %zu stacks\n", np_round(total),
          np_unit(o->counter), np_counter_names[o->counter], v->nstacks);
  uint32_t *fr = NULL;
  size_t cap = 0;
  long shown = 0;
  for (size_t i = 0; i < v->nstacks; i++) {
    const np_stack *s = rows[i].s;
    if (np_round(s->v[o->counter]) == 0) continue;
    if (o->nodecount && shown >= o->nodecount) break;
    shown++;
    fprintf(o->out,
            "\n#%ld  %lld %s (%.2f%%)  inuse: %lld objects, %lld B  alloc: "
            "%lld objects, %lld B\n",
            shown, np_round(s->v[o->counter]), np_unit(o->counter),
            np_pct(s->v[o->counter], total), np_round(s->v[NP_INUSE_OBJECTS]),
            np_round(s->v[NP_INUSE_SPACE]), np_round(s->v[NP_ALLOC_OBJECTS]),
            np_round(s->v[NP_ALLOC_SPACE]));
    size_t n = np_view_stack_frames(v, s, &fr, &cap);
    for (size_t k = 0; k < n; k++) {
      const np_frame *f = &v->frames[fr[k]];
      if (f->file)
        fprintf(o->out, "    %s  %s:%d\n", f->func, f->file, f->line);
      else
        fprintf(o->out, "    %s\n", f->func);
    }
  }
  free(fr);
  for (size_t i = 0; i < v->nstacks; i++) free(rows[i].folded);
  free(rows);
  return 0;
}

static int np_cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int np_report_collapsed(const np_view *v, const np_ropts *o) {
  /* One line per distinct folded stack, sorted by text (the order
   * flamegraph.pl expects and the easiest to diff). Stacks that differ only
   * in addresses fold to the same text and are summed. */
  np_intern keys = {0};
  double *val = NULL;
  size_t capval = 0;
  for (size_t i = 0; i < v->nstacks; i++) {
    np_buf b = {0};
    np_stack_folded(v, &v->stacks[i], o->lines, &b);
    uint32_t k = np_intern_bytes(&keys, b.data ? b.data : "", b.len);
    if (k >= capval) {
      size_t old = capval;
      np_grow((void **)&val, &capval, k + 1, sizeof *val);
      memset(val + old, 0, (capval - old) * sizeof *val);
    }
    val[k] += v->stacks[i].v[o->counter];
    np_buf_free(&b);
  }
  const char **names = np_xmalloc((keys.n + 1) * sizeof *names);
  for (size_t i = 0; i < keys.n; i++) names[i] = np_intern_key(&keys, i);
  qsort(names, keys.n, sizeof *names, np_cmp_str);
  for (size_t i = 0; i < keys.n; i++) {
    uint32_t k = np_intern_find(&keys, names[i], strlen(names[i]));
    long long x = np_round(val[k]);
    if (x > 0) fprintf(o->out, "%s %lld\n", names[i], x);
  }
  free(names);
  free(val);
  np_intern_free(&keys);
  return 0;
}
