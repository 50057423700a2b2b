/* np_util.h -- small shared helpers for nalloc-prof: checked allocation,
 * growable byte buffers, a string/bytes intern table and error reporting.
 *
 * The tool is a short-lived command-line program, so out-of-memory simply
 * ends it with a message (np_xmalloc); everything else reports errors to the
 * caller so that bad input never turns into a crash. */
#ifndef NP_UTIL_H
#define NP_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *np_xmalloc(size_t n);
void *np_xcalloc(size_t n, size_t size);
void *np_xrealloc(void *p, size_t n);
char *np_xstrdup(const char *s);
char *np_xstrndup(const char *s, size_t n);
char *np_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Grow *arr (element size esz) so that index `need-1` fits; *cap tracks
 * capacity in elements. */
void np_grow(void **arr, size_t *cap, size_t need, size_t esz);
#define NP_PUSH(arr, n, cap) \
  (np_grow((void **)&(arr), &(cap), (n) + 1, sizeof(*(arr))), &(arr)[(n)++])

/* Program name used as the prefix of every message. */
extern const char *np_progname;
void np_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable byte buffer; used for SVG/protobuf output and string building. */
typedef struct np_buf {
  char *data;
  size_t len, cap;
} np_buf;
void np_buf_put(np_buf *b, const void *p, size_t n);
void np_buf_putc(np_buf *b, char c);
void np_buf_puts(np_buf *b, const char *s);
void np_buf_printf(np_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s with the five XML special characters escaped. */
void np_buf_put_xml(np_buf *b, const char *s);
void np_buf_free(np_buf *b);

/* Interns byte strings: equal keys get the same dense id (0, 1, 2, ...).
 * Keys are copied; np_intern_key(t, id) returns the stored copy (NUL
 * terminated, so string keys can be used as C strings). */
typedef struct np_intern {
  uint32_t *slots; /* id+1, 0 = empty */
  size_t nslots;
  char **keys;
  size_t *lens;
  size_t n, cap;
} np_intern;
uint32_t np_intern_bytes(np_intern *t, const void *key, size_t len);
uint32_t np_intern_str(np_intern *t, const char *s);
/* Returns id or UINT32_MAX if absent. */
uint32_t np_intern_find(const np_intern *t, const void *key, size_t len);
static inline const char *np_intern_key(const np_intern *t, uint32_t id) {
  return t->keys[id];
}
static inline size_t np_intern_len(const np_intern *t, uint32_t id) {
  return t->lens[id];
}
void np_intern_free(np_intern *t);

uint64_t np_hash(const void *p, size_t n);

/* Reads a whole file. Returns 0, or -1 with a message in err. */
int np_read_file(const char *path, char **data, size_t *len, char *err,
                 size_t errlen);

#endif
