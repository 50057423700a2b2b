/* log.h -- messages: one line on stderr prefixed "<nalloc>: ", written
 * with write(2) from a stack buffer, so they work inside malloc. */
#ifndef NALLOC_LOG_H
#define NALLOC_LOG_H

#include "compiler.h"

void nalloc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void nalloc_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* Makes n bytes of text from outside (NALLOC_CONF) safe to print on a
 * terminal: control bytes, DEL, bytes that are not UTF-8 and the C1
 * controls become \xNN, a backslash and '"' get a backslash before them,
 * printable ASCII and UTF-8 stay. Cut with "..." to fit dst (cap >= 8
 * bytes; at most 4 output bytes per input byte). Returns dst. */
const char *nalloc_log_escape(char *dst, size_t cap, const char *src, size_t n);
/* From now on, messages go to a private duplicate of stderr. */
void nalloc_log_keep(void);
/* Messages go to fd from now on (the conf fuzz target reads them back;
 * redirecting fd 2 instead would swallow a sanitizer's report). */
void nalloc_log_to(int fd);
/* The file descriptor messages go to (for reports written by others). */
int nalloc_log_fd(void);

#endif
