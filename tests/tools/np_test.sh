#!/bin/bash
# np_test.sh CASE -- the nalloc-prof test cases (see CMakeLists.txt).
# Environment: NP (the tool), DEMO/DEMOLIB (alloc_demo and libnpdemo.so),
# FUZZ, PB_DECODE, DATA (sample profiles), SRC, WORK (scratch dir, emptied),
# CC, NALLOC_SO, NP_JEMALLOC, NP_TCMALLOC, NP_CHROMIUM, NP_GO.
# Exit 0 = pass, 77 = skipped (something optional is missing), else fail.
set -u
CASE=$1
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1

fail() { echo "FAIL [$CASE]: $*" >&2; exit 1; }
skip() { echo "SKIP [$CASE]: $*"; exit 77; }
have() { [ -n "${1:-}" ] && [ -e "$1" ] && [[ "$1" != *NOTFOUND ]]; }

# run OUTFILE ARGS...: runs the tool, stdout to OUTFILE, stderr to
# OUTFILE.err; fails the test on a non-zero exit.
run() {
  local out=$1; shift
  "$NP" "$@" >"$out" 2>"$out.err" || { cat "$out.err" >&2; fail "nalloc-prof $* exited $?"; }
}

# row FILE NAME: "flat cum" of the `top` row named NAME (exact match).
row() {
  awk -v n="$2" 'NR > 2 { l = $0; sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+  /, "", l);
                  if (l == n) { print $1, $4; exit } }' "$1"
}
# expect_row FILE NAME FLAT CUM
expect_row() {
  local got; got=$(row "$1" "$2")
  [ "$got" = "$3 $4" ] || { cat "$1" >&2; fail "$1: row '$2': want flat/cum '$3 $4', got '$got'"; }
}
expect_total() {
  head -1 "$1" | grep -q "^Total: $2 " || { cat "$1" >&2; fail "$1: want total $2"; }
}
expect_grep() { grep -q -- "$2" "$1" || { cat "$1" >&2; fail "$1: no match for '$2'"; }; }
expect_nogrep() { ! grep -q -- "$2" "$1" || { cat "$1" >&2; fail "$1: unexpected '$2'"; }; }

# The line carrying "@NAME" in a source file.
marker_line() { grep -n "@$2 \*/" "$1" | head -1 | cut -d: -f1; }

build_classic() {
  # Exactly how the reference binaries were built, so the sample profiles'
  # addresses fall on the same instructions.
  "$CC" -g -O0 -fno-omit-frame-pointer -o "$WORK/classic" "$DATA/classic.c" ||
    fail "cannot build classic.c"
}

# ---- profiles of the demo program ---------------------------------------
# gen_demo KIND DIR: runs alloc_demo under KIND (nalloc | jemalloc |
# gperftools) with every allocation sampled; leaves DIR/d1.heap (after
# phase 1) and DIR/d2.heap (after phase 2). The program and its library are
# copied into DIR first so cases may strip or delete them afterwards.
gen_demo() {
  local kind=$1 dir=$2 rc
  mkdir -p "$dir"
  cp "$DEMO" "$dir/alloc_demo" && cp "$DEMOLIB" "$dir/" || fail "copy demo"
  case $kind in
  nalloc)
    have "$NALLOC_SO" || skip "libnalloc.so is not built (sanitizer build?)"
    NALLOC_CONF=prof:true,lg_prof_sample:0 LD_PRELOAD=$NALLOC_SO \
      "$dir/alloc_demo" "$dir/d1.heap" "$dir/d2.heap" >"$dir/run.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      cat "$dir/run.log" >&2
      # ENOENT from nalloc_ctl("prof.dump"): built without the profiler.
      grep -q "prof.dump failed: 2$" "$dir/run.log" &&
        skip "nalloc_ctl(\"prof.dump\") is not available (ENOENT)"
      fail "alloc_demo under libnalloc.so exited $rc"
    fi ;;
  jemalloc)
    have "$NP_JEMALLOC" || skip "libjemalloc.so.2 not installed"
    MALLOC_CONF=prof:true,lg_prof_sample:0,prof_prefix:$dir/je \
      LD_PRELOAD=$NP_JEMALLOC "$dir/alloc_demo" "$dir/d1.heap" "$dir/d2.heap" \
      >"$dir/run.log" 2>&1 || { cat "$dir/run.log" >&2; fail "alloc_demo under jemalloc"; } ;;
  gperftools)
    have "$NP_TCMALLOC" || skip "libtcmalloc.so.4 not installed"
    HEAPPROFILE=$dir/hp LD_PRELOAD=$NP_TCMALLOC "$dir/alloc_demo" x y \
      >"$dir/run.log" 2>&1 || { cat "$dir/run.log" >&2; fail "alloc_demo under tcmalloc"; }
    mv "$dir/hp.0001.heap" "$dir/d1.heap" && mv "$dir/hp.0002.heap" "$dir/d2.heap" ||
      fail "gperftools wrote no dumps" ;;
  esac
  [ -s "$dir/d1.heap" ] && [ -s "$dir/d2.heap" ] || fail "$kind wrote no profile"
}

