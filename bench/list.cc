// list: every thread builds a std::list<long> of up to 10^6 nodes, checks
// it, and destroys it, several rounds (the classic per-thread churn of
// small same-size nodes that exposes thread-caching and profiler cost).
// Total work = 4*10^7 nodes * scale, split over the threads.
#include <list>
#include <thread>
#include <vector>
#include "bench_common.h"

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv);
  long total = bench_scaled(4e7, a.scale, 1000);
  long per_thread = total / a.threads < 100 ? 100 : total / a.threads;
  long nodes = per_thread < 1000000 ? per_thread : 1000000;
  long rounds = per_thread / nodes;
  double t0 = bench_now();
  std::vector<std::thread> th;
  for (int t = 0; t < a.threads; t++)
    th.emplace_back([nodes, rounds, t] {
      for (long r = 0; r < rounds; r++) {
        std::list<long> l;
        long base = (long)t * 1000003 + r;
        for (long i = 0; i < nodes; i++) l.push_back(base + i);
        long sum = 0, n = 0;
        for (long v : l) {
          if (v != base + n) BENCH_FAIL("list node %ld holds %ld, expected %ld", n, v, base + n);
          sum += v;
          n++;
        }
        if (n != nodes || sum != nodes * base + nodes * (nodes - 1) / 2)
          BENCH_FAIL("list sum/length wrong (%ld nodes)", n);
        while (!l.empty()) l.pop_front();
      }
    });
  for (auto &x : th) x.join();
  double s = bench_now() - t0;
  char extra[64];
  snprintf(extra, sizeof extra, "nodes=%ld rounds=%ld", nodes, rounds);
  bench_result("list", &a, (double)nodes * rounds * a.threads, s, extra);
  return 0;
}
