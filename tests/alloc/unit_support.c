/* unit_support.c -- what a unit test that compiles a few engine sources
 * needs from the rest of the engine: the per-thread state variable and the
 * thread id (tsd.c brings the whole allocator with it). */
#include <sys/syscall.h>
#include <unistd.h>

#include "tsd.h"

__thread tsd_t nalloc_tsd __attribute__((tls_model("initial-exec")));

uint32_t nalloc_tid_slow(void) {
  uint32_t t = (uint32_t)syscall(SYS_gettid);
  tsd_get()->tid = t;
  return t;
}