# Any allocator with a heap profiler will do for the symbolization cases.
gen_any() {
  if have "$NALLOC_SO" && (gen_demo nalloc "$1") >/dev/null 2>&1; then return; fi
  rm -rf "$1"
  if have "$NP_JEMALLOC"; then gen_demo jemalloc "$1"; return; fi
  if have "$NP_TCMALLOC"; then gen_demo gperftools "$1"; return; fi
  skip "no allocator with a heap profiler (nalloc, jemalloc, gperftools)"
}

# The assertions that hold for the demo whatever allocator profiled it.
check_demo() {
  local d=$1 src=$SRC/alloc_demo.c
  run top.txt top "$d/d1.heap"
  expect_row top.txt make_node 6400 6400
  expect_row top.txt build_list 0 6400
  expect_row top.txt load_table 4096 4096
  expect_row top.txt grow_buffer 4096 4096   # an inlined frame of fill_cache
  expect_row top.txt fill_cache 0 4096
  expect_row top.txt lib_alloc 1536 1536     # from libnpdemo.so
  local mc; mc=$(row top.txt main | cut -d' ' -f2)
  [ "${mc:-0}" -ge 16128 ] || fail "main cum $mc < 16128"
  expect_nogrep top.txt '^ .*  malloc$'
  expect_nogrep top.txt '  calloc$'

  run obj.txt top --inuse_objects "$d/d1.heap"
  expect_row obj.txt make_node 100 100
  expect_row obj.txt load_table 1 1
  expect_row obj.txt grow_buffer 4 4
  expect_row obj.txt lib_alloc 3 3

  run lines.txt top --lines "$d/d1.heap"
  expect_row lines.txt "make_node $src:$(marker_line "$src" make_node)" 6400 6400
  expect_row lines.txt "load_table $src:$(marker_line "$src" load_table)" 4096 4096
  expect_row lines.txt "grow_buffer $src:$(marker_line "$src" grow_buffer)" 4096 4096
  expect_row lines.txt "fill_cache $src:$(marker_line "$src" fill_cache)" 0 4096
  expect_row lines.txt "lib_alloc $SRC/npdemo_lib.c:$(marker_line "$SRC/npdemo_lib.c" lib_alloc)" 1536 1536

  run stacks.txt stacks "$d/d1.heap"
  # The make_node stack, leaf first, with its counters on the header line.
  awk '/^#/ { hdr = $0 } /^    make_node / { print hdr; getline; print; getline; print; exit }' \
    stacks.txt >mk.txt
  expect_grep mk.txt "6400 B .*inuse: 100 objects, 6400 B"
  expect_grep mk.txt "^    build_list  $src:"
  expect_grep mk.txt "^    main  $src:"

  run coll.txt collapsed "$d/d1.heap"
  expect_grep coll.txt ";main;build_list;make_node 6400$"
  expect_grep coll.txt ";main;fill_cache;grow_buffer 4096$"
  expect_grep coll.txt ";main;lib_alloc 1536$"
  run collo.txt collapsed --inuse_objects "$d/d1.heap"
  expect_grep collo.txt ";main;build_list;make_node 100$"

  run diff.txt diff "$d/d1.heap" "$d/d2.heap"
  expect_grep diff.txt "^ *+16384 *+16384 *0 *16384  leak_more$"
  expect_grep diff.txt "^ *-4096 *-4096 *4096 *0  load_table$"
  expect_grep diff.txt "^ *+16384 *0 *16384  .*;main;leak_more$"
  expect_grep diff.txt "^ *-4096 *4096 *0  .*;main;load_table$"
  expect_nogrep diff.txt "make_node$"   # unchanged: not listed
  head -1 diff.txt | grep -q "change +12288 B" || fail "diff total: $(head -1 diff.txt)"

  run fg.svg flamegraph "$d/d1.heap"
  expect_grep fg.svg 'data-name="make_node"'
  expect_grep fg.svg 'data-info="make_node: 6400 B, 100 objects'
  tr '\n' ' ' <fg.svg | grep -q '<title>make_node inuse_space: 6400 B ([0-9.]*%) inuse_objects: 100 objects</title>' ||
    fail "flamegraph tooltip of make_node"

  run p.pb.gz proto "$d/d1.heap"
  "$PB_DECODE" p.pb.gz >pb.txt || fail "pb_decode failed"
  expect_grep pb.txt "^flat 6400 make_node$"
  expect_grep pb.txt "^cum 6400 build_list$"
  expect_grep pb.txt "^flat 4096 grow_buffer$"
}

case_demo() {
  gen_demo "$1" "$WORK/p"
  check_demo "$WORK/p"
}

