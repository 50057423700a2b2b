/* np_proto.c -- write the view as a pprof protobuf Profile (gzip'd), the
 * format of `go tool pprof`, pprof -http and continuous-profiling systems.
 *
 * Message layout (github.com/google/pprof/proto/profile.proto):
 *   Profile  1 sample_type  2 sample  3 mapping  4 location  5 function
 *            6 string_table 11 period_type 12 period 14 default_sample_type
 *   ValueType 1 type 2 unit            (string table indices)
 *   Sample    1 location_id (packed, leaf first) 2 value (packed)
 *   Mapping   1 id 2 memory_start 3 memory_limit 4 file_offset 5 filename
 *             6 build_id 7 has_functions 8 has_filenames 9 has_line_numbers
 *             10 has_inline_frames
 *   Location  1 id 2 mapping_id 3 address 4 line (innermost first)
 *   Line      1 function_id 2 line
 *   Function  1 id 2 name 3 system_name 4 filename
 * Values are the unbiased estimates rounded to integers. Like Go's legacy
 * heap reader, a location's address is the return address minus one, and
 * sample types are alloc_* then inuse_* (alloc only if the profile has
 * cumulative counters). The locations are already symbolized, so the
 * mapping flags tell pprof not to symbolize them again. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "np_pbenc.h"
#include "np_report.h"

typedef struct np_pb {
  np_intern strs; /* string table; "" is index 0 */
  np_buf msg;
} np_pb;

static int64_t np_s(np_pb *p, const char *s) {
  return (int64_t)np_intern_str(&p->strs, s ? s : "");
}

static void np_value_type(np_pb *p, int field, const char *type,
                          const char *unit) {
  np_buf m = {0};
  np_pb_int(&m, 1, np_s(p, type));
  np_pb_int(&m, 2, np_s(p, unit));
  np_pb_bytes(&p->msg, field, m.data ? m.data : "", m.len);
  np_buf_free(&m);
}

