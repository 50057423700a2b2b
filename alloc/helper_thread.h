/* helper_thread.h -- starting nalloc's own threads (the decay thread, the
 * profiler's signal-dump, HTTP and libunwind-loading threads). */
#ifndef NALLOC_HELPER_THREAD_H
#define NALLOC_HELPER_THREAD_H

#include <stddef.h>

/* Starts fn(NULL) on a detached thread with a stack of `stack` bytes (0:
 * the default): 0, or the errno value of
 * pthread_create. The thread starts with every signal blocked, so that it
 * never runs a handler of the program's; the calling thread does not
 * sample meanwhile, since glibc allocates the new thread's TLS in it:
 * nalloc's memory, not the program's. pthread_create allocates: the
 * caller holds no lock an allocation takes. fn names its thread itself
 * (naming another thread opens a file in /proc). */
int helper_thread_start(void *(*fn)(void *), size_t stack);

#endif
