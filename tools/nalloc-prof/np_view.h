/* np_view.h -- a symbolized, aggregated view of one profile: every unique
 * address becomes a location with its (possibly inlined) frames, and
 * records with the same location sequence are summed into one stack. The
 * allocator's own frames are removed from the leaf end here, so every
 * report and the protobuf agree on what the stacks are. */
#ifndef NP_VIEW_H
#define NP_VIEW_H

#include "np_profile.h"
#include "np_symbolize.h"
#include "np_util.h"

typedef struct np_frame {
  const char *func;   /* interned in view->strings */
  const char *file;   /* NULL if unknown */
  int line;
  bool symbolized;
} np_frame;

typedef struct np_loc {
  uint64_t pc;         /* raw return address from the profile */
  int map_index;       /* -1: outside every mapping */
  uint32_t frame0, nframes; /* view->frames[frame0..], innermost first */
  bool symbolized;
  bool allocator;      /* one of its frames is malloc & co. */
} np_loc;

typedef struct np_stack {
  uint32_t *locs;      /* leaf first */
  size_t nlocs;
  double v[NP_NCOUNTERS];
  double life[NP_LIFE_N]; /* views of NP_REC_LIFE records */
} np_stack;

typedef struct np_viewopts {
  long thread;                 /* -1: all threads; jemalloc tN otherwise */
  enum np_kind kind;           /* which records: ordinary (default), one
                                  node's, temporaries, lifetimes */
  int node;                    /* NP_REC_NODE: this node's */
  bool keep_allocator_frames;  /* --keep-allocator-frames */
} np_viewopts;

typedef struct np_view {
  const np_profile *prof;
  np_intern strings;
  np_frame *frames;
  size_t nframes, capframes;
  np_loc *locs;
  size_t nlocs, caplocs;
  np_intern loc_by_pc;   /* 8-byte pc -> loc index */
  np_stack *stacks;
  size_t nstacks, capstacks;
  np_intern stack_by_locs;
  double total[NP_NCOUNTERS];
  uint32_t unknown_frame; /* frame used for a record with no addresses */
} np_view;

np_view *np_view_build(const np_profile *p, np_symbolizer *sym,
                       const np_viewopts *o);
void np_view_free(np_view *v);

/* The frames of a stack, leaf first (inlined callees before their caller).
 * Returns the count; *out is a buffer owned by the caller (grown here). */
size_t np_view_stack_frames(const np_view *v, const np_stack *s,
                            uint32_t **out, size_t *cap);

/* The report key of a frame: the function name, or "func file:line" with
 * lines=true. Returned string is interned in keys. */
uint32_t np_frame_key(const np_view *v, uint32_t frame, bool lines,
                      np_intern *keys);

/* Allocator frames (np_allocator_frames.c): a known entry point by exact
 * name, anything in an allocator library, and malloc/operator new's
 * internals in libc and libstdc++. `module` is the mapped file's base name
 * ("" if none), `func` the demangled function name. */
bool np_is_allocator_name(const char *func);
bool np_is_allocator_module(const char *module);
bool np_is_allocator_frame(const char *module, const char *func);

#endif
