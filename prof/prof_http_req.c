/* prof_http_req.c -- the profile server's request parser (see
 * prof_http_req.h). Strict where being lenient could be abused (obsolete
 * line folding, bare CR, control characters, conflicting lengths, any
 * Transfer-Encoding) and early: a line is checked as its bytes arrive, so
 * that a client sending garbage is refused at its first bad byte rather
 * than when the head buffer is full or the read times out. */
#include "prof_http_req.h"

#include <string.h>

/* RFC 9110 token characters (methods, header names). */
static bool ph_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static unsigned char ph_lower(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? (unsigned char)(c | 0x20) : c;
}

static bool ph_ieq(const char *s, size_t n, const char *lit) {
  if (strlen(lit) != n) return false;
  for (size_t i = 0; i < n; i++)
    if (ph_lower((unsigned char)s[i]) != (unsigned char)lit[i]) return false;
  return true;
}

/* ---- request line ------------------------------------------------------- */

/* Checks "METHOD SP /target SP HTTP/x.y" in s[0, n), which is the whole
 * line when `whole`, else the bytes received so far. 0 if fine so far,
 * else the status that refuses it. */
static int ph_check_request_line(const char *s, size_t n, bool whole,
                                 ph_req_t *r) {
  size_t i = 0;
  while (i < n && ph_tchar((unsigned char)s[i])) i++;
  if (i > 32) return 400; /* no method is that long */
  if (i == n) return whole ? 400 : 0;
  if (i == 0 || s[i] != ' ') return 400;
  size_t mlen = i++;
  size_t t0 = i;
  while (i < n && (unsigned char)s[i] > 0x20 && (unsigned char)s[i] < 0x7f) i++;
  if (i == t0 && i < n) return 400;
  if (t0 < n && s[t0] != '/') return 400; /* origin-form only */
  if (i == n) return whole ? 400 : 0;
  if (s[i] != ' ') return 400;
  size_t tlen = i - t0, v0 = ++i;
  static const char proto[] = "HTTP/";
  for (size_t k = 0; k < 5; k++, i++) {
    if (i == n) return whole ? 400 : 0;
    if (s[i] != proto[k]) return 400;
  }
  /* HTTP/digit.digit and nothing after it */
  if (i < n && !(s[i] >= '0' && s[i] <= '9')) return 400;
  if (i + 1 < n && s[i + 1] != '.') return 400;
  if (i + 2 < n && !(s[i + 2] >= '0' && s[i + 2] <= '9')) return 400;
  if (i + 3 < n) return 400;
  if (!whole) return 0;
  if (n != v0 + 8) return 400;
  if (s[i] != '1' || (s[i + 2] != '0' && s[i + 2] != '1')) return 505;
  r->http10 = s[i + 2] == '0';
  r->method = mlen == 3 && memcmp(s, "GET", 3) == 0    ? PH_GET
              : mlen == 4 && memcmp(s, "HEAD", 4) == 0 ? PH_HEAD
              : mlen == 4 && memcmp(s, "POST", 4) == 0 ? PH_POST
                                                       : PH_OTHER;
  const char *t = s + t0, *q = memchr(t, '?', tlen);
  r->path = t;
  r->path_len = q ? (size_t)(q - t) : tlen;
  r->query = q ? q + 1 : NULL;
  r->query_len = q ? tlen - r->path_len - 1 : 0;
  return 0;
}

/* ---- header lines ------------------------------------------------------- */

static int ph_content_length(const char *v, size_t n, ph_req_t *r) {
  if (n == 0 || n > 15) return 400; /* 15 digits: far above any limit */
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return 400;
    x = x * 10 + (uint64_t)(v[i] - '0');
  }
  if (r->has_length && r->content_length != x) return 400;
  r->has_length = true;
  r->content_length = x;
  return 0;
}

/* Checks "name: value" in s[0, n) (whole or so far, as above), and takes
 * note of the headers the server acts on. */
static int ph_check_header(const char *s, size_t n, bool whole, ph_req_t *r) {
  size_t i = 0;
  while (i < n && ph_tchar((unsigned char)s[i])) i++;
  if (i == n) return whole ? 400 : 0;
  if (i == 0 || s[i] != ':') return 400; /* also obs-fold: a leading SP */
  size_t nlen = i++;
  for (size_t k = i; k < n; k++) {
    unsigned char c = (unsigned char)s[k];
    if ((c < 0x20 && c != '\t') || c == 0x7f) return 400;
  }
  if (!whole) return 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  size_t e = n;
  while (e > i && (s[e - 1] == ' ' || s[e - 1] == '\t')) e--;
  const char *v = s + i;
  size_t vlen = e - i;
  if (ph_ieq(s, nlen, "content-length")) return ph_content_length(v, vlen, r);
  if (ph_ieq(s, nlen, "transfer-encoding")) return 501;
  if (ph_ieq(s, nlen, "expect") && ph_ieq(v, vlen, "100-continue"))
    r->expect_continue = true;
  return 0;
}

