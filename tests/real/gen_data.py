"""Writes N MiB (default 48) of deterministic, partly compressible data to
stdout for the multi-threaded compression / sort tests: text lines with
numbers and words, mixed with pseudo-random bytes. With --lines, only text
lines (for sort)."""
import random
import sys

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 48
lines_only = "--lines" in sys.argv
rng = random.Random(2024)
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
         "hotel", "india", "juliet", "kilo", "lima", "mike", "november"]
out = sys.stdout.buffer
total = mib << 20
written = 0
i = 0
while written < total:
    lines = []
    for _ in range(2000):
        i += 1
        lines.append("%s %d %s %08x %s\n" % (
            words[(i * 7) % len(words)], rng.randrange(1 << 30),
            words[rng.randrange(len(words))], (i * 2654435761) & 0xFFFFFFFF,
            "-" * (i % 23)))
    chunk = "".join(lines).encode()
    if not lines_only:
        chunk += rng.randbytes(len(chunk) // 4)
    out.write(chunk)
    written += len(chunk)
