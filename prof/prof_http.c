/* prof_http.c -- live profiles over HTTP, as Go's net/http/pprof serves
 * them, for `go tool pprof http://HOST:PORT/debug/pprof/heap`, curl and
 * continuous profilers, with no change to the program:
 *   NALLOC_CONF=prof:true,prof_http:127.0.0.1:6060      (or unix:/path)
 *
 *   /debug/pprof/heap     in-use profile, gzip'd pprof protobuf
 *                         (?debug=1: the text dump; ?seconds=N: the change
 *                         over N seconds; ?gc= is accepted and ignored)
 *   /debug/pprof/allocs   the same profile, alloc_space by default
 *   /debug/pprof/symbol   remote symbolization: GET "num_symbols: 1",
 *                         POST "0xa+0xb" -> "0xa name" lines
 *   /debug/pprof/cmdline  the command line, NUL-separated
 *   /debug/pprof/         an index of the above
 *   /pprof/heap, /pprof/symbol, /pprof/cmdline
 *                         gperftools' paths, for google-pprof and jeprof,
 *                         which read the text form
 *
 * Safety, since this runs inside somebody else's process:
 *   - off unless asked; loopback or a unix socket (mode 0600) unless
 *     prof_http_any:true; never in AT_SECURE (setuid) processes; fork
 *     children close the inherited socket and serve only with
 *     prof_http_fork:true (on a port of their own or PATH.<pid>);
 *   - one thread of its own, all signals blocked, blocked in accept(2)
 *     when idle: no timer, no polling, no cost;
 *   - one connection at a time; the head is at most 8 KiB and read within
 *     5 s, a body at most 4 MiB within 10 s, the answer written within
 *     60 s; a connection that has sent nothing for 1 s is dropped when
 *     another one is waiting (a browser's idle pre-connection must not
 *     block a real client); bad requests get a 4xx and the next one is
 *     served; writes use MSG_NOSIGNAL, so a client that goes away raises
 *     no SIGPIPE;
 *   - no allocation through the profiled heap (prof_http.h), and the
 *     thread runs with tsd->reentrant set, so nothing it calls is
 *     sampled. */
#define _GNU_SOURCE
#include "prof_http.h"
#include "prof_http_req.h"
#include "../alloc/helper_thread.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

char opt_prof_http[PROF_HTTP_ADDR_MAX] = "";
bool opt_prof_http_any = false;
bool opt_prof_http_fork = false;

static const conf_entry_t prof_http_conf_rows[] = {
    {"prof_http", CONF_STR, opt_prof_http, 0, 0, NULL, PROF_HTTP_ADDR_MAX,
     "serve live profiles (go tool pprof) at HOST:PORT or unix:PATH"},
    {"prof_http_any", CONF_BOOL, &opt_prof_http_any, 0, 0, NULL, 0,
     "let prof_http listen on an address other than loopback"},
    {"prof_http_fork", CONF_BOOL, &opt_prof_http_fork, 0, 0, NULL, 0,
     "fork children serve too (TCP port 0, or unix PATH.<pid>)"},
};
const conf_table_t prof_http_conf_table = {prof_http_conf_rows,
                                           ARRAY_LEN(prof_http_conf_rows)};

#define PH_HEAD_MAX 8192
#define PH_BODY_MAX ((size_t)4 << 20)
#define PH_HEAD_MS 5000
#define PH_BODY_MS 10000
#define PH_WRITE_MS 60000
#define PH_IDLE_MS 1000
#define PH_SECONDS_MAX 300
#define PH_BACKLOG 16

static int ph_listen_fd = -1;
static char ph_where[PROF_HTTP_ADDR_MAX + 16]; /* what prof.http_address says */
static char ph_unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static pid_t ph_unix_owner;

/* ---- the listening address ---------------------------------------------- */

typedef struct {
  struct sockaddr_storage sa;
  socklen_t len;
  bool loopback;
} ph_addr_t;

static bool ph_port(const char *s, uint16_t *port) {
  uint32_t v = 0;
  if (*s == '\0') return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || (v = v * 10 + (uint32_t)(*s - '0')) > 65535)
      return false;
    }
  *port = (uint16_t)v;
  return true;
}

/* HOST:PORT (IPv4, [IPv6] or localhost) or unix:PATH. Numeric hosts only:
 * resolving a name would mean NSS, which allocates and may block. */
