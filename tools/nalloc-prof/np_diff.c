/* np_diff.c -- what grew and what shrank between two profiles (typically
 * two dumps of one process, for leak hunting).
 *
 * The two profiles may come from different runs, where ASLR put the code
 * at different addresses, so nothing is matched by address: functions are
 * matched by name (or name and line) and stacks by their folded text.
 * Output: the total change, then per function (flat and cum deltas) and per
 * stack, largest growth first and largest shrink last. Functions are
 * sorted by their flat change, as `pprof -diff_base -top` does, so the
 * functions that allocate the difference come first, not the roots
 * (main, an interpreter's eval loop) that only call them; --cum sorts
 * them by cumulative change instead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "np_report.h"

typedef struct np_drow {
  const char *name;
  double a, b;   /* old, new (cum for functions, value for stacks) */
  double fa, fb; /* old, new flat (functions only) */
} np_drow;

/* Growth first, shrink last: by the change of a/b, then of fa/fb. */
static int np_cmp_drow(const void *pa, const void *pb) {
  const np_drow *x = pa, *y = pb;
  double dx = x->b - x->a, dy = y->b - y->a;
  if (dx != dy) return dx < dy ? 1 : -1;
  double fx = x->fb - x->fa, fy = y->fb - y->fa;
  if (fx != fy) return fx < fy ? 1 : -1;
  return strcmp(x->name, y->name);
}

/* Functions by flat change first (then cum): np_cmp_drow with the pairs
 * swapped. */
static int np_cmp_drow_flat(const void *pa, const void *pb) {
  const np_drow *x = pa, *y = pb;
  np_drow sx = {x->name, x->fa, x->fb, x->a, x->b};
  np_drow sy = {y->name, y->fa, y->fb, y->a, y->b};
  return np_cmp_drow(&sx, &sy);
}

/* Joins keys of two tables into rows. */
static np_drow *np_join(np_intern *names, size_t *nrows) {
  np_drow *rows = np_xcalloc(names->n + 1, sizeof *rows);
  for (size_t i = 0; i < names->n; i++) rows[i].name = np_intern_key(names, i);
  *nrows = names->n;
  return rows;
}

int np_report_diff(const np_view *va, const np_view *vb, const np_ropts *o) {
  int c = o->counter;
  const char *u = np_unit(c);
  double ta = va->total[c], tb = vb->total[c];
  fprintf(o->out, "Total %s: old %lld %s, new %lld %s, change %+lld %s\n",
          np_counter_names[c], np_round(ta), u, np_round(tb), u,
          np_round(tb) - np_round(ta), u);

  /* By function. */
  np_functab fa, fb;
  np_functab_build(va, c, o->lines, &fa);
  np_functab_build(vb, c, o->lines, &fb);
  np_intern names = {0};
  for (size_t i = 0; i < fa.n; i++)
    np_intern_str(&names, np_intern_key(&fa.keys, i));
  for (size_t i = 0; i < fb.n; i++)
    np_intern_str(&names, np_intern_key(&fb.keys, i));
  size_t n;
  np_drow *rows = np_join(&names, &n);
  for (size_t i = 0; i < n; i++) {
    const char *k = rows[i].name;
    uint32_t ia = np_intern_find(&fa.keys, k, strlen(k));
    uint32_t ib = np_intern_find(&fb.keys, k, strlen(k));
    if (ia != UINT32_MAX) rows[i].a = fa.cum[ia], rows[i].fa = fa.flat[ia];
    if (ib != UINT32_MAX) rows[i].b = fb.cum[ib], rows[i].fb = fb.flat[ib];
  }
  qsort(rows, n, sizeof *rows, o->cum ? np_cmp_drow : np_cmp_drow_flat);
  fprintf(o->out, "\nBy %s (new - old, by %s change):\n%12s %12s %12s %12s  %s\n",
          o->lines ? "line" : "function", o->cum ? "cum" : "flat", "flat",
          "cum", "old cum", "new cum", o->lines ? "line" : "function");
  long shown = 0;
  for (size_t i = 0; i < n; i++) {
    long long df = np_round(rows[i].fb) - np_round(rows[i].fa);
    long long dc = np_round(rows[i].b) - np_round(rows[i].a);
    if (df == 0 && dc == 0) continue;
    if (o->nodecount && shown++ >= o->nodecount) break;
    fprintf(o->out, "%+12lld %+12lld %12lld %12lld  %s\n", df, dc,
            np_round(rows[i].a), np_round(rows[i].b), rows[i].name);
  }
  free(rows);
  np_intern_free(&names);
  np_functab_free(&fa);
  np_functab_free(&fb);

  /* By stack, matched by folded text. */
  np_intern stacks = {0};
  double *sv[2] = {NULL, NULL};
  size_t capv[2] = {0, 0};
  const np_view *views[2] = {va, vb};
  for (int w = 0; w < 2; w++) {
    for (size_t i = 0; i < views[w]->nstacks; i++) {
      np_buf b = {0};
      np_stack_folded(views[w], &views[w]->stacks[i], o->lines, &b);
      uint32_t k = np_intern_bytes(&stacks, b.data ? b.data : "", b.len);
      np_buf_free(&b);
      for (int z = 0; z < 2; z++) {
        if (k >= capv[z]) {
          size_t old = capv[z];
          np_grow((void **)&sv[z], &capv[z], k + 1, sizeof *sv[z]);
          memset(sv[z] + old, 0, (capv[z] - old) * sizeof *sv[z]);
        }
      }
      sv[w][k] += views[w]->stacks[i].v[c];
    }
  }
  rows = np_join(&stacks, &n);
  for (size_t i = 0; i < n; i++) {
    rows[i].a = sv[0][i];
    rows[i].b = sv[1][i];
  }
  qsort(rows, n, sizeof *rows, np_cmp_drow);
  fprintf(o->out, "\nBy stack (new - old), root first:\n%12s %12s %12s  %s\n",
          "change", "old", "new", "stack");
  shown = 0;
  for (size_t i = 0; i < n; i++) {
    long long d = np_round(rows[i].b) - np_round(rows[i].a);
    if (d == 0) continue;
    if (o->nodecount && shown++ >= o->nodecount) break;
    fprintf(o->out, "%+12lld %12lld %12lld  %s\n", d, np_round(rows[i].a),
            np_round(rows[i].b), rows[i].name);
  }
  free(rows);
  free(sv[0]);
  free(sv[1]);
  np_intern_free(&stacks);
  return 0;
}
