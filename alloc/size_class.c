/* size_class.c -- the size-class tables the library uses: constants
 * generated at build time from sc_compute.c (CMake runs sc_gen), so that
 * start-up computes nothing and the tables sit in read-only pages shared by
 * every process (computing them cost ~78,000 instructions and a written
 * page in every process, a third of what nalloc added to /bin/true). */
#include "size_class.h"

#include "sc_table.inc"

/* ---- ctl: arenas.page, arenas.nbins, arenas.bin.<i>.* ------------------- */

static const size_t sc_ctl_page = PAGE;
static const unsigned sc_ctl_nbins = SC_NSMALL;
static const ctl_index_t sc_ctl_bins = {NULL, SC_NSMALL, 0};

static uint64_t sc_ctl_size(size_t i) { return sc_info[i].size; }
/* A thread's first span of a class is the smallest that fits; these are
 * the spans of a class the thread keeps busy (sc_npages). */
static uint64_t sc_ctl_npages(size_t i) { return sc_info[i].npages[2]; }
static uint64_t sc_ctl_nslots(size_t i) {
  return sc_nslots((unsigned)i, sc_info[i].npages[2]);
}

static const ctl_row_t sc_ctl_rows[] = {
    {"arenas.page", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .v.z = &sc_ctl_page},
    {"arenas.nbins", CTL_UNSIGNED, CTL_RO, CTL_SNAPSHOT, .v.u = &sc_ctl_nbins},
    {"arenas.bin.#.size", CTL_SIZE, CTL_RO, CTL_SNAPSHOT, .get_i = sc_ctl_size,
     .index = &sc_ctl_bins},
    {"arenas.bin.#.nslots", CTL_U32, CTL_RO, CTL_SNAPSHOT, .get_i = sc_ctl_nslots,
     .index = &sc_ctl_bins},
    {"arenas.bin.#.npages", CTL_U32, CTL_RO, CTL_SNAPSHOT, .get_i = sc_ctl_npages,
     .index = &sc_ctl_bins},
};
const ctl_table_t sc_ctl_table = {sc_ctl_rows, ARRAY_LEN(sc_ctl_rows)};