static bool ph_parse_addr(const char *spec, ph_addr_t *a) {
  memset(a, 0, sizeof *a);
  if (strncmp(spec, "unix:", 5) == 0) {
    struct sockaddr_un *u = (struct sockaddr_un *)&a->sa;
    size_t n = strlen(spec + 5);
    if (n == 0 || n >= sizeof u->sun_path) return false;
    u->sun_family = AF_UNIX;
    memcpy(u->sun_path, spec + 5, n + 1);
    a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    a->loopback = true;
    return true;
  }
  char host[PROF_HTTP_ADDR_MAX];
  const char *colon = strrchr(spec, ':');
  if (colon == NULL || (size_t)(colon - spec) >= sizeof host) return false;
  memcpy(host, spec, (size_t)(colon - spec));
  host[colon - spec] = '\0';
  uint16_t port;
  if (!ph_port(colon + 1, &port)) return false;
  size_t hl = strlen(host);
  if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a->sa;
    host[hl - 1] = '\0';
    if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) != 1) return false;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a->len = sizeof *v6;
    const uint8_t *b = v6->sin6_addr.s6_addr;
    a->loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) ||
                  (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) && b[12] == 127);
    return true;
  }
  struct sockaddr_in *v4 = (struct sockaddr_in *)&a->sa;
  if (strcmp(host, "localhost") == 0) strcpy(host, "127.0.0.1");
  if (inet_pton(AF_INET, host, &v4->sin_addr) != 1) return false;
  v4->sin_family = AF_INET;
  v4->sin_port = htons(port);
  a->len = sizeof *v4;
  a->loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  return true;
}

/* "host:port" of a bound TCP socket, into ph_where. */
static void ph_describe(int fd, int family) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
    if (family == AF_INET6) {
      struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
      inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
      port = ntohs(v6->sin6_port);
    } else {
      struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
      inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
      port = ntohs(v4->sin_port);
    }
  }
  size_t at = 0;
  if (family == AF_INET6) ph_where[at++] = '[';
  size_t hl = strlen(host);
  memcpy(ph_where + at, host, hl);
  at += hl;
  if (family == AF_INET6) ph_where[at++] = ']';
  ph_where[at++] = ':';
  at += prof_fmt_u64(ph_where + at, port);
  ph_where[at] = '\0';
}

static void ph_unlink_atexit(void) {
  if (ph_unix_path[0] != '\0' && getpid() == ph_unix_owner)
    unlink(ph_unix_path);
}

/* A unix socket file left by a process that is gone (connect refused) may
 * be replaced; one somebody still serves may not. */
