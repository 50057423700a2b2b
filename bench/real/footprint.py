# bench/real/footprint.py: dicts, lists and strings in python for
# bench/footprint.sh (run with PYTHONMALLOC=malloc, so every object comes
# from the allocator under test). T threads take turns under the GIL; each
# round builds a dict of lists and strings, keeps a sample, drops the rest.
# Usage: footprint.py [ROUNDS] [THREADS] [ENTRIES]
import random
import sys
import threading

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
nthreads = int(sys.argv[2]) if len(sys.argv) > 2 else 4
entries = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
kept = []
lock = threading.Lock()


def work(t):
    rnd = random.Random(t)
    mine = []
    for r in range(rounds):
        d = {}
        for i in range(entries):
            k = "k%d-%d-%d" % (t, r, i)
            d[k] = [k * (1 + i % 5), i, str(i) * (i % 40), {"n": i, "s": "x" * rnd.randrange(600)}]
        mine.append({k: v for k, v in d.items() if hash(k) % 10 == 0})
        if len(mine) > 3:
            mine.pop(0)
        del d
    with lock:
        kept.append(sum(len(m) for m in mine))


threads = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
for th in threads:
    th.start()
for th in threads:
    th.join()
print(len(kept), sum(kept))
