// SPDX-License-Identifier: Apache-2.0
//
// The soak run (`make soak`): many items through one long-lived pipeline,
// to find slow leaks and drift that short tests cannot see.
//
//   source (ints 0..N-1) -> 4 pipe stages -> sink, on a 2-thread pool
//
// The stages alternate concurrency 1 and 2 and the output orders
// (completion, input), and each does a small amount of arithmetic that the
// next one undoes, so every item arrives unchanged; the consumer checks the
// count and the sum (nothing lost, nothing twice) and that the pipeline
// recorded no failure. RSS is sampled every --sample items; the growth is
// the last sample minus the first one after --warmup items.
//
//   soak [--items N] [--sample N] [--warmup N] [--max-growth-mib M]
//
// Prints one line per sample and a summary line; exits with 1 if an item
// was lost or duplicated, a stage failed, or RSS grew by more than
// --max-growth-mib (default 16).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ranges>
#include <string>
#include <string_view>

#include <unistd.h>

#include "feedline/pipeline/builder.h"

namespace {

using Clock = std::chrono::steady_clock;

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0;
  long resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) *
         static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

struct Args {
  int64_t items = 10'000'000;
  int64_t sample = 500'000;
  int64_t warmup = 1'000'000;
  double max_growth_mib = 16;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--items") {
      a.items = std::atoll(value);
    } else if (flag == "--sample") {
      a.sample = std::atoll(value);
    } else if (flag == "--warmup") {
      a.warmup = std::atoll(value);
    } else if (flag == "--max-growth-mib") {
      a.max_growth_mib = std::atof(value);
    } else {
      std::fprintf(stderr, "soak: unknown flag %s\n", argv[i]);
      std::exit(2);
    }
  }
  a.sample = std::max<int64_t>(a.sample, 1);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  using feedline::OutputOrder;
  auto pipeline = feedline::PipelineBuilder()
                      .add_source(std::views::iota(int64_t{0}, args.items))
                      .pipe([](int64_t x) { return x * 3; }, {.name = "times3"})
                      .pipe([](int64_t x) { return x + 7; },
                            {.name = "plus7", .concurrency = 2})
                      .pipe([](int64_t x) { return x - 7; },
                            {.name = "minus7",
                             .concurrency = 2,
                             .output_order = OutputOrder::kInput})
                      .pipe([](int64_t x) { return x / 3; }, {.name = "div3"})
                      .add_sink(16)
                      .build(/*num_threads=*/2);

  const auto start = Clock::now();
  auto last_time = start;
  int64_t count = 0;
  int64_t sum = 0;
  double first_rss = -1;
  double last_rss = 0;
  double max_rss = 0;
  while (auto item = pipeline.next()) {
    sum += *item;
    ++count;
    if (count % args.sample == 0) {
      const auto now = Clock::now();
      const double rss = rss_mib();
      const double window =
          std::chrono::duration<double>(now - last_time).count();
      last_time = now;
      std::printf("soak: %lld items, RSS %.1f MiB, %.0f items/s\n",
                  static_cast<long long>(count), rss,
                  static_cast<double>(args.sample) / window);
      std::fflush(stdout);
      if (count >= args.warmup && first_rss < 0) first_rss = rss;
      last_rss = rss;
      max_rss = std::max(max_rss, rss);
    }
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t n = args.items;
  const int64_t expected_sum = n * (n - 1) / 2;
  const feedline::PipelineStats stats = pipeline.stats();
  uint64_t failures = 0;
  for (const auto& stage : stats.stages) failures += stage.failures;
  if (first_rss < 0) first_rss = last_rss;
  const double growth = last_rss - first_rss;
  const bool ok = count == n && sum == expected_sum && failures == 0 &&
                  growth <= args.max_growth_mib;
  std::printf(
      "soak: %s: %lld items through 4 stages in %.1f s (%.0f items/s); "
      "RSS %.1f MiB after %lld items, %.1f MiB at the end (max %.1f): "
      "growth %+.1f MiB; %llu failures; sum %s\n",
      ok ? "ok" : "FAILED", static_cast<long long>(count), seconds,
      static_cast<double>(count) / seconds, first_rss,
      static_cast<long long>(args.warmup), last_rss, max_rss, growth,
      static_cast<unsigned long long>(failures),
      sum == expected_sum ? "exact" : "WRONG");
  return ok ? 0 : 1;
}
