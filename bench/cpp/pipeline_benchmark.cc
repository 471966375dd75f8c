// SPDX-License-Identifier: Apache-2.0
//
// Microbenchmarks of the native pipeline engine's fixed costs.
//
//   BM_Chain/<stages>/<concurrency>/<queue>
//       Per-item overhead of the engine itself: a source over 200,000 ints,
//       `stages` no-op pipe stages of the given concurrency, a sink, on a
//       2-thread pool, drained with next(). The ops do nothing, so the time
//       is queueing, scheduling, Item boxing and stats bookkeeping. queue=0
//       uses the defaults (16-item stage queues, a 3-item sink as in
//       add_sink()); queue=64 sets every queue and the sink to 64 items, the
//       setting for cheap, small items.
//   BM_Chain3_DefaultOptions, BM_Chain3_Queues64
//       The reference cases by name: 3 stages, concurrency 1, default
//       queues (16 items, add_sink(3)) or every queue 64 deep.
//   BM_ChainAggregate
//       The same with 3 no-op stages followed by aggregate(32): the cost of
//       batching on top of the chain.
//   BM_ThreadPoolDispatch
//       Submitting 100,000 empty tasks to a 2-thread ThreadPool and waiting
//       for all of them: the floor under every stage task.
//   BM_ItemMove<T>
//       Moving an Item back and forth: an int (inline), a std::string of 100
//       chars (the string object is inline, its characters on the heap), and
//       a 64-byte struct (too large for the inline buffer, so boxed).
//   BM_HistogramRecord
//       LatencyHistogram::record, which every stage call pays once.
//
// Run: `make bench`, or build/release/bench/cpp/pipeline_benchmark with
// --benchmark_filter=<regex>.
// Results: see bench/README.md

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <ranges>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/histogram.h"
#include "feedline/pipeline/item.h"

namespace {

constexpr int kChainItems = 200'000;
// The machine these numbers are taken on has 2 cores.
constexpr int kPoolThreads = 2;

using Clock = std::chrono::steady_clock;

// Reports items/s and the wall-clock ns per item over all iterations.
// benchmark's own rate counters divide by CPU or real time of the whole
// run; computing it here keeps the figure readable next to the table.
void report_items(benchmark::State& state, int64_t items,
                  Clock::duration elapsed) {
  state.SetItemsProcessed(items);
  const double ns = static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  state.counters["ns_per_item"] =
      benchmark::Counter(items > 0 ? ns / static_cast<double>(items) : 0.0);
}

// Builds and drains source -> `num_stages` no-op pipes -> sink. Construction
// (spec, stages, pool threads) and teardown are inside the timed region on
// purpose: they are part of what a user pays per pipeline, though at 200,000
// items they are a small share.
int64_t run_chain(int num_stages, int concurrency, std::size_t queue) {
  auto builder = feedline::PipelineBuilder().add_source(
      std::views::iota(0, kChainItems), {.output_capacity = queue});
  for (int i = 0; i < num_stages; ++i) {
    builder = std::move(builder).pipe(
        [](int x) { return x; },
        {.concurrency = concurrency, .output_capacity = queue});
  }
  auto pipeline =
      std::move(builder).add_sink(queue == 0 ? 3 : queue).build(kPoolThreads);
  int64_t count = 0;
  while (auto item = pipeline.next()) {
    benchmark::DoNotOptimize(*item);
    ++count;
  }
  return count;
}

void BM_Chain(benchmark::State& state) {
  const int num_stages = static_cast<int>(state.range(0));
  const int concurrency = static_cast<int>(state.range(1));
  const auto queue = static_cast<std::size_t>(state.range(2));
  int64_t items = 0;
  Clock::duration elapsed{};
  for (auto _ : state) {
    const auto start = Clock::now();
    const int64_t n = run_chain(num_stages, concurrency, queue);
    elapsed += Clock::now() - start;
    if (n != kChainItems) state.SkipWithError("pipeline lost items");
    items += n;
  }
  report_items(state, items, elapsed);
}
BENCHMARK(BM_Chain)
    ->ArgNames({"stages", "concurrency", "queue"})
    ->ArgsProduct({{1, 3, 5}, {1, 4}, {0, 64}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
// The two reference figures of bench/README.md, by name: the 3-stage no-op
// chain with default options (BM_Chain/stages:3/concurrency:1/queue:0) and
// with every queue 64 deep (.../queue:64).
BENCHMARK(BM_Chain)
    ->Name("BM_Chain3_DefaultOptions")
    ->Args({3, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK(BM_Chain)
    ->Name("BM_Chain3_Queues64")
    ->Args({3, 1, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

void BM_ChainAggregate(benchmark::State& state) {
  int64_t items = 0;
  Clock::duration elapsed{};
  for (auto _ : state) {
    const auto start = Clock::now();
    auto pipeline = feedline::PipelineBuilder()
                        .add_source(std::views::iota(0, kChainItems))
                        .pipe([](int x) { return x; })
                        .pipe([](int x) { return x; })
                        .pipe([](int x) { return x; })
                        .aggregate(32)
                        .add_sink()
                        .build(kPoolThreads);
    int64_t n = 0;
    while (auto batch = pipeline.next()) {
      n += static_cast<int64_t>(batch->size());
    }
    elapsed += Clock::now() - start;
    if (n != kChainItems) state.SkipWithError("pipeline lost items");
    items += n;
  }
  report_items(state, items, elapsed);
}
BENCHMARK(BM_ChainAggregate)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

void BM_ThreadPoolDispatch(benchmark::State& state) {
  constexpr int kTasks = 100'000;
  feedline::ThreadPool pool(kPoolThreads);
  int64_t items = 0;
  Clock::duration elapsed{};
  for (auto _ : state) {
    const auto start = Clock::now();
    std::latch done(kTasks);
    for (int i = 0; i < kTasks; ++i) {
      pool.submit([&done] { done.count_down(); });
    }
    done.wait();
    elapsed += Clock::now() - start;
    items += kTasks;
  }
  report_items(state, items, elapsed);
}
BENCHMARK(BM_ThreadPoolDispatch)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

// Larger than the Item's 32-byte inline buffer.
struct Boxed {
  std::array<uint64_t, 8> words{};
};

template <typename T>
T make_value() {
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(100, 'x');
  } else {
    return T{};
  }
}

// One op is one move; each loop turn does two (a -> b -> a).
template <typename T>
void BM_ItemMove(benchmark::State& state) {
  feedline::Item a(make_value<T>());
  feedline::Item b;
  for (auto _ : state) {
    b = std::move(a);
    benchmark::DoNotOptimize(b);
    a = std::move(b);
    benchmark::DoNotOptimize(a);
  }
  if (!a.holds<T>()) state.SkipWithError("value lost");
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK_TEMPLATE(BM_ItemMove, int);
BENCHMARK_TEMPLATE(BM_ItemMove, std::string);
BENCHMARK_TEMPLATE(BM_ItemMove, Boxed);

void BM_HistogramRecord(benchmark::State& state) {
  // Values spread over many buckets, as real op times are.
  std::vector<std::chrono::nanoseconds> values;
  uint64_t x = 88172645463325252ULL;
  for (int i = 0; i < 1024; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.emplace_back(static_cast<int64_t>(x % 10'000'000));
  }
  feedline::LatencyHistogram histogram;
  std::size_t i = 0;
  for (auto _ : state) {
    histogram.record(values[i++ & 1023]);
  }
  benchmark::DoNotOptimize(histogram.count());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramRecord);

}  // namespace

BENCHMARK_MAIN();