case "$CASE" in
demo_jemalloc) case_demo jemalloc ;;
demo_gperftools) case_demo gperftools ;;
demo_nalloc) case_demo nalloc ;;

samples)
  build_classic
  C="--exe=$WORK/classic"
  # gperftools text variants: all read as google-pprof reads G01.
  for f in G01_min G03_no0x G04_upperhex G05_nospace_after_colon \
           G06_two_spaces_before_at G09_header_totals_wrong G11_crlf G12_tabs \
           G17_no_trailing_newline G18_padded_like_gperftools \
           G19_maps_brief_form gperftools-HEAPPROFILE-classic.0001; do
    run $f.txt top $C "$DATA/$f.heap"
    expect_total $f.txt 14
    expect_row $f.txt b 10 10
    expect_row $f.txt a 4 8
    expect_row $f.txt main 0 14
    run $f.o.txt top --inuse_objects $C "$DATA/$f.heap"
    expect_total $f.o.txt 6
    expect_row $f.o.txt b 4 4
    expect_row $f.o.txt a 2 4
  done
  # Sampled: numbers exactly as google-pprof/jeprof print them.
  run g13.txt top $C "$DATA/G13_v2_rate524288.heap"
  expect_total g13.txt 3145735; expect_row g13.txt b 2097157 2097157
  expect_row g13.txt a 1048578 2097156
  run g13o.txt top --inuse_objects $C "$DATA/G13_v2_rate524288.heap"
  expect_total g13o.txt 1398104; expect_row g13o.txt b 873815 873815
  run g16.txt top $C "$DATA/G16_heap_rate.heap"          # heap/R: v1 rule
  expect_total g16.txt 3145728; expect_row g16.txt b 2097152 2097152
  run g16o.txt top --inuse_objects $C "$DATA/G16_heap_rate.heap"
  expect_total g16o.txt 1398101
  run g15.txt top $C "$DATA/G15_header_no_type.heap"     # no label: 128 KiB v1
  expect_total g15.txt 786432; expect_grep g15.txt.err "no profile type"
  run g14.txt top $C "$DATA/G14_v2_rate1.heap"           # R=1: exact (as Go)
  expect_total g14.txt 14
  run g10.txt top --alloc_space $C "$DATA/G10_alloc_gt_inuse.heap"
  expect_total g10.txt 30; expect_row g10.txt a 15 21; expect_row g10.txt b 15 15
  run g10o.txt top --alloc_objects $C "$DATA/G10_alloc_gt_inuse.heap"
  expect_total g10o.txt 9; expect_row g10o.txt b 6 6
  run g20.txt top "$DATA/G20_empty.heap"; expect_total g20.txt 0
  run g23.txt top $C "$DATA/G23_negative_inuse.heap"     # line dropped, said so
  expect_total g23.txt 10; expect_grep g23.txt.err "negative counter"
  run g24.txt top $C "$DATA/G24_count0_bytes_nonzero.heap"
  expect_total g24.txt 8
  run g02.txt top "$DATA/G02_nomaps.heap"                # no maps: raw addresses
  expect_total g02.txt 14; expect_row g02.txt 0x562b2d995161 10 10
  # gperftools sampled (tcmalloc GetHeapSample); its binary is gone.
  f=$DATA/gperftools-GetHeapSample-heap_v2-524288.heap
  run gs.txt top "$f"; expect_total gs.txt 19924850
  expect_row gs.txt tcsample+0x1201 13108456 13108456
  expect_nogrep gs.txt libtcmalloc              # allocator frames dropped
  run gso.txt top --inuse_objects "$f"; expect_total gso.txt 198625
  # jemalloc threaded format (jeprof's numbers).
  for f in J01_min J02_full J03_flush_left; do
    run $f.txt top $C "$DATA/$f.heap"
    expect_total $f.txt 15; expect_row $f.txt b 10 10; expect_row $f.txt a 4 9
  done
  run j04.txt top $C "$DATA/J04_rate524288.heap"; expect_total j04.txt 3145735
  run j06.txt top $C "$DATA/J06_no_tstar_only_t0.heap"; expect_total j06.txt 0
  run j06t.txt top --thread=0 $C "$DATA/J06_no_tstar_only_t0.heap"
  expect_total j06t.txt 15
  run j07.txt top --thread=0 $C "$DATA/J07_thread_name.heap"; expect_total j07.txt 15
  f=$DATA/jemalloc-lg_prof_sample0-prof_final.6120.0.f.heap
  run je.txt top $C "$f"; expect_total je.txt 81968
  expect_row je.txt b 32 32; expect_row je.txt a 16 32
  expect_nogrep je.txt libjemalloc
  run jeo.txt top --inuse_objects $C "$f"; expect_total jeo.txt 7
  run g22.txt top $C "$DATA/G22_from_jemalloc_verbatim_maps.heap"
  expect_total g22.txt 81968; expect_row g22.txt b 32 32
  f=$DATA/jemalloc-default-lg19-many.f.heap
  run many.txt top "$f"; expect_total many.txt 35715661
  run manyo.txt top --inuse_objects "$f"; expect_total manyo.txt 290269
  f=$DATA/deadthr.1.heap
  run dt.txt top "$f"; expect_total dt.txt 90432
  run dt1.txt top --thread=1 "$f"; expect_total dt1.txt 3072
  expect_row dt1.txt start_thread 0 3072
  f=$DATA/jemalloc-nulldump-jn.6425.0.m0.heap
  run nd.txt top "$f"; expect_total nd.txt 81960
  run nda.txt top --alloc_space "$f"; expect_total nda.txt 81968
  # The other subcommands on a sample.
  run c.txt collapsed $C "$DATA/G01_min.heap"
  printf 'main;a 4\nmain;a;b 4\nmain;b 6\n' | diff - c.txt || fail "collapsed G01"
  run s.txt stacks $C "$DATA/G01_min.heap"
  expect_grep s.txt "^#1  6 B (42.86%)  inuse: 2 objects, 6 B"
  run d.txt diff $C "$DATA/G01_min.heap" "$DATA/G10_alloc_gt_inuse.heap"
  expect_grep d.txt "change +0 B"
  run d2.txt diff --alloc_space $C "$DATA/G10_alloc_gt_inuse.heap" "$DATA/G10_alloc_gt_inuse.heap"
  expect_grep d2.txt "change +0 B"
  ;;