int np_report_proto(const np_view *v, np_symbolizer *sym, const np_ropts *o) {
  const np_profile *prof = v->prof;
  np_pb p = {0};
  np_s(&p, "");
  /* Like Go's reader: alloc_* only when they say something the in-use
   * values do not (or when they were asked for). */
  bool alloc = (prof->has_alloc && prof->alloc_differs) ||
               o->counter >= NP_ALLOC_OBJECTS;
  int types[4], ntypes = 0;
  if (alloc) types[ntypes++] = NP_ALLOC_OBJECTS, types[ntypes++] = NP_ALLOC_SPACE;
  types[ntypes++] = NP_INUSE_OBJECTS;
  types[ntypes++] = NP_INUSE_SPACE;
  for (int i = 0; i < ntypes; i++)
    np_value_type(&p, 1, np_counter_names[types[i]],
                  np_counter_is_space(types[i]) ? "bytes" : "count");

  /* Samples. */
  uint64_t *ids = NULL;
  size_t capids = 0;
  for (size_t i = 0; i < v->nstacks; i++) {
    const np_stack *s = &v->stacks[i];
    int64_t vals[4];
    bool any = false;
    for (int k = 0; k < ntypes; k++) {
      vals[k] = np_round(s->v[types[k]]);
      any |= vals[k] != 0;
    }
    if (!any) continue;
    size_t n = 0;
    for (size_t k = 0; k < s->nlocs; k++) *NP_PUSH(ids, n, capids) = s->locs[k] + 1;
    np_buf m = {0};
    np_pb_packed_u64(&m, 1, ids, n);
    np_pb_packed_i64(&m, 2, vals, (size_t)ntypes);
    np_pb_bytes(&p.msg, 2, m.data ? m.data : "", m.len);
    np_buf_free(&m);
  }
  free(ids);

  /* Mappings: those that some location points into. */
  bool *used = np_xcalloc(prof->nmaps + 1, sizeof *used);
  bool *has_fn = np_xcalloc(prof->nmaps + 1, sizeof *has_fn);
  bool *has_ln = np_xcalloc(prof->nmaps + 1, sizeof *has_ln);
  bool *has_inl = np_xcalloc(prof->nmaps + 1, sizeof *has_inl);
  for (size_t i = 0; i < v->nlocs; i++) {
    int mi = v->locs[i].map_index;
    if (mi < 0) continue;
    used[mi] = true;
    if (v->locs[i].symbolized) has_fn[mi] = true;
    if (v->locs[i].nframes > 1) has_inl[mi] = true;
    for (uint32_t k = 0; k < v->locs[i].nframes; k++)
      if (v->frames[v->locs[i].frame0 + k].file) has_ln[mi] = true;
  }
  for (size_t i = 0; i < prof->nmaps; i++) {
    if (!used[i]) continue;
    const np_mapping *mp = &prof->maps[i];
    np_buf m = {0};
    np_pb_uint(&m, 1, i + 1);
    np_pb_uint(&m, 2, mp->start);
    np_pb_uint(&m, 3, mp->end);
    np_pb_uint(&m, 4, mp->offset);
    np_pb_int(&m, 5, np_s(&p, mp->path));
    char *bid = np_sym_build_id(sym, mp);
    if (bid) np_pb_int(&m, 6, np_s(&p, bid));
    free(bid);
    np_pb_uint(&m, 7, has_fn[i]);
    np_pb_uint(&m, 8, has_ln[i]);
    np_pb_uint(&m, 9, has_ln[i]);
    np_pb_uint(&m, 10, has_inl[i]);
    np_pb_bytes(&p.msg, 3, m.data ? m.data : "", m.len);
    np_buf_free(&m);
  }
  free(used);
  free(has_fn);
  free(has_ln);
  free(has_inl);

  /* Locations, and functions keyed by (name, file). */
  np_intern fkeys = {0};
  np_buf fmsgs = {0};
  for (size_t i = 0; i < v->nlocs; i++) {
    const np_loc *l = &v->locs[i];
    np_buf m = {0};
    np_pb_uint(&m, 1, i + 1);
    if (l->map_index >= 0) np_pb_uint(&m, 2, (uint64_t)l->map_index + 1);
    np_pb_uint(&m, 3, l->pc ? l->pc - 1 : 0);
    for (uint32_t k = 0; l->symbolized && k < l->nframes; k++) {
      const np_frame *f = &v->frames[l->frame0 + k];
      char *key = np_xasprintf("%s\n%s", f->func, f->file ? f->file : "");
      size_t before = fkeys.n;
      uint32_t fid = np_intern_str(&fkeys, key) + 1;
      free(key);
      if (fkeys.n != before) {
        np_buf fm = {0};
        np_pb_uint(&fm, 1, fid);
        np_pb_int(&fm, 2, np_s(&p, f->func));
        np_pb_int(&fm, 3, np_s(&p, f->func));
        np_pb_int(&fm, 4, np_s(&p, f->file));
        np_pb_bytes(&fmsgs, 5, fm.data ? fm.data : "", fm.len);
        np_buf_free(&fm);
      }
      np_buf lm = {0};
      np_pb_uint(&lm, 1, fid);
      np_pb_int(&lm, 2, f->line);
      np_pb_bytes(&m, 4, lm.data ? lm.data : "", lm.len);
      np_buf_free(&lm);
    }
    np_pb_bytes(&p.msg, 4, m.data ? m.data : "", m.len);
    np_buf_free(&m);
  }
  if (fmsgs.len) np_buf_put(&p.msg, fmsgs.data, fmsgs.len);
  np_buf_free(&fmsgs);
  np_intern_free(&fkeys);

  /* period_type/period/default_sample_type use the string table too, so
   * intern them before the table is written. */
  int64_t pt_type = np_s(&p, "space"), pt_unit = np_s(&p, "bytes");
  int64_t dflt = np_s(&p, np_counter_names[o->counter]);
  for (size_t i = 0; i < p.strs.n; i++)
    np_pb_bytes(&p.msg, 6, np_intern_key(&p.strs, i), np_intern_len(&p.strs, i));
  np_buf m = {0};
  np_pb_int(&m, 1, pt_type);
  np_pb_int(&m, 2, pt_unit);
  np_pb_bytes(&p.msg, 11, m.data ? m.data : "", m.len);
  np_buf_free(&m);
  np_pb_int(&p.msg, 12,
            prof->sampling == NP_SAMPLING_NONE ? 1
            : prof->period ? (int64_t)prof->period
                           : (int64_t)prof->adjustment);
  np_pb_int(&p.msg, 14, dflt);

  np_buf gz = {0};
  int rc = np_gzip(p.msg.data ? p.msg.data : "", p.msg.len, &gz);
  if (rc == 0 && fwrite(gz.data, 1, gz.len, o->out) != gz.len) rc = -1;
  np_buf_free(&gz);
  np_buf_free(&p.msg);
  np_intern_free(&p.strs);
  return rc;
}
