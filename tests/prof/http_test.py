#!/usr/bin/env python3
"""http_test.py PROG WORKDIR CASE -- prof_http (live profiles over HTTP)
checked with real clients: go tool pprof, curl, google-pprof, and raw
sockets for hostile input. PROG is http_prog (see its header comment).
Exit 0 pass, 77 skipped (a client is not installed), 1 fail.

Cases:
  go       go tool pprof on /debug/pprof/heap and /allocs names the
           program's functions through /debug/pprof/symbol (remote only)
           and agrees with a prof.dump file taken at the same moment, in
           every sample type; still so after the binary is deleted
  symbol   /debug/pprof/symbol against the program's own function addresses
  curl     the text form equals the dump's records; gzip -d reads the
           protobuf; HEAD; POST through curl (Expect: 100-continue); the
           server adds nothing to the profile
  gperf    google-pprof and jeprof on /pprof/heap (gperftools' paths)
  delta    ?seconds=N gives exactly what was allocated meanwhile
  sampled  a sampled profile over HTTP matches the dump within rounding
  hostile  garbage, huge heads and bodies, bad methods and parameters,
           slow and silent clients, many connections, clients that vanish:
           each gets its 4xx or is dropped, and the process serves on
  unix     prof_http:unix:PATH (mode 0600, stale file replaced, removed at
           exit)
  conf     refused addresses and errors are one line and the program runs
  fork     children close the parent's socket; prof_http_fork:true gives
           them a server of their own
  views    issue 14's views in the protobuf: with numa_nodes:4 the samples
           carry a numa_node label, and each node's figures equal the
           dump's '#nalloc node' lines and what the program put there
           (thread.arena); temporary_objects (exact mode) and
           lifetime_objects with lifetime labels (sampled) equal the
           dump's '#nalloc temporary' and '#nalloc lifetime' lines
"""
import os
import re
import select
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time

PROG, WORK, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
SKIP = 77


def fail(msg):
    print("FAIL [%s]: %s" % (CASE, msg), file=sys.stderr)
    sys.exit(1)


def skip(msg):
    print("SKIP [%s]: %s" % (CASE, msg))
    sys.exit(SKIP)


def check(cond, msg):
    if not cond:
        fail(msg)


class Prog:
    """http_prog under NALLOC_CONF=conf, driven through stdin/stdout."""

    def __init__(self, conf, exe=PROG, wait_serving=True):
        self.err_path = os.path.join(WORK, "prog.%d.err" % time.monotonic_ns())
        self.err = open(self.err_path, "w")
        env = dict(os.environ, NALLOC_CONF=conf)
        self.p = subprocess.Popen([exe], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err,
                                  env=env, cwd=WORK, bufsize=0)
        self.buf = b""
        check(self.line(30) == "ready", "program did not start: " + self.stderr())
        self.addr = None
        if wait_serving:
            m = re.search(r"prof_http: serving (\S+)", self.stderr())
            check(m is not None, "no 'serving' line: " + self.stderr())
            self.addr = m.group(1)
            m = re.match(r"http://([^/]+)/", self.addr)
            self.hostport = m.group(1) if m else None

    def stderr(self):
        self.err.flush()
        with open(self.err_path) as f:
            return f.read()

    def line(self, timeout=30):
        # Our own buffer: the child of "fork" and its parent may both
        # have written by the time we read, and a select() on the pipe
        # cannot see lines a buffered reader already holds.
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.p.stdout], [], [], max(left, 0))
            if not r:
                fail("program did not answer in %ds" % timeout)
            data = os.read(self.p.stdout.fileno(), 4096)
            if not data:
                fail("program closed its output: " + self.stderr())
            self.buf += data
        l, _, self.buf = self.buf.partition(b"\n")
        return l.decode().strip()

    def cmd(self, c, timeout=30):
        self.p.stdin.write((c + "\n").encode())
        self.p.stdin.flush()
        return self.line(timeout)

    def url(self, path):
        return "http://%s%s" % (self.hostport, path)

    def alive(self):
        return self.p.poll() is None

    def quit(self):
        if self.alive():
            try:
                self.p.stdin.write(b"quit\n")
                self.p.stdin.flush()
            except BrokenPipeError:
                pass
        rc = self.p.wait(30)
        self.err.close()
        return rc


