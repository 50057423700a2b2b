#!/usr/bin/env python3
"""realloc_model.py -- a model of bench-realloc's page heap (issue 12).

bench/realloc.c at one thread: 256 buffers grown in turn by 1-512 bytes up
to a random target of 1-64 KiB, every new byte written, freed at the target
and started again. The model follows only what nalloc puts in page runs
(buffers of REALLOC_PAGES_MIN = 4 KiB and more, alloc/realloc.c): each
holds ceil(size / G) granules; it grows in place into the free run after
it, else moves to a free run chosen by POLICY (carved at the run's start)
and its old run is freed and merged with free neighbours. Nothing is
purged, so the resident pages are the 4 KiB pages ever written: the model
prints their peak (KiB) per seed and the mean. The small blocks, nalloc's
metadata and the program are left out: at 4 KiB granules the model's
8,300-9,200 KiB stand for the page runs and free runs of bench-realloc's
10,840 KiB peak at one thread (-S 1; in a probe of the same pattern, at
its peak nalloc's stats.allocated was 6.3 MiB, stats.active 6.7, and its
free runs held 1.7 MiB of resident pages by /proc/self/pagemap). The
seeds are Python's, not bench-realloc's -S.

    python3 bench/realloc_model.py [--granule 4096] [--policy best]
        [--chunk-mib 4] [--room 0] [--ops 80000] [--seeds 1,2,3]

Policies: best (smallest run that fits, lowest address among equals: the
page heap's bins up to 128 pages hold one length each), first (lowest
address that fits). --room R takes R * size more granules on a move.
The peak is reached while all 256 buffers first grow together (the first
~40,000 operations), so 80,000 operations cover it. What it showed
(alloc/README.md, "Footprint of the small classes"): with --chunk-mib 64
(one contiguous heap, as glibc's), the mean peak of seeds 1-3 is 8,490 KiB
at 4 KiB granules, 7,948 at 2 KiB, 7,662 at 1 KiB, 7,489 at 512 B, 7,433
at 256 B; fit policy and room change it far less.
"""
import argparse
import random


class Heap:
    """Free runs of granules in chunks mapped as needed."""

    def __init__(self, chunk, policy):
        self.chunk, self.policy = chunk, policy
        self.free = {}  # start -> length
        self.ends = {}  # end -> start
        self.nchunks = 0

    def _insert(self, start, n):
        self.free[start] = n
        self.ends[start + n] = start

    def _remove(self, start):
        n = self.free.pop(start)
        del self.ends[start + n]
        return n

    def alloc(self, n):
        while True:
            fits = [(s, m) for s, m in self.free.items() if m >= n]
            if fits:
                break
            self._insert(self.nchunks * self.chunk, self.chunk)
            self.nchunks += 1
        if self.policy == "first":
            start, m = min(fits)
        else:
            start, m = min(fits, key=lambda f: (f[1], f[0]))
        self._remove(start)
        if m > n:
            self._insert(start + n, m - n)
        return start

    def take_at(self, at, n):
        """n granules from the free run that starts at `at`, if it can."""
        m = self.free.get(at)
        if at % self.chunk == 0 or m is None or m < n:
            return False
        self._remove(at)
        if m > n:
            self._insert(at + n, m - n)
        return True

    def release(self, start, n):
        if start % self.chunk and start in self.ends:
            left = self.ends[start]
            n += self._remove(left)
            start = left
        if (start + n) % self.chunk and start + n in self.free:
            n += self._remove(start + n)
        self._insert(start, n)


def run(seed, args):
    g = args.granule
    heap = Heap((args.chunk_mib << 20) // g, args.policy)
    rng = random.Random(seed)
    size, target = [0] * 256, [1024 + rng.randrange(63 * 1024 + 1) for _ in range(256)]
    block = [None] * 256  # (start, granules) of a buffer in page runs
    touched = set()

    def write(start, nbytes):
        first, last = start * g // 4096, (start * g + nbytes - 1) // 4096
        touched.update(range(first, last + 1))

    for i in range(args.ops):
        b = i % 256
        n = size[b] + 1 + rng.randrange(512)
        size[b] = n
        need = -(-n // g)
        if block[b] is None:
            if n >= 4096:
                block[b] = (heap.alloc(need), need)
        elif need > block[b][1]:
            start, have = block[b]
            if heap.take_at(start + have, need - have):
                block[b] = (start, need)
            else:
                more = need + int(need * args.room)
                block[b] = (heap.alloc(more), more)
                heap.release(start, have)
        if block[b] is not None:
            write(block[b][0], n)
        if n >= target[b]:
            if block[b] is not None:
                heap.release(*block[b])
            block[b], size[b] = None, 0
            target[b] = 1024 + rng.randrange(63 * 1024 + 1)
    return len(touched) * 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--granule", type=int, default=4096)
    ap.add_argument("--policy", choices=["best", "first"], default="best")
    ap.add_argument("--chunk-mib", type=int, default=4)
    ap.add_argument("--room", type=float, default=0.0)
    ap.add_argument("--ops", type=int, default=80000)
    ap.add_argument("--seeds", default="1,2,3")
    args = ap.parse_args()
    peaks = [run(int(s), args) for s in args.seeds.split(",")]
    print("granule %d policy %s chunk %d MiB room %g: peak KiB %s mean %d" %
          (args.granule, args.policy, args.chunk_mib, args.room, peaks,
           sum(peaks) // len(peaks)))


if __name__ == "__main__":
    main()
