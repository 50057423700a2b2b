/* background.h -- the background decay thread (background_thread). */
#ifndef NALLOC_BACKGROUND_H
#define NALLOC_BACKGROUND_H

#include "conf.h"

extern bool opt_background_thread;
extern const conf_table_t background_conf_table;
/* From the library constructor: arms the thread if the option is on (it
 * starts once there are free pages to decay). */
void background_start(void);
/* An arena now holds npages decaying pages and its next decay is due at
 * `due` (CLOCK_MONOTONIC ns; called by the page heap, under its lock:
 * never allocates): asks for the thread to be started, or wakes it if it
 * sleeps past `due`. */
void background_note_dirty(size_t npages, uint64_t due);
/* An arena has mapped this many bytes (page heap, under its lock). */
void background_note_mapped(size_t bytes);
/* Starts the thread if it was asked for. Call with no nalloc lock held,
 * from an allocation or free entry point. */
void background_poll(void);
unsigned background_nthreads(void); /* 0 or 1 */
uint64_t background_nruns(void);    /* wake-ups that decayed the arenas */
void background_postfork_child(void);

#endif
