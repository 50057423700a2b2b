/* internal.h -- the whole interface prof/ has to the allocator: per-thread
 * state, locks, the metadata allocator, messages, the clock, the NUMA
 * nodes of arenas, and the NALLOC_CONF / nalloc_ctl table types. prof/
 * includes this header and nothing else from alloc/. Nothing here
 * allocates with malloc, so all of it may be used from inside malloc. */
#ifndef NALLOC_INTERNAL_H
#define NALLOC_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <sys/types.h>

#include "base.h"
#include "conf.h"
#include "ctl.h"
#include "lock.h"
#include "log.h"
#include "node.h"
#include "os.h"
#include "tsd.h"

#endif
