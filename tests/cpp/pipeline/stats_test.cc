// SPDX-License-Identifier: Apache-2.0
//
// Statistics: exact durations under a ManualClock, hooks, JSON, table, and
// the histogram.

#include <atomic>
#include <latch>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/histogram.h"
#include "testing/manual_clock.h"
#include "testing/pipeline_testing.h"

namespace feedline {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using testing::drain;
using testing::iota;

TEST(StatsTest, OpTimeIsMeasuredAroundEachCall) {
  testing::ManualClock clock;
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [&](int x) {
                     clock.advance(milliseconds(5 + x));  // 5..14 ms
                     return x;
                   },
                   {.name = "work"})
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .clock = &clock});
  drain(p);
  const StageStats s = p.stats().stages[1];
  EXPECT_EQ(s.name, "1:work");
  EXPECT_EQ(s.calls, 10u);
  EXPECT_EQ(s.op_time.count(), 10u);
  EXPECT_EQ(s.op_time.sum(), milliseconds(95));
  EXPECT_EQ(s.op_time.max(), milliseconds(14));
  // Quantiles are bucket midpoints: within 12.5% of the true value.
  EXPECT_NEAR(static_cast<double>(s.op_time.quantile(0.5).count()), 9e6,
              9e6 * 0.125);
  EXPECT_NEAR(static_cast<double>(s.op_time.quantile(0.9).count()), 13e6,
              13e6 * 0.125);
}

TEST(StatsTest, HookGetsAFinalSnapshotOnceAndPeriodicOnes) {
  std::atomic<int> reports{0};
  std::latch two_reports(2);
  std::vector<uint64_t> delivered;
  std::mutex mu;
  BuildOptions options;
  options.num_threads = 2;
  options.report_interval = milliseconds(1);
  options.stats_hook = [&](const PipelineStats& s) {
    std::lock_guard<std::mutex> lock(mu);
    delivered.push_back(s.items_delivered);
    if (++reports <= 2) two_reports.count_down();
  };
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe([&](int x) {
                 if (x == 50) two_reports.wait();  // periodic reports happen
                 return x;
               })
               .add_sink()
               .build(std::move(options));
  EXPECT_EQ(drain(p).size(), 100u);
  p.stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GE(delivered.size(), 3u);
  EXPECT_EQ(delivered.back(), 100u);
  for (std::size_t i = 1; i < delivered.size(); ++i) {
    EXPECT_LE(delivered[i - 1], delivered[i]);
  }
}

TEST(StatsTest, FinalReportComesOnceAtTheEnd) {
  int reports = 0;
  uint64_t last_delivered = 0;
  BuildOptions options;
  options.num_threads = 2;
  options.stats_hook = [&](const PipelineStats& s) {  // no interval: end only
    ++reports;
    last_delivered = s.items_delivered;
  };
  auto p = PipelineBuilder().add_source(iota(10)).add_sink().build(
      std::move(options));
  EXPECT_EQ(drain(p).size(), 10u);
  EXPECT_EQ(reports, 1);  // at kEnd, on the consumer's thread
  EXPECT_EQ(last_delivered, 10u);
  p.stop();
  EXPECT_EQ(reports, 1);  // not again at stop()
}

TEST(StatsTest, WaitTimesPointAtTheSlowStage) {
  testing::ManualClock clock;
  // A slow first stage (advancing the clock) and a fast second one: the
  // second stage waits on its input, the first never waits on its output.
  auto p = PipelineBuilder()
               .add_source(iota(20))
               .pipe(
                   [&](int x) {
                     clock.advance(milliseconds(10));
                     return x;
                   },
                   {.name = "slow"})
               .pipe([](int x) { return x; }, {.name = "fast"})
               .add_sink(64)
               .build(BuildOptions{.num_threads = 1, .clock = &clock});
  drain(p);
  PipelineStats s = p.stats();
  EXPECT_EQ(s.stages[1].wait_output, nanoseconds(0));
  EXPECT_GT(s.stages[2].wait_input, milliseconds(100));
  // The queue between slow and fast: nothing waited to put, its reader
  // waited to get.
  EXPECT_EQ(s.stages[2].input_queue.put_wait, nanoseconds(0));
  EXPECT_EQ(s.stages[2].input_queue.get_wait, s.stages[2].wait_input);
}