malformed)
  # expect_error ARGS...: exit 1, one line on stderr naming the problem.
  expect_error() {
    local want=$1; shift
    "$NP" "$@" >out.txt 2>err.txt; local rc=$?
    [ $rc -eq 1 ] || { cat err.txt >&2; fail "nalloc-prof $*: exit $rc, want 1"; }
    [ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt >&2; fail "nalloc-prof $*: want one error line"; }
    grep -q -- "$want" err.txt || { cat err.txt >&2; fail "nalloc-prof $*: want '$want'"; }
  }
  : >empty.heap
  expect_error "empty file" top empty.heap
  printf '\n\n  \n' >blank.heap
  expect_error "empty file" top blank.heap
  head -c 3000 /dev/urandom >random.bin   # contains NUL bytes w.h.p.
  printf 'x\0y' >>random.bin
  expect_error "binary data" top random.bin
  echo "hello world, this is not a profile" >garbage.heap
  expect_error "not a heap profile" top garbage.heap
  printf 'heap profile: 1: 8 [1: 8] @ heapprofile\n1: 8 [1: 8] @ 0x1234\n' | gzip >prof.gz
  expect_error "gzip" top prof.gz
  head -c 50 "$DATA/G01_min.heap" >trunc.heap     # cut inside a record
  expect_error "trunc.heap:2: malformed record" top trunc.heap
  head -c 17 "$DATA/G01_min.heap" >trunc2.heap    # cut inside the header
  expect_error "malformed header" top trunc2.heap
  printf 'heap_v2/1\n@ 0x1\n  t*: 1: 8 [0:\n' >trunc3.heap
  expect_error "trunc3.heap:3: malformed line" top trunc3.heap
  printf 'heap profile: 1: 8 [1: 8] @ heapprofile\n1: 8 [1: 8] @ 0x12 zz\n' >addr.heap
  expect_error "bad address" top addr.heap
  printf 'heap profile: 1: 8 [1: 8] @ mystery/5\n' >label.heap
  expect_error "unknown profile type" top label.heap
  printf 'heap profile: 99999999999999999999: 8 [1: 8] @ heapprofile\n' >big.heap
  expect_error "malformed header" top big.heap
  expect_error "heap_v2/<rate>" top "$DATA/J08_heap_v2_without_rate.heap"
  expect_error "No such file" top does-not-exist.heap
  expect_error "no cumulative counters" top --alloc_space "$DATA/J01_min.heap"
  expect_error "--thread needs" top --thread=1 "$DATA/G01_min.heap"
  # Every subcommand rejects bad input the same way.
  for c in stacks collapsed flamegraph proto; do
    expect_error "not a heap profile" $c -o x.out garbage.heap
  done
  expect_error "not a heap profile" diff "$DATA/G01_min.heap" garbage.heap
  # Usage errors exit 2.
  "$NP" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no args: want exit 2"
  "$NP" frobnicate x >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command: want exit 2"
  "$NP" top --inuse_space --alloc_space x >/dev/null 2>&1; [ $? -eq 2 ] || fail "two counters: want 2"
  "$NP" diff "$DATA/G01_min.heap" >/dev/null 2>&1; [ $? -eq 2 ] || fail "diff one file: want 2"
  ;;

