/* size_class.c -- the size-class tables the library uses: constants
 * generated at build time from sc_compute.c (CMake runs sc_gen), so that
 * start-up computes nothing and the tables sit in read-only pages shared by
 * every process (computing them cost ~78,000 instructions and a written
 * page in every process, a third of what nalloc added to /bin/true). */
#include "size_class.h"

#include "sc_table.inc"