TEST(StatsTest, JsonHasEveryStageAndField) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe([](int x) { return x; }, {.name = "a \"quoted\" name"})
               .add_sink()
               .build(2);
  drain(p);
  std::string json = to_json(p.stats());
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_NE(json.find("\"items_delivered\":10"), std::string::npos) << json;
  EXPECT_NE(json.find("a \\\"quoted\\\" name"), std::string::npos);
  for (const char* key :
       {"op_time_p50_s", "op_time_p90_s", "op_time_p99_s", "wait_input_s",
        "wait_output_s", "occupancy", "input_queue", "failures",
        "items_skipped", "put_wait_s", "get_wait_s"}) {
    EXPECT_NE(json.find(std::string("\"") + key + "\""), std::string::npos)
        << key;
  }
  int depth = 0;
  for (char c : json) {
    depth += (c == '{' || c == '[') - (c == '}' || c == ']');
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  std::string table = format_table(p.stats());
  EXPECT_NE(table.find("1:a \"quoted\" name"), std::string::npos) << table;
  EXPECT_NE(table.find("0:source"), std::string::npos);
}

TEST(HistogramTest, BucketsCoverEveryValueWithBoundedError) {
  for (uint64_t v : {0ull, 1ull, 7ull, 8ull, 9ull, 15ull, 16ull, 1000ull,
                     123456789ull, (1ull << 62) + 12345ull}) {
    int b = LatencyHistogram::bucket_of(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, LatencyHistogram::kNumBuckets);
    uint64_t lo = LatencyHistogram::bucket_lower_bound(b);
    EXPECT_LE(lo, v);
    if (b + 1 < LatencyHistogram::kNumBuckets) {
      uint64_t hi = LatencyHistogram::bucket_lower_bound(b + 1);
      EXPECT_LT(v, hi);
      EXPECT_LE(static_cast<double>(hi - lo),
                std::max(1.0, 0.125 * static_cast<double>(v) + 1));
    }
  }
}

TEST(HistogramTest, MergeEqualsRecordingEverythingInOne) {
  LatencyHistogram a, b, all;
  for (int i = 1; i <= 1000; ++i) {
    (i % 2 ? a : b).record(nanoseconds(i * 1000));
    all.record(nanoseconds(i * 1000));
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.sum(), all.sum());
  EXPECT_EQ(a.max(), all.max());
  for (double q : {0.0, 0.5, 0.9, 0.99, 1.0})
    EXPECT_EQ(a.quantile(q), all.quantile(q));
  EXPECT_NEAR(static_cast<double>(all.quantile(0.99).count()), 990e3,
              990e3 * 0.125);
  EXPECT_EQ(LatencyHistogram().quantile(0.5), nanoseconds(0));
}

TEST(HistogramTest, SinceEqualsRecordingOnlyTheLaterValues) {
  LatencyHistogram total, later;
  for (int i = 1; i <= 500; ++i) total.record(nanoseconds(i));
  LatencyHistogram earlier = total;
  for (int i = 1; i <= 300; ++i) {
    total.record(microseconds(i));
    later.record(microseconds(i));
  }
  LatencyHistogram lap = total.since(earlier);
  EXPECT_EQ(lap.count(), later.count());
  EXPECT_EQ(lap.sum(), later.sum());
  for (double q : {0.0, 0.5, 0.9, 0.99, 1.0})
    EXPECT_EQ(lap.quantile(q), later.quantile(q));
  EXPECT_EQ(total.since(total).count(), 0u);
}

}  // namespace
}  // namespace feedline
