/* np_pbenc.h -- a minimal protocol-buffers encoder: varints, length-
 * delimited fields and nested messages written into np_buf. Enough for
 * pprof's profile.proto; no reflection, no schema. */
#ifndef NP_PBENC_H
#define NP_PBENC_H

#include <stdint.h>

#include "np_util.h"

void np_pb_varint(np_buf *b, uint64_t v);
/* Field with wire type 0 (int64/uint64/bool). Zero values are skipped:
 * proto3 scalars default to 0, so omitting them is the canonical form. */
void np_pb_uint(np_buf *b, int field, uint64_t v);
void np_pb_int(np_buf *b, int field, int64_t v);
/* Field with wire type 2 (bytes, string, sub-message, packed repeated). */
void np_pb_bytes(np_buf *b, int field, const void *p, size_t n);
/* Packed repeated varints. */
void np_pb_packed_u64(np_buf *b, int field, const uint64_t *v, size_t n);
void np_pb_packed_i64(np_buf *b, int field, const int64_t *v, size_t n);

/* gzip-compresses data (the container pprof expects). Returns 0 or -1. */
int np_gzip(const void *data, size_t n, np_buf *out);

#endif