int ph_req_parse(const char *buf, size_t len, ph_req_t *r) {
  memset(r, 0, sizeof *r);
  r->method = PH_OTHER;
  size_t at = 0;
  for (unsigned line = 0;; line++) {
    const char *s = buf + at;
    size_t rest = len - at;
    const char *nl = memchr(s, '\n', rest);
    bool whole = nl != NULL;
    size_t n = whole ? (size_t)(nl - s) : rest;
    /* A CR is only allowed right before the LF (or last, LF to come). */
    const char *cr = memchr(s, '\r', n);
    if (cr != NULL) {
      if (cr != s + n - 1) return -400;
      n--;
    }
    int st = line == 0 ? ph_check_request_line(s, n, whole, r)
             : n == 0 && whole ? -1 /* the empty line: end of the head */
                                : ph_check_header(s, n, whole, r);
    if (st == -1) return (int)(at + (size_t)(nl - s) + 1);
    if (st != 0) return -st;
    if (!whole) return 0;
    at += (size_t)(nl - s) + 1;
  }
}

/* ---- query -------------------------------------------------------------- */

static int ph_hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)ph_lower((unsigned char)c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Percent- and '+'-decodes s[0, n) into out; false if it does not fit or
 * holds a NUL. */
static bool ph_unescape(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '+') c = ' ';
    else if (c == '%' && i + 2 < n && ph_hexval(s[i + 1]) >= 0 &&
             ph_hexval(s[i + 2]) >= 0) {
      c = (char)(ph_hexval(s[i + 1]) * 16 + ph_hexval(s[i + 2]));
      i += 2;
    }
    if (c == '\0' || o + 1 >= cap) return false;
    out[o++] = c;
  }
  out[o] = '\0';
  return true;
}

bool ph_query_get(const char *q, size_t n, const char *key, char *out,
                  size_t cap) {
  if (cap == 0) return false;
  out[0] = '\0';
  if (q == NULL) return false;
  size_t klen = strlen(key), i = 0;
  while (i <= n) {
    size_t e = i;
    while (e < n && q[e] != '&' && q[e] != ';') e++;
    const char *eq = memchr(q + i, '=', e - i);
    size_t kl = eq ? (size_t)(eq - (q + i)) : e - i;
    if (kl == klen && memcmp(q + i, key, klen) == 0) {
      if (eq && !ph_unescape(eq + 1, (size_t)(q + e - eq - 1), out, cap))
        out[0] = '\0';
      return true;
    }
    i = e + 1;
  }
  return false;
}

int ph_query_uint(const char *q, size_t n, const char *key, uint64_t max,
                  uint64_t *out) {
  char v[24];
  if (!ph_query_get(q, n, key, v, sizeof v)) return 0;
  if (v[0] == '\0') return -1;
  uint64_t x = 0;
  for (const char *c = v; *c; c++) {
    if (*c < '0' || *c > '9') return -1;
    x = x * 10 + (uint64_t)(*c - '0');
    if (x > max) return -1;
  }
  *out = x;
  return 1;
}

/* ---- symbol request body ------------------------------------------------ */

static bool ph_sep(char c) {
  return c == '+' || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int ph_sym_next(const char **p, const char *end, uint64_t *addr) {
  const char *s = *p;
  while (s < end && ph_sep(*s)) s++;
  if (s == end) {
    *p = s;
    return 0;
  }
  const char *t = s;
  while (t < end && !ph_sep(*t)) t++;
  *p = t;
  size_t n = (size_t)(t - s);
  uint64_t x = 0;
  if (n > 2 && s[0] == '0' && (s[1] | 0x20) == 'x') {
    if (n > 18) return -1;
    for (size_t i = 2; i < n; i++) {
      int d = ph_hexval(s[i]);
      if (d < 0) return -1;
      x = x << 4 | (uint64_t)d;
    }
  } else {
    if (n > 20) return -1;
    for (size_t i = 0; i < n; i++) {
      if (s[i] < '0' || s[i] > '9') return -1;
      uint64_t nx = x * 10 + (uint64_t)(s[i] - '0');
      if (nx / 10 != x) return -1; /* overflow */
      x = nx;
    }
  }
  *addr = x;
  return 1;
}
