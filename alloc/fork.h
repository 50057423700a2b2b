/* fork.h -- fork handlers (pthread_atfork): every lock is taken before
 * fork and released or re-initialised after, in rank order (lock.h). */
#ifndef NALLOC_FORK_H
#define NALLOC_FORK_H

void nalloc_prefork(void);
void nalloc_postfork_parent(void);
void nalloc_postfork_child(void);

#endif