def run(args, timeout=120, env=None, ok=True):
    e = dict(os.environ, HOME=WORK, GOCACHE=os.path.join(WORK, "gocache"),
             PPROF_TMPDIR=WORK)
    if env:
        e.update(env)
    r = subprocess.run(args, capture_output=True, timeout=timeout, env=e, cwd=WORK)
    if ok and r.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(args), r.returncode,
                                   r.stderr.decode(errors="replace")[-2000:]))
    return r


def need(tool):
    path = shutil.which(tool)
    if path is None:
        skip("%s not installed" % tool)
    return path


# ---- raw HTTP -------------------------------------------------------------

def request(hostport, data, timeout=15, read=True):
    """Sends raw bytes, returns (status, headers, body) or None if the
    server closed without an answer."""
    host, port = hostport.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        if data:
            s.sendall(data)
        if not read:
            return None
        buf = b""
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            buf += b
    finally:
        s.close()
    return parse_response(buf)


def parse_response(buf):
    if not buf:
        return None
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    m = re.match(r"HTTP/1\.1 (\d{3}) ", lines[0])
    check(m is not None, "bad status line %r" % lines[0])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if "content-length" in hdrs:
        check(len(body) == int(hdrs["content-length"]),
              "body %d bytes, Content-Length %s" % (len(body), hdrs["content-length"]))
    return int(m.group(1)), hdrs, body


def get(hostport, path, method="GET"):
    return request(hostport, ("%s %s HTTP/1.1\r\nHost: x\r\n\r\n" % (method, path)).encode())


# ---- reading profiles with go tool pprof ---------------------------------

def pprof_top(go, src, index, extra=()):
    """{function: (flat, cum)} and the total from go tool pprof -top."""
    r = run([go, "tool", "pprof", "-top", "-nodecount=1000", "-nodefraction=0",
             "-unit=B" if "space" in index else "-unit=count",
             "-sample_index=" + index] + list(extra) + [src])
    out = r.stdout.decode()
    rows, total = {}, None
    for l in out.splitlines():
        m = re.search(r"accounting for \S+, \S+ of (\S+) total", l)
        if m:
            total = m.group(1)
        f = l.split()
        if len(f) >= 6 and re.match(r"^-?[0-9.]+B?$", f[0]) and f[1].endswith("%"):
            rows[" ".join(f[5:])] = (f[0], f[3])
    check(total is not None, "no total in:\n" + out)
    return rows, total, out


def named(rows):
    """Rows of functions with a name (not [lib.so] placeholders)."""
    return {k: v for k, v in rows.items() if not k.startswith("[")}


# ---- cases ------------------------------------------------------------------

EXACT = "prof:true,lg_prof_sample:0,prof_http:127.0.0.1:0"


def case_go():
    go = need("go")
    exe = os.path.join(WORK, "http_prog_copy")
    shutil.copy(PROG, exe)
    p = Prog(EXACT, exe=exe)
    check(p.cmd("dump %s/now.heap" % WORK) == "ok", "prof.dump failed")
    for index in ("inuse_space", "inuse_objects", "alloc_space", "alloc_objects"):
        for ep in ("heap", "allocs"):
            rows, total, out = pprof_top(go, p.url("/debug/pprof/" + ep), index,
                                         ["-symbolize=remote"])
            frows, ftotal, fout = pprof_top(go, "now.heap", index)
            check(total == ftotal, "%s %s: total %s over HTTP, %s in the dump"
                  % (ep, index, total, ftotal))
            for fn in ("make_node", "build_list", "main", "churn"):
                if fn in named(frows) or fn in rows:
                    check(rows.get(fn) == frows.get(fn),
                          "%s %s: %s %s over HTTP, %s in the dump\n%s\n%s" %
                          (ep, index, fn, rows.get(fn), frows.get(fn), out, fout))
            # Every function the dump names locally, remote symbolization
            # names with the same numbers (C functions: same names).
            for fn, v in named(frows).items():
                if fn in rows:
                    check(rows[fn] == v, "%s %s: %s %s vs %s" % (ep, index, fn, rows[fn], v))
    rows, _, out = pprof_top(go, p.url("/debug/pprof/heap"), "inuse_space",
                             ["-symbolize=remote"])
    check(rows.get("make_node") == ("6400B", "6400B"), "make_node:\n" + out)
    check(rows.get("build_list") == ("0", "6400B"), "build_list:\n" + out)
    rows, _, out = pprof_top(go, p.url("/debug/pprof/allocs"), "alloc_space",
                             ["-symbolize=remote"])
    check(rows.get("churn") == ("20000B", "20000B"), "churn:\n" + out)
    # The default sample type follows the endpoint, as in Go.
    r = run([go, "tool", "pprof", "-top", "-symbolize=remote", p.url("/debug/pprof/allocs")])
    check("Type: alloc_space" in r.stdout.decode(), "allocs default type")
    r = run([go, "tool", "pprof", "-top", "-symbolize=remote", p.url("/debug/pprof/heap")])
    check("Type: inuse_space" in r.stdout.decode(), "heap default type")
    # Without the binary on disk, pprof's default (local, then remote)
    # still names the program's functions: only the server can.
    os.unlink(exe)
    rows, _, out = pprof_top(go, p.url("/debug/pprof/heap"), "inuse_space")
    check(rows.get("make_node") == ("6400B", "6400B"), "binary deleted:\n" + out)
    check(p.quit() == 0, "program exit status")