static bool ph_stale_socket(const struct sockaddr_un *u, socklen_t len) {
  struct stat st;
  if (lstat(u->sun_path, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool stale = connect(fd, (const struct sockaddr *)u, len) != 0 &&
               errno == ECONNREFUSED;
  close(fd);
  return stale && unlink(u->sun_path) == 0;
}

static int ph_bind(const ph_addr_t *a) {
  int family = a->sa.ss_family;
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  if (family != AF_UNIX)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const struct sockaddr *sa = (const struct sockaddr *)&a->sa;
  int r = bind(fd, sa, a->len);
  if (r != 0 && errno == EADDRINUSE && family == AF_UNIX &&
      ph_stale_socket((const struct sockaddr_un *)&a->sa, a->len))
    r = bind(fd, sa, a->len);
  /* Owner only, set before listen(): nobody can connect in between. */
  if (r == 0 && family == AF_UNIX)
    r = chmod(((const struct sockaddr_un *)&a->sa)->sun_path, 0600);
  if (r == 0) r = listen(fd, PH_BACKLOG);
  if (r != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* ---- I/O with deadlines ------------------------------------------------- */

typedef struct {
  int fd;
  bool head_only; /* HEAD: headers, no body */
  bool answered;
} ph_conn_t;

static int ph_ms_left(uint64_t deadline) {
  uint64_t now = nalloc_now_ns();
  if (now >= deadline) return 0;
  uint64_t ms = (deadline - now) / 1000000 + 1;
  return ms > 3600000 ? 3600000 : (int)ms;
}

/* Writes all of s[0, n) by the deadline; false if the client is gone or
 * too slow. */
static bool ph_send(int fd, const void *s, size_t n, uint64_t deadline) {
  const char *p = s;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    int ms = ph_ms_left(deadline);
    struct pollfd pf = {fd, POLLOUT, 0};
    if (ms == 0 || poll(&pf, 1, ms) <= 0 || (pf.revents & (POLLERR | POLLHUP)))
      return false;
  }
  return true;
}

static const char *ph_reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 431: return "Request Header Fields Too Large";
  case 501: return "Not Implemented";
  case 505: return "HTTP Version Not Supported";
  default: return "Internal Server Error";
  }
}

/* Status line, headers and body; the connection closes after it. `extra`
 * is more header lines, each ending in CRLF. */
static void ph_respond(ph_conn_t *c, int status, const char *type,
                       const char *extra, const void *body, size_t n) {
  if (c->answered) return;
  c->answered = true;
  char h[768];
  size_t at = 0;
#define PH_PUT(s)                                              \
  do {                                                         \
    size_t l_ = strlen(s);                                     \
    if (at + l_ < sizeof h) memcpy(h + at, s, l_), at += l_;   \
  } while (0)
  char num[24];
  PH_PUT("HTTP/1.1 ");
  num[prof_fmt_u64(num, (uint64_t)status)] = '\0';
  PH_PUT(num);
  PH_PUT(" ");
  PH_PUT(ph_reason(status));
  PH_PUT("\r\nContent-Type: ");
  PH_PUT(type);
  PH_PUT("\r\nContent-Length: ");
  num[prof_fmt_u64(num, n)] = '\0';
  PH_PUT(num);
  PH_PUT("\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n");
  if (status != 200) PH_PUT("X-Go-Pprof: 1\r\n"); /* pprof shows our text */
  if (extra) PH_PUT(extra);
  PH_PUT("\r\n");
#undef PH_PUT
  uint64_t deadline = nalloc_now_ns() + (uint64_t)PH_WRITE_MS * 1000000;
  if (ph_send(c->fd, h, at, deadline) && !c->head_only)
    ph_send(c->fd, body, n, deadline);
}

static void ph_error(ph_conn_t *c, int status, const char *msg) {
  char b[256];
  size_t n = strlen(msg);
  if (n > sizeof b - 2) n = sizeof b - 2;
  memcpy(b, msg, n);
  b[n++] = '\n';
  ph_respond(c, status, "text/plain; charset=utf-8",
             status == 405 ? "Allow: GET, HEAD, POST\r\n" : NULL, b, n);
}

/* ---- reading a request -------------------------------------------------- */

/* Reads the head into buf; returns its length, or 0 after answering (or
 * dropping) the connection. buf[len..*got) is the start of the body. */
static int ph_read_head(ph_conn_t *c, char *buf, size_t *got, ph_req_t *r) {
  uint64_t t0 = nalloc_now_ns();
  uint64_t deadline = t0 + (uint64_t)PH_HEAD_MS * 1000000;
  uint64_t idle_at = t0 + (uint64_t)PH_IDLE_MS * 1000000;
  size_t len = 0;
  for (;;) {
    int ms = ph_ms_left(deadline);
    if (ms == 0) {
      if (len > 0) ph_error(c, 408, "request head not received in time");
      return 0;
    }
    struct pollfd pf[2] = {{c->fd, POLLIN, 0}, {ph_listen_fd, POLLIN, 0}};
    nfds_t npf = 1;
    if (len == 0) { /* silent so far: drop it if others wait after 1 s */
      int idle_ms = ph_ms_left(idle_at);
      if (idle_ms > 0 && idle_ms < ms) ms = idle_ms;
      else if (idle_ms == 0 && ph_listen_fd >= 0) npf = 2;
    }
    int pr = poll(pf, npf, ms);
    if (pr < 0 && errno != EINTR) return 0;
    if (pr <= 0) continue;
    if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (npf == 2 && (pf[1].revents & POLLIN)) return 0;
      continue;
    }
    ssize_t n = recv(c->fd, buf + len, PH_HEAD_MAX - len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return 0; /* closed or reset: nobody to answer */
    len += (size_t)n;
    int h = ph_req_parse(buf, len, r);
    if (h < 0) {
      ph_error(c, -h, -h == 501 ? "Transfer-Encoding is not supported"
                      : -h == 505 ? "HTTP/1.0 or HTTP/1.1 only"
                                  : "malformed request");
      return 0;
    }
    if (h > 0) {
      *got = len;
      return h;
    }
    if (len == PH_HEAD_MAX) {
      ph_error(c, 431, "request head larger than 8 KiB");
      return 0;
    }
  }
}

/* The body of a POST (at most PH_BODY_MAX), `have` bytes of it already
 * read with the head. False after answering. */
static bool ph_read_body(ph_conn_t *c, const ph_req_t *r, const char *have,
                         size_t nhave, ph_buf_t *body) {
  if (!r->has_length) {
    ph_error(c, 411, "POST needs a Content-Length");
    return false;
  }
  if (r->content_length > PH_BODY_MAX) {
    ph_error(c, 413, "request body larger than 4 MiB");
    return false;
  }
  size_t want = (size_t)r->content_length;
  if (nhave > want) nhave = want;
  if (!ph_buf_reserve(body, want + 1)) {
    ph_error(c, 500, "out of memory");
    return false;
  }
  ph_buf_put(body, have, nhave);
  uint64_t deadline = nalloc_now_ns() + (uint64_t)PH_BODY_MS * 1000000;
  if (body->len < want && r->expect_continue && !r->http10) {
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!ph_send(c->fd, cont, sizeof cont - 1, deadline)) return false;
  }
  while (body->len < want) {
    int ms = ph_ms_left(deadline);
    struct pollfd pf = {c->fd, POLLIN, 0};
    if (ms == 0) {
      ph_error(c, 408, "request body not received in time");
      return false;
    }
    if (poll(&pf, 1, ms) <= 0) continue;
    ssize_t n = recv(c->fd, body->p + body->len, want - body->len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return false;
    body->len += (size_t)n;
  }
  return true;
}

/* ---- handlers ----------------------------------------------------------- */

/* A dump of the profile now, in a memfd mapped for reading. */
typedef struct {
  int fd;
  char *p;
  size_t n;
} ph_dump_t;

static void ph_dump_close(ph_dump_t *d) {
  if (d->p != NULL && d->n > 0) munmap(d->p, d->n);
  if (d->fd >= 0) close(d->fd);
  d->fd = -1;
  d->p = NULL;
}

static bool ph_dump(ph_dump_t *d) {
  d->p = NULL;
  d->n = 0;
  d->fd = memfd_create("nalloc-prof-http", MFD_CLOEXEC);
  if (d->fd < 0) return false;
  struct stat st;
  if (prof_dump_fd(d->fd) != 0 || fstat(d->fd, &st) != 0 || st.st_size <= 0) {
    ph_dump_close(d);
    return false;
  }
  d->n = (size_t)st.st_size;
  void *p = mmap(NULL, d->n, PROT_READ, MAP_SHARED, d->fd, 0);
  if (p == MAP_FAILED) {
    d->n = 0;
    ph_dump_close(d);
    return false;
  }
  d->p = p;
  return true;
}

static uint64_t ph_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Waits `secs` seconds, or less if the client hangs up (then false). */
static bool ph_wait_seconds(int fd, uint64_t secs) {
  uint64_t deadline = nalloc_now_ns() + secs * 1000000000u;
  for (;;) {
    int ms = ph_ms_left(deadline);
    if (ms == 0) return true;
    struct pollfd pf = {fd, POLLRDHUP, 0};
    if (poll(&pf, 1, ms) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
      return false;
  }
}

enum { R_HEAP, R_ALLOCS, R_SYMBOL, R_CMDLINE, R_INDEX, R_TEXTHEAP, R_PCMDLINE };

static void ph_profile(ph_conn_t *c, const ph_req_t *r, int route) {
  uint64_t debug = 0, secs = 0;
  int hd = ph_query_uint(r->query, r->query_len, "debug", 1000, &debug);
  int hs = ph_query_uint(r->query, r->query_len, "seconds", PH_SECONDS_MAX, &secs);
  if (hd < 0) {
    ph_error(c, 400, "invalid value for \"debug\"");
    return;
  }
  if (hs < 0 || (hs > 0 && secs == 0)) {
    ph_error(c, 400, "invalid value for \"seconds\" - must be an "
                     "integer from 1 to 300");
    return;
  }
  if (hs > 0 && (debug != 0 || route == R_TEXTHEAP)) {
    ph_error(c, 400, "seconds and debug params are incompatible");
    return;
  }
  if (route == R_TEXTHEAP) debug = 1;
  uint64_t t0 = ph_realtime_ns();
  ph_dump_t a = {-1, NULL, 0}, b = {-1, NULL, 0};
  if (!ph_dump(&a)) {
    ph_error(c, 500, "could not take a profile");
    return;
  }
  if (debug != 0) {
    ph_respond(c, 200, "text/plain; charset=utf-8", NULL, a.p, a.n);
    ph_dump_close(&a);
    return;
  }
  ph_prof_t *p = ph_prof_new();
  ph_buf_t out = {0};
  bool ok = p != NULL;
  if (ok && hs > 0) {
    if (!ph_wait_seconds(c->fd, secs)) { /* client gone */
      c->answered = true;
      ok = false;
    } else {
      ok = ph_dump(&b) && ph_prof_add(p, b.p, b.n, 1) &&
           ph_prof_add(p, a.p, a.n, -1);
    }
  } else if (ok) {
    ok = ph_prof_add(p, a.p, a.n, 1);
  }
  ph_dump_close(&a);
  ph_dump_close(&b);
  const char *type = route == R_ALLOCS ? "alloc_space" : "inuse_space";
  if (ok)
    ok = ph_prof_write(p, type, t0, hs > 0 ? ph_realtime_ns() - t0 : 0, &out);
  if (ok) {
    ph_respond(c, 200, "application/octet-stream",
               route == R_ALLOCS
                   ? "Content-Disposition: attachment; filename=\"allocs\"\r\n"
                   : "Content-Disposition: attachment; filename=\"heap\"\r\n",
               out.p, out.len);
  } else {
    ph_error(c, 500, "could not build the profile");
  }
  ph_buf_free(&out);
  ph_prof_free(p);
}

static void ph_symbol(ph_conn_t *c, const ph_req_t *r, const ph_buf_t *body) {
  ph_buf_t out = {0};
  ph_buf_str(&out, "num_symbols: 1\n");
  const char *s = r->method == PH_POST ? body->p : r->query;
  const char *end = s ? s + (r->method == PH_POST ? body->len : r->query_len) : s;
  ph_syms_t *syms = s != NULL && s < end ? ph_syms_new() : NULL;
  uint64_t addr;
  int k;
  while (syms != NULL && (k = ph_sym_next(&s, end, &addr)) != 0) {
    size_t n = 0;
    const char *name = k > 0 ? ph_syms_lookup(syms, addr, &n) : NULL;
    if (name == NULL) continue;
    ph_buf_hex(&out, addr);
    ph_buf_str(&out, " ");
    ph_buf_put(&out, name, n);
    ph_buf_str(&out, "\n");
  }
  ph_syms_free(syms);
  if (out.err) ph_error(c, 500, "out of memory");
  else ph_respond(c, 200, "text/plain; charset=utf-8", NULL, out.p, out.len);
  ph_buf_free(&out);
}

/* /proc/self/cmdline with its NULs kept (Go) or made newlines
 * (gperftools: the program name on the first line). */
static void ph_cmdline(ph_conn_t *c, bool lines) {
  ph_buf_t out = {0};
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && ph_buf_reserve(&out, 4096)) {
    ssize_t n = read(fd, out.p + out.len, out.cap - out.len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.len += (size_t)n;
  }
  if (fd >= 0) close(fd);
  if (out.len > 0 && out.p[out.len - 1] == '\0') out.len--;
  for (size_t i = 0; lines && i < out.len; i++)
    if (out.p[i] == '\0') out.p[i] = '\n';
  if (lines) ph_buf_str(&out, "\n");
  ph_respond(c, 200, "text/plain; charset=utf-8", NULL, out.p, out.len);
  ph_buf_free(&out);
}

static void ph_index(ph_conn_t *c) {
  static const char page[] =
      "<html><head><title>/debug/pprof/</title></head><body>\n"
      "<p>nalloc heap profiles (go tool pprof http://HOST:PORT/debug/pprof/heap)</p>\n"
      "<ul>\n"
      "<li><a href=\"heap?debug=1\">heap</a>: memory in use, by stack "
      "(<a href=\"heap\">protobuf</a>)</li>\n"
      "<li><a href=\"allocs?debug=1\">allocs</a>: memory allocated since "
      "start, by stack (<a href=\"allocs\">protobuf</a>)</li>\n"
      "<li><a href=\"cmdline\">cmdline</a>: the command line</li>\n"
      "<li>symbol: remote symbolization (POST 0xaddr+0xaddr...)</li>\n"
      "</ul>\n</body></html>\n";
  ph_respond(c, 200, "text/html; charset=utf-8", NULL, page, sizeof page - 1);
}

static const struct {
  const char *path;
  int route;
} ph_routes[] = {
    {"/debug/pprof/heap", R_HEAP},       {"/debug/pprof/allocs", R_ALLOCS},
    {"/debug/pprof/symbol", R_SYMBOL},   {"/debug/pprof/cmdline", R_CMDLINE},
    {"/debug/pprof/", R_INDEX},          {"/debug/pprof", R_INDEX},
    {"/pprof/heap", R_TEXTHEAP},         {"/pprof/symbol", R_SYMBOL},
    {"/pprof/cmdline", R_PCMDLINE},
};

static void ph_route(ph_conn_t *c, const ph_req_t *r, const ph_buf_t *body) {
  int route = -1;
  for (size_t i = 0; i < sizeof ph_routes / sizeof *ph_routes; i++)
    if (strlen(ph_routes[i].path) == r->path_len &&
        memcmp(ph_routes[i].path, r->path, r->path_len) == 0)
      route = ph_routes[i].route;
  if (route < 0) {
    ph_error(c, 404, "unknown profile");
    return;
  }
  if (r->method == PH_OTHER || (r->method == PH_POST && route != R_SYMBOL)) {
    ph_error(c, 405, "method not allowed");
    return;
  }
  switch (route) {
  case R_SYMBOL:
    ph_symbol(c, r, body);
    return;
  case R_CMDLINE:
    ph_cmdline(c, false);
    return;
  case R_PCMDLINE:
    ph_cmdline(c, true);
    return;
  case R_INDEX:
    ph_index(c);
    return;
  default:
    ph_profile(c, r, route);
    return;
  }
}

/* Closes the way a browser-safe server does: FIN first, then whatever the
 * client still sends is read and dropped for a moment, so that unread
 * request bytes do not turn the close into a reset that loses the
 * answer. */
static void ph_close(int fd) {
  shutdown(fd, SHUT_WR);
  uint64_t deadline = nalloc_now_ns() + 200 * 1000000u;
  char sink[4096];
  for (size_t total = 0; total < 65536;) {
    int ms = ph_ms_left(deadline);
    struct pollfd pf = {fd, POLLIN, 0};
    if (ms == 0 || poll(&pf, 1, ms) <= 0) break;
    ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n <= 0) break;
    total += (size_t)n;
  }
  close(fd);
}

static void ph_serve(int fd) {
  NALLOC_BIG_BSS static char head[PH_HEAD_MAX];
  ph_conn_t c = {fd, false, false};
  ph_req_t r;
  size_t got = 0;
  int h = ph_read_head(&c, head, &got, &r);
  if (h > 0) {
    c.head_only = r.method == PH_HEAD;
    ph_buf_t body = {0};
    if (r.method != PH_POST ||
        ph_read_body(&c, &r, head + h, got - (size_t)h, &body))
      ph_route(&c, &r, &body);
    ph_buf_free(&body);
  }
  ph_close(fd);
}

/* ---- the thread --------------------------------------------------------- */

static void *ph_main(void *arg) {
  (void)arg;
  tsd_get()->reentrant++; /* nothing this thread does is sampled */
  pthread_setname_np(pthread_self(), "nalloc-http");
  for (;;) {
    int fd = accept4(ph_listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      ph_serve(fd);
      continue;
    }
    if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) break;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
        errno == ENOMEM) { /* out of descriptors: do not spin */
      struct timespec ts = {0, 100 * 1000000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

/* Binds and starts the thread. A fork child (`child`) serves on a port of
 * its own (port 0) or at PATH.<pid>. */
static void ph_start_unsampled(bool child) {
  ph_addr_t a;
  if (!ph_parse_addr(opt_prof_http, &a)) {
    nalloc_log("prof_http: bad address \"%s\": expected HOST:PORT (numeric "
               "IPv4, [IPv6] or localhost) or unix:PATH; not serving",
               opt_prof_http);
    return;
  }
  if (!a.loopback && !opt_prof_http_any) {
    nalloc_log("prof_http: %s is not a loopback address; set "
               "prof_http_any:true to serve it; not serving", opt_prof_http);
    return;
  }
  int family = a.sa.ss_family;
  pid_t pid = getpid();
  if (child && family == AF_UNIX) {
    struct sockaddr_un *u = (struct sockaddr_un *)&a.sa;
    size_t n = strlen(u->sun_path);
    char num[24];
    size_t k = prof_fmt_u64(num, (uint64_t)pid);
    if (n + 1 + k >= sizeof u->sun_path) {
      nalloc_log("prof_http: %s.%d is too long for a unix socket", u->sun_path,
                 (int)pid);
      return;
    }
    u->sun_path[n] = '.';
    memcpy(u->sun_path + n + 1, num, k);
    u->sun_path[n + 1 + k] = '\0';
    a.len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + k + 2);
  } else if (child) {
    if (family == AF_INET6) ((struct sockaddr_in6 *)&a.sa)->sin6_port = 0;
    else ((struct sockaddr_in *)&a.sa)->sin_port = 0;
  }
  int fd = ph_bind(&a);
  if (fd < 0) {
    const char *en = strerrorname_np(errno);
    nalloc_log("prof_http: cannot listen on %s: %s; not serving", opt_prof_http,
               en ? en : "?");
    return;
  }
  static bool atexit_set;
  if (family == AF_UNIX) {
    const char *path = ((struct sockaddr_un *)&a.sa)->sun_path;
    memcpy(ph_unix_path, path, strlen(path) + 1);
    ph_unix_owner = pid;
    memcpy(ph_where, "unix:", 5);
    memcpy(ph_where + 5, path, strlen(path) + 1);
    if (!atexit_set) atexit(ph_unlink_atexit);
    atexit_set = true;
  } else {
    ph_describe(fd, family);
  }
  ph_listen_fd = fd;
  int err = helper_thread_start(ph_main, (size_t)256 << 10);
  if (err != 0) {
    nalloc_log("prof_http: no server thread (errno %d); not serving", err);
    close(fd);
    ph_listen_fd = -1;
    ph_where[0] = '\0';
    return;
  }
  if (family == AF_UNIX)
    nalloc_log("prof_http: serving %s (pid %d)", ph_where, (int)pid);
  else
    nalloc_log("prof_http: serving http://%s/debug/pprof/ (pid %d)", ph_where,
               (int)pid);
}

/* What starting allocates (the thread's TLS, an atexit entry) is not the
 * program's: the calling thread does not sample meanwhile. */
static void ph_start(bool child) {
  tsd_t *tsd = tsd_get();
  tsd->reentrant++;
  ph_start_unsampled(child);
  tsd->reentrant--;
}

void prof_http_boot(void) {
  if (opt_prof_http[0] == '\0') return;
  if (getauxval(AT_SECURE)) return; /* setuid/setgid: never */
  if (!opt_prof) {
    nalloc_log("prof_http needs prof:true; not serving");
    return;
  }
  ph_start(false);
}

/* The child of fork() has no server thread. It must not keep the parent's
 * socket either: were the parent to exit first, connections would queue
 * on it with nobody to accept them. The descriptor was set once, before
 * any fork could race with it. A connection the parent was serving stays
 * open in the child until exec or exit, harmlessly: the parent shuts it
 * down when done, which the client sees whatever copies exist. */
void prof_http_postfork_child(void) {
  if (ph_listen_fd < 0) return;
  close(ph_listen_fd);
  ph_listen_fd = -1;
  ph_where[0] = '\0';
  ph_unix_path[0] = '\0';
  if (opt_prof_http_fork && opt_prof) ph_start(true);
}

static const ctl_row_t prof_http_ctl_rows[] = {
    {"prof.http_address", CTL_STR, CTL_RO, CTL_PROF, .v.s = ph_where},
};
const ctl_table_t prof_http_ctl_table = {prof_http_ctl_rows,
                                         ARRAY_LEN(prof_http_ctl_rows)};
