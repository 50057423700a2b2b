/* helper_thread.c -- starting nalloc's own threads (helper_thread.h). */
#include "helper_thread.h"

#include <pthread.h>
#include <signal.h>

#include "tsd.h"

int helper_thread_start(void *(*fn)(void *), size_t stack) {
  tsd_t *tsd = tsd_get();
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits it */
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int err = stack != 0 ? pthread_attr_setstacksize(&a, stack) : 0;
  pthread_t t;
  if (err == 0) {
    tsd->reentrant++;
    err = pthread_create(&t, &a, fn, NULL);
    tsd->reentrant--;
  }
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return err;
}