fuzz)
  "$FUZZ" "$DATA"/*.heap || fail "parse_fuzz"
  # The real binary on truncations of two files: exit 0 or 1 only.
  for f in "$DATA/G01_min.heap" "$DATA/J02_full.heap"; do
    n=$(wc -c <"$f")
    for ((i = 0; i <= n; i += 9)); do
      head -c $i "$f" >t.heap
      "$NP" top --no-symbols t.heap >/dev/null 2>err.txt; rc=$?
      [ $rc -le 1 ] || fail "$f truncated at $i: exit $rc $(cat err.txt)"
      [ $rc -eq 0 ] || [ "$(wc -l <err.txt)" -eq 1 ] || fail "$f at $i: not one error line"
    done
  done
  ;;

symbolize_stripped)
  gen_any "$WORK/p"
  strip --strip-all "$WORK/p/alloc_demo"
  run top.txt top "$WORK/p/d1.heap"
  # The program's own functions are gone: module+offset frames, same totals.
  expect_grep top.txt "^ *6400 .*  alloc_demo+0x[0-9a-f]*$"
  expect_nogrep top.txt "make_node"
  expect_row top.txt lib_alloc 1536 1536   # the library still has symbols
  run c.txt collapsed "$WORK/p/d1.heap"
  expect_grep c.txt "alloc_demo+0x[0-9a-f]*;alloc_demo+0x[0-9a-f]* 6400$"
  ;;

symbolize_missing)
  gen_any "$WORK/p"
  rm "$WORK/p/alloc_demo" "$WORK/p/libnpdemo.so"
  run top.txt top "$WORK/p/d1.heap"
  expect_grep top.txt "^ *1536 .*  libnpdemo.so+0x[0-9a-f]*$"
  expect_grep top.txt "  alloc_demo+0x[0-9a-f]*$"
  for c in stacks collapsed flamegraph proto; do run o.$c $c "$WORK/p/d1.heap"; done
  # --remap finds moved files again.
  mkdir moved && cp "$DEMO" moved/alloc_demo && cp "$DEMOLIB" moved/
  run top2.txt top --remap="$WORK/p=$WORK/moved" "$WORK/p/d1.heap"
  expect_row top2.txt make_node 6400 6400
  expect_row top2.txt lib_alloc 1536 1536
  ;;

symbolize_debuglink)
  gen_any "$WORK/p"
  # Move the library's DWARF to a separate file found by .gnu_debuglink.
  cd "$WORK/p" || fail cd
  objcopy --only-keep-debug libnpdemo.so libnpdemo.so.debug &&
    objcopy --strip-debug --add-gnu-debuglink=libnpdemo.so.debug libnpdemo.so ||
    fail "objcopy"
  readelf -S libnpdemo.so | grep -q debug_info && fail "debug info not stripped"
  cd "$WORK" || fail cd
  run top.txt top --lines "$WORK/p/d1.heap"
  expect_row top.txt "lib_alloc $SRC/npdemo_lib.c:$(marker_line "$SRC/npdemo_lib.c" lib_alloc)" 1536 1536
  rm "$WORK/p/libnpdemo.so.debug"          # without it: name only, no line
  run top2.txt top --lines "$WORK/p/d1.heap"
  expect_row top2.txt lib_alloc 1536 1536
  ;;

symbolize_exe)
  # A non-PIE program and a profile without MAPPED_LIBRARIES: --exe
  # symbolizes addresses outside every mapping (pprof's <program>).
  "$CC" -g -O0 -fno-omit-frame-pointer -no-pie -fno-pie -o classic_nopie \
    "$DATA/classic.c" || fail "cc"
  addr() { nm classic_nopie | awk -v s="$1" '$3 == s { print $1 }'; }
  b=$(addr b); m=$(addr main)
  [ -n "$b" ] && [ -n "$m" ] || fail "nm"
  # return addresses just inside b and main (pc-1 is looked up)
  printf 'heap profile: 1: 8 [1: 8] @ heapprofile\n1: 8 [1: 8] @ 0x%x 0x%x\n' \
    $((0x$b + 2)) $((0x$m + 2)) >nomaps.heap
  run top.txt top --exe=classic_nopie nomaps.heap
  expect_row top.txt b 8 8; expect_row top.txt main 0 8
  run raw.txt top nomaps.heap
  expect_row raw.txt "0x$(printf %x $((0x$b + 2)))" 8 8
  ;;

flamegraph_browser)
  have "$NP_CHROMIUM" || skip "chromium not installed"
  gen_any "$WORK/p"
  run fg.svg flamegraph --title="demo heap" "$WORK/p/d1.heap"
  # Chromium runs the embedded script (label fitting, hover, zoom) and
  # dumps the resulting DOM: the script must have run (data-np-ready) and
  # the frames must still be labelled with their names.
  timeout 60 "$NP_CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$WORK/chrome" --dump-dom "file://$WORK/fg.svg" \
    >dom.txt 2>chrome.err || { tail -5 chrome.err >&2; fail "chromium failed"; }
  expect_grep dom.txt 'data-np-ready="[1-9]'
  tr '\n' ' ' <dom.txt >flat.txt
  # label LABEL NAME: frame NAME's text element reads LABEL.
  label() {
    grep -oP "data-name=\"$2\".*?</g>" flat.txt | head -1 | grep -q ">$1</text>" ||
      fail "frame $2 not labelled '$1' in the rendered SVG"
  }
  label main main; label _start _start; label make_node make_node
  # Narrow frames get a shortened label or none, never overflowing text.
  grep -oP 'data-name="lib_alloc".*?</g>' flat.txt |
    grep -qP '(<text[^>]*/>|>(lib_al[a-z_]*\.\.|lib_alloc)?</text>)' || fail "lib_alloc label"
  # Click-to-zoom, driven through the URL: build_list fills the width, its
  # callee make_node too, and frames outside it are hidden.
  timeout 60 "$NP_CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$WORK/chrome" --dump-dom "file://$WORK/fg.svg#zoom=build_list" \
    2>chrome.err | tr '\n' ' ' >zoom.txt
  grep -oP 'data-name="make_node".*?</g>' zoom.txt | grep -q 'width="1180"' ||
    fail "zoom: make_node not full width"
  grep -oP '<g [^>]*data-name="load_table"[^>]*>' zoom.txt | grep -q 'display: none' ||
    fail "zoom: load_table not hidden"
  expect_grep dom.txt "demo heap"
  ;;

