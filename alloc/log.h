/* log.h -- messages: one line on stderr prefixed "<nalloc>: ", written
 * with write(2) from a stack buffer, so they work inside malloc. */
#ifndef NALLOC_LOG_H
#define NALLOC_LOG_H

#include "compiler.h"

void nalloc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void nalloc_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* From now on, messages go to a private duplicate of stderr. */
void nalloc_log_keep(void);
/* The file descriptor messages go to (for reports written by others). */
int nalloc_log_fd(void);

#endif