def case_symbol():
    p = Prog(EXACT)
    a = dict(kv.split("=") for kv in p.cmd("addrs").split())
    # Addresses inside each function (entry + 1: how pprof asks for a
    # return address - 1), decimal and hex, in one POST and in a GET.
    q = "+".join("0x%x" % (int(v, 16) + 1) for v in a.values())
    q += "+%d+0x1+garbage+0x" % (int(a["churn"], 16) + 2)
    for resp in (request(p.hostport, ("POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s"
                                      % (len(q), q)).encode()),
                 get(p.hostport, "/debug/pprof/symbol?" + q)):
        st, _, body = resp
        check(st == 200, "symbol status %d" % st)
        lines = body.decode().splitlines()
        check(lines[0] == "num_symbols: 1", "first line %r" % lines[0])
        got = {}
        for l in lines[1:]:
            addr, name = l.split(" ", 1)
            got[int(addr, 16)] = name
        for fn, v in a.items():
            check(got.get(int(v, 16) + 1) == fn, "%s: %r" % (fn, got))
        check(got.get(int(a["churn"], 16) + 2) == "churn", "decimal address")
        check(1 not in got, "0x1 has no symbol")
    st, _, body = get(p.hostport, "/debug/pprof/symbol")
    check(st == 200 and body == b"num_symbols: 1\n", "GET symbol: %r" % body)
    check(p.quit() == 0, "exit status")


def records(text):
    """The record lines of a text dump (before MAPPED_LIBRARIES)."""
    return text.split("\nMAPPED_LIBRARIES:")[0]


def case_curl():
    curl = need("curl")
    p = Prog(EXACT)
    check(p.cmd("dump %s/now.heap" % WORK) == "ok", "prof.dump failed")
    r = run([curl, "-sSf", p.url("/debug/pprof/heap?debug=1")])
    text = r.stdout.decode()
    with open(os.path.join(WORK, "now.heap")) as f:
        dump = f.read()
    check(records(text) == records(dump), "text form differs from the dump:\n%s\n---\n%s"
          % (records(text)[:2000], records(dump)[:2000]))
    check("\nMAPPED_LIBRARIES:\n" in text and "http_prog" in text, "no mappings")
    r = run([curl, "-sSf", p.url("/pprof/heap")])
    check(records(r.stdout.decode()) == records(dump), "/pprof/heap differs")
    # The protobuf is a gzip stream gzip -d reads.
    r = run([curl, "-sSf", "-o", "heap.pb.gz", "-D", "h.txt", p.url("/debug/pprof/heap")])
    hdr = open(os.path.join(WORK, "h.txt")).read().lower()
    check("content-type: application/octet-stream" in hdr, "content type:\n" + hdr)
    check('filename="heap"' in hdr, "content disposition:\n" + hdr)
    r = run(["gzip", "-dc", "heap.pb.gz"])
    check(len(r.stdout) > 100, "gzip -d gave %d bytes" % len(r.stdout))
    r = run(["gzip", "-t", "heap.pb.gz"])
    # HEAD: the headers only.
    r = run([curl, "-sSf", "-I", p.url("/debug/pprof/heap?debug=1")])
    check(re.search(r"content-length: [1-9]", r.stdout.decode().lower()), "HEAD")
    # A POST larger than 1 KiB: curl sends Expect: 100-continue.
    a = dict(kv.split("=") for kv in p.cmd("addrs").split())
    body = "+".join(["0x%x" % (int(a["make_node"], 16) + 1)] * 300)
    with open(os.path.join(WORK, "addrs.txt"), "w") as f:
        f.write(body)
    t0 = time.monotonic()
    r = run([curl, "-sSf", "--data-binary", "@addrs.txt", p.url("/debug/pprof/symbol")])
    out = r.stdout.decode().splitlines()
    check(out[0] == "num_symbols: 1" and len(out) == 301 and
          all(l.endswith(" make_node") for l in out[1:]), "POST symbol: %r" % out[:3])
    check(time.monotonic() - t0 < 0.9, "100-continue not answered (curl waited)")
    # Serving adds nothing to the profile: the same program without the
    # server holds exactly the same at the same point.
    q = Prog("prof:true,lg_prof_sample:0", wait_serving=False)
    check(q.cmd("dump %s/plain.heap" % WORK) == "ok", "prof.dump without the server")
    check(q.quit() == 0, "program without the server")
    with open(os.path.join(WORK, "plain.heap")) as f:
        plain = f.readline()
    check(plain == dump.split("\n")[0] + "\n", "with the server %r, without %r"
          % (dump.split("\n")[0], plain))
    r = run([curl, "-sSf", p.url("/debug/pprof/cmdline")])
    check(r.stdout.decode().split("\0")[0] == PROG, "cmdline: %r" % r.stdout)
    r = run([curl, "-sSf", p.url("/debug/pprof/")])
    check("heap" in r.stdout.decode(), "index page")
    check(p.quit() == 0, "exit status")