proto_go)
  have "$NP_GO" || skip "go not installed"
  gen_any "$WORK/p"
  run p.pb.gz proto "$WORK/p/d1.heap"
  export HOME=$WORK GOCACHE=$WORK/gocache GOFLAGS=-mod=mod
  "$NP_GO" tool pprof -text -unit=B -nodecount=100 -nodefraction=0 p.pb.gz >go.txt 2>go.err ||
    { cat go.err >&2; fail "go tool pprof"; }
  grep -q "^ *6400B .* make_node$" go.txt || { cat go.txt >&2; fail "go: make_node"; }
  grep -q "^ *0 .* 6400B .* build_list$" go.txt || { cat go.txt >&2; fail "go: build_list"; }
  grep -q "^ *1536B .* lib_alloc$" go.txt || { cat go.txt >&2; fail "go: lib_alloc"; }
  "$NP_GO" tool pprof -text -sample_index=inuse_objects -nodecount=100 -nodefraction=0 p.pb.gz >goo.txt 2>&1 ||
    fail "go tool pprof objects"
  grep -q "^ *100 .* make_node$" goo.txt || { cat goo.txt >&2; fail "go: objects"; }
  # The jemalloc sample too (Go cannot read jemalloc's text format itself).
  build_classic
  run j.pb.gz proto --exe="$WORK/classic" "$DATA/jemalloc-lg_prof_sample0-prof_final.6120.0.f.heap"
  "$NP_GO" tool pprof -text -unit=B -nodefraction=0 j.pb.gz >goj.txt 2>&1 || fail "go j"
  grep -q "^ *32B .* b$" goj.txt || { cat goj.txt >&2; fail "go: b"; }
  ;;

proto_decode)
  build_classic
  C="--exe=$WORK/classic"
  run g.pb.gz proto $C "$DATA/G10_alloc_gt_inuse.heap"
  "$PB_DECODE" g.pb.gz >g.txt || fail "pb_decode"
  printf 'type alloc_objects count\ntype alloc_space bytes\ntype inuse_objects count\ntype inuse_space bytes\n' |
    diff - <(grep ^type g.txt) || fail "sample types"
  expect_grep g.txt "^total 14$"; expect_grep g.txt "^flat 10 b$"
  expect_grep g.txt "^cum 8 a$"; expect_grep g.txt "^cum 14 main$"
  "$PB_DECODE" g.pb.gz alloc_space >ga.txt || fail "pb_decode alloc"
  expect_grep ga.txt "^total 30$"; expect_grep ga.txt "^cum 21 a$"
  run g2.pb.gz proto --inuse_objects $C "$DATA/G13_v2_rate524288.heap"
  "$PB_DECODE" g2.pb.gz >g2.txt || fail "pb_decode g13"
  expect_grep g2.txt "^total 1398104$"   # the default type follows the flag
  [ "$(grep -c ^type g2.txt)" = 2 ] || fail "no alloc types without alloc data"
  # Unsymbolized frames (no binary) still give a valid profile.
  run u.pb.gz proto "$DATA/G02_nomaps.heap"
  "$PB_DECODE" u.pb.gz >u.txt || fail "pb_decode unsymbolized"
  expect_grep u.txt "^total 14$"
  ;;

