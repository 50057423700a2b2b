/* np_allocator_frames.c -- which frames belong to the allocator.
 *
 * A heap profile should show who *asked* for memory, so frames of the
 * allocator at the leaf end are dropped, as pprof does. We use jeprof's
 * rule: scanning from the leaf, each frame that is an allocator frame
 * discards everything seen so far (the frames before it were the
 * allocator's internals), so the first frame kept is the caller of the
 * outermost malloc/new. A frame is an allocator frame if its function is
 * one of the entry points below (names from jeprof's and Go pprof's skip
 * lists), or if it lives in a known allocator library (libnalloc,
 * libjemalloc, libtcmalloc) -- which catches internal static functions
 * whatever they are called, and stripped allocator libraries whose frames
 * cannot be named at all. */
#include <string.h>

#include "np_view.h"

static const char *const np_alloc_names[] = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "cfree",
    "memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc",
    "mallocx", "rallocx", "xallocx", "nallocx", "sdallocx", "dallocx",
    "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign",
    "__libc_valloc", "__libc_pvalloc", "__posix_memalign", "newImpl",
    "do_malloc", "do_calloc", "do_realloc", "_Znwm", "_Znam",
    NULL};

static const char *const np_alloc_prefixes[] = {
    "operator new", "operator delete", "tc_", "nalloc_", "je_",
    "tcmalloc::", NULL};

bool np_is_allocator_name(const char *f) {
  for (int i = 0; np_alloc_names[i]; i++)
    if (strcmp(f, np_alloc_names[i]) == 0) return true;
  for (int i = 0; np_alloc_prefixes[i]; i++)
    if (strncmp(f, np_alloc_prefixes[i], strlen(np_alloc_prefixes[i])) == 0)
      return true;
  return false;
}

bool np_is_allocator_module(const char *m) {
  return strncmp(m, "libnalloc", 9) == 0 ||
         strncmp(m, "libjemalloc", 11) == 0 ||
         strncmp(m, "libtcmalloc", 11) == 0;
}
