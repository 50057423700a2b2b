"""A deterministic allocation-heavy Python workload for tests/real.

Builds and tears down big dicts, lists, strings and object graphs, does a
JSON round trip, regular expressions, sorting, hashing and compression, and
prints a digest of everything it computed: the same digest must come out
with and without nalloc. Run with PYTHONHASHSEED=0 and PYTHONMALLOC=malloc
(every object then comes from malloc, not from pymalloc's arenas)."""
import collections
import hashlib
import heapq
import json
import random
import re
import zlib

rng = random.Random(12345)
h = hashlib.sha256()


def feed(x):
    h.update(repr(x).encode())


# 1. dict churn
d = {}
for i in range(80000):
    d["key%08d_%s" % (i, "x" * (i % 17))] = [i, str(i * 7), {"a": i % 13, "b": "v" * (i % 5)}]
feed(len(d))
for i in range(0, 80000, 2):
    del d["key%08d_%s" % (i, "x" * (i % 17))]
for i in range(80000, 110000):
    d["new%d" % i] = (i, float(i) / 3.0)
feed(sum(v[0] for v in d.values()))

# 2. json round trip
blob = json.dumps(d, sort_keys=True)
back = json.loads(blob)
assert back == {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}
feed(hashlib.sha256(blob.encode()).hexdigest())
del back, blob

# 3. sorting
lst = [rng.random() for _ in range(150000)]
lst.sort()
feed(lst[::10000])
words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12)))
         for _ in range(60000)]
words.sort(key=lambda w: (len(w), w))
feed(words[::5000])

# 4. regular expressions
text = " ".join(words)
found = re.findall(r"\b(a\w*j)\b", text)
feed(len(found))
feed(found[:50])
subbed = re.sub(r"(b+)(c)", lambda m: m.group(2) + str(len(m.group(1))), text)
feed(hashlib.md5(subbed.encode()).hexdigest())
feed(len(re.split(r"[aeiou]+", text)))

# 5. big strings and bytes
s = "".join(str(i) for i in range(200000))
feed(hashlib.sha1(s.encode()).hexdigest())
b = bytearray()
for i in range(20000):
    b += bytes([i % 256]) * (i % 100)
feed(zlib.crc32(b))
comp = zlib.compress(bytes(b), 6)
feed(len(comp))
assert zlib.decompress(comp) == bytes(b)
parts = s.split("9")
feed(len(parts))
feed(len("|".join(reversed(parts))))

# 6. counters, heaps, sets
c = collections.Counter(w[:2] for w in words)
feed(sorted(c.most_common(20)))
heap = []
for x in lst[:100000]:
    heapq.heappush(heap, (x * 1000) % 1)
feed([heapq.heappop(heap) for _ in range(20)])
feed(len(set(words)))
feed(sorted(set(words[:20000]) & set(words[10000:30000]))[:20])


# 7. object graphs with cycles (the cycle collector frees them)
class Node:
    def __init__(self, v):
        self.v = v
        self.next = None
        self.peer = None


for rnd in range(3):
    nodes = [Node(i) for i in range(40000)]
    for i, n in enumerate(nodes):
        n.next = nodes[(i + 1) % len(nodes)]
        n.peer = nodes[(i * 7) % len(nodes)]
    total = 0
    n = nodes[0]
    for _ in range(40000):
        total += n.v
        n = n.peer.next
    feed(total)
    del nodes, n

# 8. many short-lived tuples / lists / strings
acc = 0
for i in range(150000):
    t = (i, str(i), [i] * (i % 8))
    acc += len(t[1]) + len(t[2])
feed(acc)

print(h.hexdigest())
print(len(d), len(words), len(found))
