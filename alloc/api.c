/* api.c -- the nalloc_-prefixed entry points (declared in nalloc.h), for
 * programs that call nalloc without replacing malloc. */
#include "nalloc.h"

#define NAME(x) nalloc_##x
#include "api_impl.h"