cli)
  build_classic
  run h.txt --help; expect_grep h.txt "usage: nalloc-prof"
  run v.txt --version; expect_grep v.txt "^nalloc-prof "
  run n.txt top -n 1 --exe="$WORK/classic" "$DATA/G01_min.heap"
  [ "$(wc -l <n.txt)" = 3 ] || fail "-n 1 should print one row"
  run o.txt top -o out.txt --exe="$WORK/classic" "$DATA/G01_min.heap"
  [ ! -s o.txt ] && grep -q "^Total: 14 B" out.txt || fail "-o"
  run k.txt top --keep-allocator-frames --exe="$WORK/classic" \
    "$DATA/jemalloc-lg_prof_sample0-prof_final.6120.0.f.heap"
  expect_grep k.txt "libjemalloc\|malloc"
  run ns.txt top --no-symbols --exe="$WORK/classic" "$DATA/G01_min.heap"
  expect_row ns.txt classic+0x1161 10 10
  run st.txt top < "$DATA/G01_min.heap" --exe="$WORK/classic" -
  expect_row st.txt b 10 10
  ;;

allocator_frames)
  # Allocator frames go by module and exact entry-point name, never by a
  # prefix: the program's tc_parse_config, je_worker and nalloc_helper are
  # its own code, and so is app_leaf under tc_parse_config. Profiled by
  # every allocator at hand; each profile must read the same.
  "$CC" -g -O0 -fno-omit-frame-pointer -fno-sanitize=all -o prefix_demo \
    "$SRC/prefix_demo.c" -ldl || fail "cannot build prefix_demo.c"
  ran=0
  for kind in nalloc jemalloc gperftools; do
    mkdir -p $kind
    case $kind in
    nalloc) have "$NALLOC_SO" || continue
      NALLOC_CONF=prof:true,lg_prof_sample:0 LD_PRELOAD=$NALLOC_SO \
        ./prefix_demo $kind/p.heap >$kind/log 2>&1 ;;
    jemalloc) have "$NP_JEMALLOC" || continue
      MALLOC_CONF=prof:true,lg_prof_sample:0,prof_prefix:$WORK/$kind/je \
        LD_PRELOAD=$NP_JEMALLOC ./prefix_demo $kind/p.heap >$kind/log 2>&1 ;;
    gperftools) have "$NP_TCMALLOC" || continue
      HEAPPROFILE=$WORK/$kind/hp LD_PRELOAD=$NP_TCMALLOC ./prefix_demo x \
        >$kind/log 2>&1 && mv $kind/hp.0001.heap $kind/p.heap ;;
    esac
    [ $? -eq 0 ] && [ -s $kind/p.heap ] || { cat $kind/log >&2; fail "$kind: no profile"; }
    run $kind/top.txt top $kind/p.heap
    expect_row $kind/top.txt app_leaf 2048 2048
    expect_row $kind/top.txt tc_parse_config 0 2048
    expect_row $kind/top.txt je_worker 4096 4096
    expect_row $kind/top.txt nalloc_helper 8192 8192
    expect_row $kind/top.txt api_user 512 512     # je_malloc: an entry point
    expect_nogrep $kind/top.txt "  je_malloc$"
    expect_nogrep $kind/top.txt "  malloc$"
    expect_nogrep $kind/top.txt "  libjemalloc\|  libtcmalloc\|  libnalloc"
    run $kind/c.txt collapsed $kind/p.heap
    expect_grep $kind/c.txt ";main;tc_parse_config;app_leaf 2048$"
    ran=$((ran + 1))
  done
  [ $ran -gt 0 ] || skip "no allocator with a heap profiler (nalloc, jemalloc, gperftools)"
  ;;

