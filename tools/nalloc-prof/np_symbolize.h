/* np_symbolize.h -- address -> function, file, line (with inlined frames)
 * through elfutils' libdwfl, using the profile's MAPPED_LIBRARIES to turn a
 * runtime address into a file and an offset in it. */
#ifndef NP_SYMBOLIZE_H
#define NP_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "np_profile.h"

typedef struct np_symframe {
  char *func; /* demangled name; never NULL */
  char *file; /* NULL if unknown */
  int line;   /* 0 if unknown */
} np_symframe;

/* The result for one address: its frames, innermost (inlined callee)
 * first, and the module it belongs to. n == 1 with symbolized == false means
 * the frame is the "module+0xoffset" (or bare "0x...") placeholder. */
typedef struct np_symres {
  np_symframe *frames;
  size_t n;
  bool symbolized;
  int map_index;       /* index in profile->maps, -1 if none */
  const char *module;  /* basename of the mapped file, "" if none */
} np_symres;

typedef struct np_symopts {
  const char *exe;     /* --exe: the program binary, or NULL */
  char **remap_from;   /* --remap FROM=TO path-prefix rewrites */
  char **remap_to;
  size_t nremap;
  bool no_symbolize;   /* --no-symbols: leave every frame as module+0x.. */
} np_symopts;

typedef struct np_symbolizer np_symbolizer;

np_symbolizer *np_sym_new(const np_symopts *opts);
void np_sym_free(np_symbolizer *s);
/* Symbolizes one raw return address from profile p (pc-1 is looked up, as
 * pprof does, so the call instruction's line is reported). */
void np_sym_lookup(np_symbolizer *s, const np_profile *p, uint64_t pc,
                   np_symres *out);
void np_symres_free(np_symres *r);
/* GNU build-id of the file behind mapping m as lower-case hex, or NULL. */
char *np_sym_build_id(np_symbolizer *s, const np_mapping *m);
/* 0 for an unresolved file; 1 if found with symbols; used for the proto
 * mapping flags. */
bool np_sym_has_file(np_symbolizer *s, const np_mapping *m);

#endif
