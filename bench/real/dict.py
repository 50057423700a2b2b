# bench/real/dict.py: python building a 10^6-entry dict of lists and
# strings, for bench/realprof.sh (run with PYTHONMALLOC=malloc).
d = {}
for i in range(1_000_000):
    d["key-%d" % i] = [i, str(i), (i, i * 2)]
print(len(d), sum(len(v[1]) for v in d.values()))