views)
  # nalloc's '#nalloc' view lines (issue 14) on G01's stacks (main;b 6 B,
  # main;a;b 4 B, main;a 4 B, two objects each): per-node parts, temporary
  # counts and lifetime histograms, and a plain comment to skip.
  build_classic
  S1='0x562b2d995161 0x562b2d9951fa' S2='0x562b2d995161 0x562b2d9951ce 0x562b2d9951f0'
  S3='0x562b2d9951a9 0x562b2d9951f0'
  { sed -n '1,4p' "$DATA/G01_min.heap"
    echo "# a comment nalloc-prof skips, as Go's pprof does"
    echo "#nalloc node 0 1: 2 [1: 2] @ $S1"
    echo "#nalloc node 1 1: 4 [1: 4] @ $S1"
    echo "#nalloc node 1 2: 4 [2: 4] @ $S2"
    echo "#nalloc node 0 2: 4 [2: 4] @ $S3"
    echo "#nalloc temporary 1 @ $S1"
    echo "#nalloc temporary 2 @ $S3"
    echo "#nalloc lifetime 1 0 0 0 0 0 0 0 0 0 0 0 0 0 @ $S1"
    echo "#nalloc lifetime 0 0 0 3 0 0 0 0 0 0 0 0 0 0 @ $S3"
    sed -n '/^$/,$p' "$DATA/G01_min.heap"; } >views.heap
  # the ordinary view is G01's; top adds a column per node and the median
  # lifetime of each function's sampled objects
  run t.txt top --exe="$WORK/classic" views.heap
  expect_total t.txt 14
  expect_grep t.txt "node0 *node1 *lifetime  function$"
  expect_grep t.txt "^ *10 .* 2 *8 *<1us  b$"
  expect_grep t.txt "^ *4 .* 4 *0 *<66us  a$"
  # one node's memory
  run n0.txt top --node 0 --exe="$WORK/classic" views.heap
  expect_total n0.txt 6
  expect_grep n0.txt "^ *2 .*  b$"
  expect_grep n0.txt "^ *4 .*  a$"
  run n1.txt top --node=1 --exe="$WORK/classic" views.heap
  expect_total n1.txt 8
  expect_grep n1.txt "^ *8 .*  b$"
  run s1.txt stacks --node 1 --exe="$WORK/classic" views.heap
  expect_grep s1.txt "in 2 stacks"
  # temporaries: b 1 of its 4 allocations, a 2 of 2
  run tt.txt top --temporary --exe="$WORK/classic" views.heap
  expect_grep tt.txt "^Total: 3 temporary allocations .* of 6$"
  expect_grep tt.txt "^ *2 .* 2 *100.00%  a$"
  expect_grep tt.txt "^ *1 .* 4 *25.00%  b$"
  # no such node, no temporaries, both at once, malformed: errors
  "$NP" top --node 2 views.heap >/dev/null 2>e.txt && fail "--node 2 accepted"
  expect_grep e.txt "no memory on node 2"
  "$NP" top --temporary "$DATA/G01_min.heap" >/dev/null 2>e.txt && fail "--temporary without lines"
  expect_grep e.txt "no temporary allocations"
  "$NP" top --temporary --node 0 views.heap >/dev/null 2>e.txt && fail "both accepted"
  sed 's/^#nalloc node 1 2: 4/#nalloc node x 2: 4/' views.heap >bad.heap
  "$NP" top bad.heap >/dev/null 2>e.txt && fail "malformed view line accepted"
  expect_grep e.txt "malformed #nalloc line"
  ;;

diff_order)
  # diff lists functions by flat change, as pprof -diff_base does; --cum
  # by cumulative change. OLD is G01 (main;b 6, main;a;b 4, main;a 4), NEW
  # the same stacks at 11, 7 and 8 bytes: b +8 flat, a +4 flat (+7 cum),
  # main +0 flat (+12 cum).
  build_classic
  { printf 'heap profile: 12: 26 [12: 26] @ heapprofile\n'
    printf '4: 11 [4: 11] @ 0x562b2d995161 0x562b2d9951fa\n'
    printf '4: 7 [4: 7] @ 0x562b2d995161 0x562b2d9951ce 0x562b2d9951f0\n'
    printf '4: 8 [4: 8] @ 0x562b2d9951a9 0x562b2d9951f0\n'
    sed -n '/^$/,$p' "$DATA/G01_min.heap"; } >new.heap
  order() { # the function names of the "By function" section, in order
    awk '/^By function/ { on = 1; getline; next } /^$/ { on = 0 } on { print $NF }' "$1" | tr '\n' ' '
  }
  run d.txt diff --exe="$WORK/classic" "$DATA/G01_min.heap" new.heap
  expect_grep d.txt "by flat change"
  [ "$(order d.txt)" = "b a main " ] || { cat d.txt >&2; fail "flat order: $(order d.txt)"; }
  expect_grep d.txt "^ *+8 *+8 *10 *18  b$"
  expect_grep d.txt "^ *+4 *+7 *8 *15  a$"
  expect_grep d.txt "^ *+0 *+12 *14 *26  main$"
  run dc.txt diff --cum --exe="$WORK/classic" "$DATA/G01_min.heap" new.heap
  expect_grep dc.txt "by cum change"
  [ "$(order dc.txt)" = "main b a " ] || { cat dc.txt >&2; fail "cum order: $(order dc.txt)"; }
  # The reverse diff: what shrank most by flat comes last.
  run dr.txt diff --exe="$WORK/classic" new.heap "$DATA/G01_min.heap"
  [ "$(order dr.txt)" = "main a b " ] || { cat dr.txt >&2; fail "reverse order: $(order dr.txt)"; }
  # top --cum: main (cum 26) first; plain top: b (flat 18) first.
  run t.txt top --exe="$WORK/classic" new.heap
  [ "$(sed -n 3p t.txt | awk '{print $NF}')" = b ] || fail "top order"
  run tc.txt top --cum --exe="$WORK/classic" new.heap
  [ "$(sed -n 3p tc.txt | awk '{print $NF}')" = main ] || fail "top --cum order"
  ;;

*) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
exit 0
