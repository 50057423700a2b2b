/* background.h -- the optional background purge thread. */
#ifndef NALLOC_BACKGROUND_H
#define NALLOC_BACKGROUND_H

#include "conf.h"

extern bool opt_background_thread;
extern const conf_table_t background_conf_table;
/* From the library constructor: starts the thread if the option is on. */
void background_start(void);

#endif