def case_gperf():
    p = Prog(EXACT)
    ran = 0
    for tool in ("google-pprof", "jeprof"):
        path = shutil.which(tool)
        if path is None:
            continue
        r = run([path, "--text", "--show_bytes", p.url("/pprof/heap")], timeout=120)
        rows = {l.split()[-1]: int(l.split()[0]) for l in r.stdout.decode().splitlines()
                if re.match(r"^\s*\d+\s", l)}
        check(rows.get("make_node") == 6400, "%s: make_node %s\n%s" %
              (tool, rows.get("make_node"), r.stdout.decode()))
        ran += 1
    p.quit()
    if ran == 0:
        skip("neither google-pprof nor jeprof is installed")


def case_delta():
    go = need("go")
    curl = need("curl")
    p = Prog(EXACT)
    res = {}

    def fetch():
        res["r"] = run([curl, "-sSf", "-o", "delta.pb.gz",
                        p.url("/debug/pprof/heap?seconds=3")], timeout=60)
    t = threading.Thread(target=fetch)
    t0 = time.monotonic()
    t.start()
    time.sleep(1)
    check(p.cmd("alloc 10") == "ok", "alloc")
    t.join()
    took = time.monotonic() - t0
    check(2.9 < took < 10, "seconds=3 took %.1f s" % took)
    for index, want in (("inuse_space", "40960B"), ("alloc_space", "40960B"),
                        ("alloc_objects", "10")):
        rows, total, out = pprof_top(go, "delta.pb.gz", index)
        check(rows.get("delta_alloc", ("", ""))[0] == want,
              "%s: delta_alloc %s\n%s" % (index, rows.get("delta_alloc"), out))
        check("make_node" not in rows, "unchanged make_node in the delta:\n" + out)
    r = run([go, "tool", "pprof", "-raw", "delta.pb.gz"])
    check(re.search(r"Duration: 3\.\d+s|Duration: 3s", r.stdout.decode()) or
          "Duration: 3" in r.stdout.decode(), "duration:\n" + r.stdout.decode()[:500])
    # A client that hangs up during the wait ends it early.
    t0 = time.monotonic()
    request(p.hostport, b"GET /debug/pprof/heap?seconds=30 HTTP/1.1\r\n\r\n", read=False)
    st, _, _ = get(p.hostport, "/debug/pprof/cmdline")
    check(st == 200 and time.monotonic() - t0 < 5, "hang-up during seconds=30 not noticed")
    check(p.quit() == 0, "exit status")


def case_sampled():
    go = need("go")
    p = Prog("prof:true,lg_prof_sample:10,prof_http:127.0.0.1:0")
    check(p.cmd("alloc 500") == "ok", "alloc")
    check(p.cmd("dump %s/now.heap" % WORK) == "ok", "dump")
    for index in ("inuse_space", "alloc_objects"):
        rows, total, out = pprof_top(go, p.url("/debug/pprof/heap"), index,
                                     ["-symbolize=remote"])
        frows, ftotal, fout = pprof_top(go, "now.heap", index)
        # Go truncates each scaled sample read from text; we round once.
        for fn in ("delta_alloc", "make_node"):
            a = float(rows[fn][0].rstrip("B")) if fn in rows else 0
            b = float(frows[fn][0].rstrip("B")) if fn in frows else 0
            check(abs(a - b) <= max(2, 0.001 * b), "%s %s: %s vs %s\n%s\n%s"
                  % (index, fn, a, b, out, fout))
    check(p.quit() == 0, "exit status")


