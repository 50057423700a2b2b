/* np_report.h -- the outputs of nalloc-prof. Each takes a built view (or
 * two, for diff) and writes to o->out. */
#ifndef NP_REPORT_H
#define NP_REPORT_H

#include <stdio.h>

#include "np_view.h"

typedef struct np_ropts {
  int counter;       /* enum np_counter: what sorts and sizes things */
  bool lines;        /* key by function and source line */
  bool cum;          /* top, diff: sort functions by cumulative value
                        (default: by flat value, as pprof does) */
  long nodecount;    /* rows to print; 0 = all */
  const char *title; /* flamegraph title, NULL for a default */
  FILE *out;
  /* top's extra columns, from nalloc's view lines (issue 14): */
  const np_view *const *nodes; /* per NUMA node views: flat per node */
  int nnodes;
  const np_view *all;  /* --temporary: the ordinary view (allocations) */
  const np_view *life; /* lifetime histograms: a median lifetime column */
} np_ropts;

int np_report_top(const np_view *v, const np_ropts *o);
int np_report_stacks(const np_view *v, const np_ropts *o);
int np_report_collapsed(const np_view *v, const np_ropts *o);
int np_report_flamegraph(const np_view *v, const np_ropts *o);
int np_report_diff(const np_view *a, const np_view *b, const np_ropts *o);
int np_report_proto(const np_view *v, np_symbolizer *sym, const np_ropts *o);

/* Per-function (or per-line) flat and cumulative sums of one counter. */
typedef struct np_functab {
  np_intern keys;
  double *flat, *cum;
  size_t n, cap;
} np_functab;
void np_functab_build(const np_view *v, int counter, bool lines,
                      np_functab *t);
void np_functab_free(np_functab *t);

/* Appends the stack root-first as "main;a;b" (folded-stack form). */
void np_stack_folded(const np_view *v, const np_stack *s, bool lines,
                     np_buf *b);

/* "14 B" / "6" (objects): a counter value rounded for printing. */
long long np_round(double x);
const char *np_unit(int counter); /* "B" or "objects" */

#endif
