/* np_allocator_frames.c -- which frames belong to the allocator.
 *
 * A heap profile should show who *asked* for memory, so frames of the
 * allocator at the leaf end are dropped, as pprof does. We use jeprof's
 * rule (np_view.c): scanning from the leaf, each allocator frame discards
 * everything seen so far (the frames before it were the allocator's
 * internals), so the first frame kept is the caller of the outermost
 * malloc/new.
 *
 * A frame is the allocator's when
 *   - it lives in an allocator library (libnalloc, libjemalloc,
 *     libtcmalloc, libmimalloc): every frame there, named or not, which
 *     also covers stripped libraries and static internal functions;
 *   - it is in the C library and is one of glibc's malloc functions
 *     (entry points and the internals under them), or in libstdc++ and is
 *     one of its operator new/delete overloads;
 *   - wherever it is, its name is exactly one of the known entry points
 *     below (an allocator linked statically into the program).
 * Never by a name prefix alone: a program's own tc_parse_config or
 * je_worker is the program's code, and so are its callees. */
#include <string.h>

#include "np_view.h"

/* Entry points of malloc, jemalloc, gperftools tcmalloc, google tcmalloc,
 * nalloc and the C++ runtime, as symbolization names them (C++ names
 * demangled). Whatever module holds them, they allocate for a caller. */
static const char *const np_entry_names[] = {
    /* C and POSIX */
    "malloc", "calloc", "realloc", "reallocarray", "free", "cfree",
    "memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc",
    /* jemalloc's own API, and its prefixed builds */
    "mallocx", "rallocx", "xallocx", "nallocx", "sdallocx", "dallocx",
    "je_malloc", "je_calloc", "je_realloc", "je_free", "je_memalign",
    "je_posix_memalign", "je_aligned_alloc", "je_valloc", "je_mallocx",
    "je_rallocx", "je_xallocx",
    /* gperftools tcmalloc */
    "tc_malloc", "tc_calloc", "tc_realloc", "tc_free", "tc_cfree",
    "tc_memalign", "tc_posix_memalign", "tc_valloc", "tc_pvalloc",
    "tc_malloc_skip_new_handler", "tc_new", "tc_newarray", "tc_new_nothrow",
    "tc_newarray_nothrow", "tc_new_aligned", "tc_newarray_aligned",
    "tc_new_aligned_nothrow", "tc_newarray_aligned_nothrow", "do_malloc",
    "do_calloc", "do_realloc", "do_memalign", "newImpl",
    /* google tcmalloc */
    "TCMallocInternalMalloc", "TCMallocInternalCalloc",
    "TCMallocInternalRealloc", "TCMallocInternalMemalign",
    "TCMallocInternalAlignedAlloc", "TCMallocInternalPosixMemalign",
    "TCMallocInternalValloc", "TCMallocInternalPvalloc",
    "TCMallocInternalNew", "TCMallocInternalNewArray",
    "TCMallocInternalNewNothrow", "TCMallocInternalNewArrayNothrow",
    "TCMallocInternalNewAligned", "TCMallocInternalNewArrayAligned",
    /* nalloc's prefixed API (include/nalloc.h) */
    "nalloc_malloc", "nalloc_calloc", "nalloc_realloc",
    "nalloc_reallocarray", "nalloc_posix_memalign", "nalloc_aligned_alloc",
    "nalloc_memalign", "nalloc_valloc", "nalloc_pvalloc", "nalloc_free",
    /* C++: the replaceable global operator new, demangled and mangled */
    "operator new(unsigned long)", "operator new[](unsigned long)",
    "operator new(unsigned long, std::nothrow_t const&)",
    "operator new[](unsigned long, std::nothrow_t const&)",
    "operator new(unsigned long, std::align_val_t)",
    "operator new[](unsigned long, std::align_val_t)",
    "operator new(unsigned long, std::align_val_t, std::nothrow_t const&)",
    "operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)",
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    NULL};

/* glibc's malloc: exported aliases and the internal functions a stack
 * through it may show. These names mean malloc only inside libc. */
static const char *const np_libc_names[] = {
    "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign",
    "__libc_valloc", "__libc_pvalloc", "__libc_free", "__posix_memalign",
    "__libc_reallocarray", "_int_malloc", "_int_realloc", "_int_memalign",
    "_int_free", "_mid_memalign", "sysmalloc", "tcache_init",
    "malloc_hook_ini", "realloc_hook_ini", "memalign_hook_ini",
    "__malloc_hook_ini", NULL};

static bool np_in_list(const char *const *list, const char *f) {
  for (int i = 0; list[i]; i++)
    if (strcmp(f, list[i]) == 0) return true;
  return false;
}

static bool np_starts(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* glibc's C library: libc.so.6, or libc-2.xx.so on old systems. */
static bool np_is_libc(const char *m) {
  return np_starts(m, "libc.so") || (np_starts(m, "libc-") && strstr(m, ".so"));
}

bool np_is_allocator_module(const char *m) {
  return np_starts(m, "libnalloc") || np_starts(m, "libjemalloc") ||
         np_starts(m, "libtcmalloc") || np_starts(m, "libmimalloc");
}

bool np_is_allocator_name(const char *f) {
  return np_in_list(np_entry_names, f);
}

bool np_is_allocator_frame(const char *module, const char *func) {
  if (np_is_allocator_module(module) || np_is_allocator_name(func))
    return true;
  if (np_is_libc(module)) return np_in_list(np_libc_names, func);
  /* Any overload libstdc++ has or will have (sized, aligned, nothrow). */
  if (np_starts(module, "libstdc++.so"))
    return np_starts(func, "operator new") || np_starts(func, "operator delete");
  return false;
}
