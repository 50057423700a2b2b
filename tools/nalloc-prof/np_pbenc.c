/* np_pbenc.c -- protocol-buffers wire format and gzip. See np_pbenc.h.
 * Wire format: a field is a key varint (field << 3 | wire type) followed by
 * a varint (type 0) or a length varint and that many bytes (type 2). */
#include "np_pbenc.h"

#include <string.h>
#include <zlib.h>

void np_pb_varint(np_buf *b, uint64_t v) {
  char tmp[10];
  size_t n = 0;
  do {
    tmp[n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  np_buf_put(b, tmp, n);
}

void np_pb_uint(np_buf *b, int field, uint64_t v) {
  if (!v) return;
  np_pb_varint(b, (uint64_t)field << 3);
  np_pb_varint(b, v);
}

/* int64 is encoded as the two's complement bits (not zig-zag). */
void np_pb_int(np_buf *b, int field, int64_t v) {
  np_pb_uint(b, field, (uint64_t)v);
}

void np_pb_bytes(np_buf *b, int field, const void *p, size_t n) {
  np_pb_varint(b, (uint64_t)field << 3 | 2);
  np_pb_varint(b, n);
  np_buf_put(b, p, n);
}

void np_pb_packed_u64(np_buf *b, int field, const uint64_t *v, size_t n) {
  if (!n) return;
  np_buf tmp = {0};
  for (size_t i = 0; i < n; i++) np_pb_varint(&tmp, v[i]);
  np_pb_bytes(b, field, tmp.data, tmp.len);
  np_buf_free(&tmp);
}

void np_pb_packed_i64(np_buf *b, int field, const int64_t *v, size_t n) {
  if (!n) return;
  np_buf tmp = {0};
  for (size_t i = 0; i < n; i++) np_pb_varint(&tmp, (uint64_t)v[i]);
  np_pb_bytes(b, field, tmp.data, tmp.len);
  np_buf_free(&tmp);
}

int np_gzip(const void *data, size_t n, np_buf *out) {
  z_stream z;
  memset(&z, 0, sizeof z);
  /* windowBits 15 + 16: a gzip header and trailer instead of zlib's. */
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    return -1;
  uLong bound = deflateBound(&z, (uLong)n);
  np_grow((void **)&out->data, &out->cap, out->len + bound + 1, 1);
  z.next_in = (Bytef *)data;
  z.avail_in = (uInt)n;
  z.next_out = (Bytef *)out->data + out->len;
  z.avail_out = (uInt)bound;
  int r = deflate(&z, Z_FINISH);
  if (r != Z_STREAM_END) {
    deflateEnd(&z);
    return -1;
  }
  out->len += z.total_out;
  deflateEnd(&z);
  return 0;
}
