/* np_view.c -- build the symbolized, aggregated view of a profile. See
 * np_view.h. Each unique address is symbolized once; stacks are keyed by
 * their location sequence after the allocator frames are cut off. */
#include "np_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *np_vstr(np_view *v, const char *s) {
  if (!s) return NULL;
  return np_intern_key(&v->strings, np_intern_str(&v->strings, s));
}

static uint32_t np_add_frame(np_view *v, const char *func, const char *file,
                             int line, bool symbolized) {
  np_frame *f = NP_PUSH(v->frames, v->nframes, v->capframes);
  f->func = np_vstr(v, func);
  f->file = np_vstr(v, file);
  f->line = line;
  f->symbolized = symbolized;
  return (uint32_t)(v->nframes - 1);
}

static uint32_t np_get_loc(np_view *v, np_symbolizer *sym, uint64_t pc) {
  uint32_t id = np_intern_bytes(&v->loc_by_pc, &pc, sizeof pc);
  if (id < v->nlocs) return id;
  np_symres r;
  np_sym_lookup(sym, v->prof, pc, &r);
  np_loc *l = NP_PUSH(v->locs, v->nlocs, v->caplocs);
  l->pc = pc;
  l->map_index = r.map_index;
  l->symbolized = r.symbolized;
  l->frame0 = (uint32_t)v->nframes;
  l->nframes = (uint32_t)r.n;
  l->allocator = np_is_allocator_module(r.module);
  for (size_t i = 0; i < r.n; i++) {
    np_add_frame(v, r.frames[i].func, r.frames[i].file, r.frames[i].line,
                 r.symbolized);
    if (r.symbolized && np_is_allocator_frame(r.module, r.frames[i].func))
      l->allocator = true;
  }
  np_symres_free(&r);
  return id;
}

np_view *np_view_build(const np_profile *p, np_symbolizer *sym,
                       const np_viewopts *o) {
  np_view *v = np_xcalloc(1, sizeof *v);
  v->prof = p;
  v->unknown_frame = np_add_frame(v, "[no stack]", NULL, 0, false);
  uint32_t *locs = NULL;
  size_t caplocs = 0;
  for (size_t i = 0; i < p->nrecs; i++) {
    const np_record *r = &p->recs[i];
    if (r->thread != o->thread || r->kind != o->kind ||
        (o->kind == NP_REC_NODE && r->node != o->node))
      continue;
    size_t n = 0;
    for (size_t k = 0; k < r->npcs; k++)
      *NP_PUSH(locs, n, caplocs) = np_get_loc(v, sym, r->pcs[k]);
    size_t first = 0;
    if (!o->keep_allocator_frames) {
      /* jeprof's rule: the root-most allocator frame wins. If that would
       * leave nothing, keep the stack whole rather than lose it. */
      for (size_t k = 0; k < n; k++)
        if (v->locs[locs[k]].allocator) first = k + 1;
      if (first == n) first = 0;
    }
    size_t nl = n - first;
    uint32_t sid = np_intern_bytes(&v->stack_by_locs, locs + first,
                                   nl * sizeof *locs);
    if (sid >= v->nstacks) {
      np_stack *s = NP_PUSH(v->stacks, v->nstacks, v->capstacks);
      memset(s, 0, sizeof *s);
      s->nlocs = nl;
      s->locs = np_xmalloc((nl ? nl : 1) * sizeof *s->locs);
      if (nl) memcpy(s->locs, locs + first, nl * sizeof *locs);
    }
    for (int c = 0; c < NP_NCOUNTERS; c++) {
      v->stacks[sid].v[c] += r->v[c];
      v->total[c] += r->v[c];
    }
    if (r->life)
      for (int k = 0; k < NP_LIFE_N; k++)
        v->stacks[sid].life[k] += (double)r->life[k];
  }
  free(locs);
  return v;
}

void np_view_free(np_view *v) {
  if (!v) return;
  for (size_t i = 0; i < v->nstacks; i++) free(v->stacks[i].locs);
  free(v->stacks);
  free(v->locs);
  free(v->frames);
  np_intern_free(&v->strings);
  np_intern_free(&v->loc_by_pc);
  np_intern_free(&v->stack_by_locs);
  free(v);
}

size_t np_view_stack_frames(const np_view *v, const np_stack *s,
                            uint32_t **out, size_t *cap) {
  size_t n = 0;
  for (size_t i = 0; i < s->nlocs; i++) {
    const np_loc *l = &v->locs[s->locs[i]];
    for (uint32_t k = 0; k < l->nframes; k++)
      *NP_PUSH(*out, n, *cap) = l->frame0 + k;
  }
  if (n == 0) *NP_PUSH(*out, n, *cap) = v->unknown_frame;
  return n;
}

uint32_t np_frame_key(const np_view *v, uint32_t frame, bool lines,
                      np_intern *keys) {
  const np_frame *f = &v->frames[frame];
  if (!lines || !f->file) return np_intern_str(keys, f->func);
  char *k = np_xasprintf("%s %s:%d", f->func, f->file, f->line);
  uint32_t id = np_intern_str(keys, k);
  free(k);
  return id;
}