def expect_status(hp, data, want, what):
    r = request(hp, data)
    check(r is not None and r[0] == want, "%s: want %d, got %s" % (what, want, r and r[0]))
    if want >= 400:
        check(r[1].get("x-go-pprof") == "1", "%s: no X-Go-Pprof header" % what)


def case_hostile():
    p = Prog(EXACT)
    hp = p.hostport
    bad = [
        (b"\x00\x01\x02\x03\xff\xfe garbage\r\n\r\n", 400, "binary garbage"),
        (b"hello\r\n\r\n", 400, "no target"),
        (b"GET debug/pprof/heap HTTP/1.1\r\n\r\n", 400, "relative target"),
        (b"GET /debug/pprof/heap HTTP/1.1\rX\r\n\r\n", 400, "bare CR"),
        (b"GET /debug/pprof/heap HTTP/1.1\r\n folded: x\r\n\r\n", 400, "obs-fold"),
        (b"GET /debug/pprof/heap HTTP/1.1\r\nNo colon\r\n\r\n", 400, "header without colon"),
        (b"GET /debug/pprof/heap HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400, "control char"),
        (b"GET /debug/pprof/heap HTTP/2.0\r\n\r\n", 505, "HTTP/2.0"),
        (b"GET /debug/pprof/heap HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431, "huge header"),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 431, "huge target"),
        (b"GET / HTTP/1.1\r\n\r\n", 404, "unknown path"),
        (b"GET /debug/pprof/goroutine HTTP/1.1\r\n\r\n", 404, "unknown profile"),
        (b"DELETE /debug/pprof/heap HTTP/1.1\r\n\r\n", 405, "DELETE"),
        (b"POST /debug/pprof/heap HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405, "POST heap"),
        (b"POST /debug/pprof/symbol HTTP/1.1\r\n\r\n", 411, "POST without length"),
        (b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n", 413, "huge body"),
        (b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "two lengths"),
        (b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "negative length"),
        (b"POST /debug/pprof/symbol HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "chunked"),
        (b"GET /debug/pprof/heap?seconds=abc HTTP/1.1\r\n\r\n", 400, "seconds=abc"),
        (b"GET /debug/pprof/heap?seconds=0 HTTP/1.1\r\n\r\n", 400, "seconds=0"),
        (b"GET /debug/pprof/heap?seconds=100000 HTTP/1.1\r\n\r\n", 400, "seconds too big"),
        (b"GET /debug/pprof/heap?seconds=1&debug=1 HTTP/1.1\r\n\r\n", 400, "seconds with debug"),
        (b"GET /debug/pprof/heap?debug=x HTTP/1.1\r\n\r\n", 400, "debug=x"),
    ]
    for data, want, what in bad:
        expect_status(hp, data, want, what)
    # Ignored parameters and odd but valid forms are served.
    expect_status(hp, b"GET /debug/pprof/heap?gc=1&x=%zz&debug=1 HTTP/1.0\n\n", 200, "gc=1, LF only")
    # Random bytes, 200 rounds: always a 4xx (or a drop), never a crash.
    import random
    rnd = random.Random(1)
    for i in range(200):
        data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300)))
        if i % 2:
            data = b"GET /debug/pprof/" + data
        r = request(hp, data + b"\r\n\r\n")
        check(r is None or 400 <= r[0] < 600 or r[0] == 200, "random input: %s" % (r and r[0]))
    check(p.alive(), "process died on random input")

    # A client that sends nothing holds the server for at most 1 s once
    # another client waits.
    host, port = hp.rsplit(":", 1)
    idle = socket.create_connection((host, int(port)))
    time.sleep(0.2)
    t0 = time.monotonic()
    st, _, _ = get(hp, "/debug/pprof/cmdline")
    took = time.monotonic() - t0
    check(st == 200 and took < 3, "behind an idle connection: %.1f s" % took)
    idle.close()

    # A slow client (one byte every 0.3 s) is cut off by the 5 s head
    # deadline; the next client is then served.
    slow = socket.create_connection((host, int(port)))
    stop = threading.Event()

    def dribble():
        try:
            for b in b"GET /debug/pprof/heap?debug=1 HTTP/1.1\r\nX: " + b"a" * 100:
                if stop.is_set():
                    return
                slow.send(bytes([b]))
                time.sleep(0.3)
        except OSError:
            pass
    t = threading.Thread(target=dribble)
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    st, _, _ = get(hp, "/debug/pprof/cmdline")
    took = time.monotonic() - t0
    stop.set()
    t.join()
    slow.close()
    check(st == 200 and took < 8, "behind a slow client: %.1f s" % took)

    # A client that asks for a profile and goes away without reading: no
    # SIGPIPE, the process goes on.
    for _ in range(20):
        s = socket.create_connection((host, int(port)))
        s.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\n\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        s.close()  # RST
    # A body promised and never sent: dropped after the body deadline.
    request(hp, b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 100\r\n\r\n0x1", read=False)
    check(p.alive(), "process died after vanishing clients")

    # Many connections at once: all answered (the backlog overflows; the
    # kernel makes the rest retry).
    results = []

    def one():
        try:
            r = get(hp, "/debug/pprof/symbol")
            results.append(r[0] if r else None)
        except OSError as e:
            results.append(str(e))
    ts = [threading.Thread(target=one) for _ in range(100)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(results.count(200) == 100, "many connections: %r" % results[:10])
    check(p.alive(), "process died")
    st, _, body = get(hp, "/debug/pprof/heap?debug=1")
    check(st == 200 and b"heap profile:" in body, "served after all that")
    check(p.quit() == 0, "exit status")


def case_unix():
    curl = need("curl")
    path = os.path.join(WORK, "prof.sock")
    # A stale socket file, left by a process that is gone, is replaced.
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()
    p = Prog("prof:true,lg_prof_sample:0,prof_http:unix:" + path)
    check(p.addr == "unix:" + path, "address %r" % p.addr)
    check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, "mode %o" % os.stat(path).st_mode)
    check(p.cmd("where") == "where unix:" + path, "prof.http_address")
    r = run([curl, "-sSf", "--unix-socket", path, "http://x/debug/pprof/heap?debug=1"])
    check(b"heap profile:" in r.stdout, "no profile over the unix socket")
    if shutil.which("go"):
        # Go's pprof has no unix-socket URLs; fetch with curl, read with go.
        run([curl, "-sSf", "--unix-socket", path, "-o", "u.pb.gz", "http://x/debug/pprof/heap"])
        rows, _, out = pprof_top(shutil.which("go"), "u.pb.gz", "inuse_space")
        check(rows.get("make_node") == ("6400B", "6400B"), out)
    # One that somebody still serves is not taken over.
    p2 = Prog("prof:true,prof_http:unix:" + path, wait_serving=False)
    check("cannot listen" in p2.stderr() and "EADDRINUSE" in p2.stderr(), p2.stderr())
    check(p2.quit() == 0, "second program")
    check(os.path.exists(path), "the second program removed the first one's socket")
    check(p.quit() == 0, "exit status")
    check(not os.path.exists(path), "socket file left behind")


def case_conf():
    cases = [
        ("prof:true,prof_http:10.1.2.3:0", "not a loopback address"),
        ("prof:true,prof_http:0.0.0.0:0", "not a loopback address"),
        ("prof:true,prof_http:nonsense", "bad address"),
        ("prof:true,prof_http:example.com:80", "bad address"),
        ("prof:true,prof_http:127.0.0.1:99999", "bad address"),
        ("prof_http:127.0.0.1:0", "needs prof:true"),
    ]
    for conf, msg in cases:
        p = Prog(conf, wait_serving=False)
        err = p.stderr()
        check(msg in err and len(err.strip().splitlines()) == 1, "%s: %r" % (conf, err))
        check(p.cmd("where") in ("where", "where ?"), "%s: serving anyway" % conf)
        check(p.quit() == 0, conf)
    # A port in use: one line, the program runs.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    p = Prog("prof:true,prof_http:127.0.0.1:%d" % port, wait_serving=False)
    check("cannot listen" in p.stderr(), p.stderr())
    check(p.quit() == 0, "port in use")
    s.close()
    # prof_http_any:true allows all interfaces; localhost and [::1] work.
    for conf, want in (("prof:true,prof_http:0.0.0.0:0,prof_http_any:true", "0.0.0.0:"),
                       ("prof:true,prof_http:localhost:0", "127.0.0.1:"),
                       ("prof:true,prof_http:[::1]:0", "[::1]:")):
        p = Prog(conf)
        check(p.addr.startswith("http://" + want), "%s: %s" % (conf, p.addr))
        hp = p.hostport
        if hp.startswith("0.0.0.0"):
            hp = "127.0.0.1" + hp[7:]
        if hp.startswith("[::1]"):
            s6 = socket.create_connection(("::1", int(hp.rsplit(":", 1)[1])))
            s6.sendall(b"GET /debug/pprof/symbol HTTP/1.1\r\n\r\n")
            check(s6.recv(100).startswith(b"HTTP/1.1 200"), "IPv6")
            s6.close()
        else:
            check(get(hp, "/debug/pprof/symbol")[0] == 200, conf)
        check(p.quit() == 0, conf)


def view_lines(path, kind, fn_addrs):
    """{key: numbers} of the dump's '#nalloc KIND' lines whose leaf frame
    is one of fn_addrs' functions (by address range: [start, next start)).
    Node lines are keyed (function, node), the others by function."""
    out = {}
    for l in open(path):
        if not l.startswith("#nalloc " + kind + " "):
            continue
        head, _, stack = l.partition(" @ ")
        leaf = int(stack.split()[0], 16) - 1
        fn = None
        for name, (lo, hi) in fn_addrs.items():
            if lo <= leaf < hi:
                fn = name
        if fn is None:
            continue
        f = head.split()[2:]
        if kind == "node":
            key = (fn, int(f[0]))
            nums = [int(x.strip(":[]")) for x in f[1:] if x.strip(":[]")]
        else:
            key, nums = fn, [int(x) for x in f]
        prev = out.get(key, [0] * len(nums))
        out[key] = [a + b for a, b in zip(prev, nums)]
    return out


def fn_ranges(p):
    """[start, start + 4 KiB) of each function http_prog names (small
    functions, laid out apart: enough to tell a leaf frame's function)."""
    r = p.cmd("addrs")
    starts = {k: int(v, 16) for k, v in (x.split("=") for x in r.split())}
    order = sorted(starts.items(), key=lambda kv: kv[1])
    out = {}
    for i, (k, v) in enumerate(order):
        hi = order[i + 1][1] if i + 1 < len(order) else v + 4096
        out[k] = (v, hi)
    return out


def case_views():
    go = need("go")
    p = Prog("prof:true,lg_prof_sample:0,numa_nodes:4,narenas_per_node:1,"
             "prof_http:127.0.0.1:0")
    # delta_alloc's blocks: 10 on arena 2's node, 5 on arena 3's
    for a, n in ((2, 10), (3, 5)):
        check(p.cmd("arena %d" % a) == "ok", "thread.arena %d" % a)
        check(p.cmd("alloc %d" % n) == "ok", "alloc")
    check(p.cmd("dump %s/views.heap" % WORK) == "ok", "prof.dump failed")
    fa = fn_ranges(p)
    nodes = view_lines(os.path.join(WORK, "views.heap"), "node", fa)
    check(nodes.get(("delta_alloc", 2)) == [10, 40960, 10, 40960] and
          nodes.get(("delta_alloc", 3)) == [5, 20480, 5, 20480] and
          not any(k[0] == "delta_alloc" and k[1] not in (2, 3) for k in nodes),
          "dump's node lines for delta_alloc: %s" % nodes)
    url = p.url("/debug/pprof/heap")
    for d in range(4):
        for index, col in (("inuse_space", 1), ("inuse_objects", 0),
                           ("alloc_space", 3), ("alloc_objects", 2)):
            rows, _, out = pprof_top(go, url, index, ["-symbolize=remote",
                                                      "-tagfocus=numa_node=%d" % d])
            for fn in ("delta_alloc", "make_node", "churn"):
                want = nodes.get((fn, d), [0, 0, 0, 0])[col]
                got = rows.get(fn, ("0", "0"))[0]
                got = int(got.rstrip("B")) if got != "0" else 0
                check(got == want, "node %d %s %s: %s over HTTP, %d in the dump\n%s"
                      % (d, index, fn, got, want, out))
    # temporary allocations: churn's 20 at start-up, each freed at once
    temp = view_lines(os.path.join(WORK, "views.heap"), "temporary", fa)
    check(temp.get("churn") == [20], "dump's temporary lines: %s" % temp)
    rows, _, out = pprof_top(go, url, "temporary_objects", ["-symbolize=remote"])
    check(rows.get("churn", ("?",))[0] == "20", "temporary_objects:\n" + out)
    check(p.quit() == 0, "program exit status")

    # sampled: lifetimes of the sampled churn blocks, by label
    p = Prog("prof:true,lg_prof_sample:16,prof_http:127.0.0.1:0")
    check(p.cmd("churn 4000") == "ok", "churn")
    check(p.cmd("dump %s/life.heap" % WORK) == "ok", "prof.dump failed")
    fa = fn_ranges(p)
    life = view_lines(os.path.join(WORK, "life.heap"), "lifetime", fa)
    check(sum(life.get("churn", [])) > 0, "dump's lifetime lines: %s" % life)
    url = p.url("/debug/pprof/heap")
    rows, _, out = pprof_top(go, url, "lifetime_objects", ["-symbolize=remote"])
    check(rows.get("churn", ("?",))[0] == str(sum(life["churn"])),
          "lifetime_objects %s, dump %s:\n%s" % (rows.get("churn"), life, out))
    r = run([go, "tool", "pprof", "-tags", "-sample_index=lifetime_objects", url])
    tags = r.stdout.decode()
    names = ["<1us", "<4us", "<16us", "<66us", "<262us", "<1ms", "<4ms",
             "<17ms", "<67ms", "<268ms", "<1.1s", "<4.3s", "<17s", ">=17s"]
    for b, n in enumerate(life["churn"]):
        if n:
            check(re.search(r"\b%d\b.*%s" % (n, re.escape(names[b])), tags),
                  "lifetime %s: %d expected in\n%s" % (names[b], n, tags))
    check(p.quit() == 0, "program exit status")


def fork_child(p):
    """Asks the program to fork; the child's pid."""
    p.p.stdin.write(b"fork\n")
    p.p.stdin.flush()
    lines = {p.line(), p.line()}
    child = [l for l in lines if l.startswith("child ")]
    check(len(child) == 1 and "forked" in lines, "fork answers %r" % lines)
    return int(child[0].split()[1])


def case_fork():
    # Without prof_http_fork the child closes the socket it inherited: once
    # the parent is gone, connecting is refused although the child lives.
    p = Prog(EXACT)
    hp = p.hostport
    cpid = fork_child(p)
    try:
        check(get(hp, "/debug/pprof/symbol")[0] == 200, "parent stops serving after fork")
        check("pid %d" % cpid not in p.stderr(), "child serves without prof_http_fork")
        check(p.quit() == 0, "parent exit")
        os.kill(cpid, 0)  # the child still lives
        host, port = hp.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            fail("connection accepted after the parent exited: the child kept the socket")
        except ConnectionRefusedError:
            pass
    finally:
        os.kill(cpid, 9)
    # With prof_http_fork:true the child serves its own heap on a port of
    # its own, and the parent keeps serving its own.
    p = Prog(EXACT + ",prof_http_fork:true")
    cpid = fork_child(p)
    try:
        m = None
        for _ in range(50):
            m = re.search(r"serving http://([^/]+)/debug/pprof/ \(pid %d\)" % cpid, p.stderr())
            if m:
                break
            time.sleep(0.1)
        check(m is not None, "child not serving:\n" + p.stderr())
        chp = m.group(1)
        check(chp != p.hostport, "child on the parent's port")
        st, _, body = get(chp, "/debug/pprof/heap?debug=1")
        check(st == 200, "child status %d" % st)
        st, _, pbody = get(p.hostport, "/debug/pprof/heap?debug=1")
        check(st == 200, "parent status %d" % st)
        # child_alloc's 100 x 512 B are in the child's profile only.
        check(b"100: 51200 [100: 51200]" in body, "child profile:\n" + body.decode()[:1500])
        check(b"100: 51200 [100: 51200]" not in pbody, "parent profile has the child's heap")
    finally:
        os.kill(cpid, 9)
    check(p.quit() == 0, "exit status")


CASES = {"go": case_go, "symbol": case_symbol, "curl": case_curl,
         "gperf": case_gperf, "delta": case_delta, "sampled": case_sampled,
         "hostile": case_hostile, "unix": case_unix, "conf": case_conf,
         "fork": case_fork, "views": case_views}

if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    CASES[CASE]()
    print("PASS [%s]" % CASE)
