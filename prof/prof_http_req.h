/* prof_http_req.h -- parsing what an HTTP client sends the profile server
 * (prof_http.c): the request head, query parameters, and the address list
 * of a symbol lookup.
 *
 * Pure functions over a byte range: no allocation, no system call, no
 * global state, no other nalloc header, so that the parser can be built
 * alone into a libFuzzer target (tests/prof/http_req_fuzz.c). Every input
 * either parses or gets the HTTP status that says why not. */
#ifndef PROF_HTTP_REQ_H
#define PROF_HTTP_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PH_GET, PH_HEAD, PH_POST, PH_OTHER };

typedef struct ph_req_s {
  int method;             /* PH_* */
  const char *path;       /* request target up to '?' (points into the head) */
  size_t path_len;
  const char *query;      /* after '?', without it; NULL if none */
  size_t query_len;
  uint64_t content_length;
  bool has_length;        /* a Content-Length header was given */
  bool expect_continue;   /* Expect: 100-continue */
  bool http10;            /* HTTP/1.0 */
} ph_req_t;

/* Parses the request head at the start of buf[0, len). Returns the head's
 * length (request line and headers up to and including the empty line)
 * when it is complete, 0 when more bytes are needed, or -status for a
 * request that cannot be served: 400 malformed, 501 a Transfer-Encoding
 * other than none, 505 an HTTP version other than 1.0/1.1. Lines may end
 * in CRLF or LF. */
int ph_req_parse(const char *buf, size_t len, ph_req_t *r);

/* The value of query parameter `key` in q[0, n), percent-decoded into
 * out[0, cap) with a NUL. Returns false if the key is absent; a key given
 * twice keeps the first value; a value that does not fit (or decodes to a
 * NUL) is returned empty. */
bool ph_query_get(const char *q, size_t n, const char *key, char *out,
                  size_t cap);

/* Decimal value of a query parameter. 1: present and a number in
 * [0, max]; 0: absent; -1: present but not such a number. */
int ph_query_uint(const char *q, size_t n, const char *key, uint64_t max,
                  uint64_t *out);

/* The next address of a symbol request body ("0x7f01+0x7f02...", as Go's
 * and gperftools' pprof post it; '+' or whitespace separates, a token is
 * hex with 0x or decimal, as Go's strconv.ParseUint(s, 0, 64) reads it).
 * Advances *p. Returns 1 with *addr set, 0 at the end, -1 for a token
 * that is not a number (skipped; the caller answers the rest). */
int ph_sym_next(const char **p, const char *end, uint64_t *addr);

#endif
