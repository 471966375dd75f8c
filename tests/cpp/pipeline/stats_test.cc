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

// A finished run's stages, with every counter and histogram filled in.
std::vector<StageStats> sample_stages() {
  auto p = PipelineBuilder()
               .add_source(iota(50))
               .pipe([](int x) { return x * 2; },
                     {.name = "double", .concurrency = 2})
               .add_sink()
               .build(2);
  drain(p);
  return p.stats().stages;
}

bool same_stage(const StageStats& a, const StageStats& b) {
  for (double q : {0.0, 0.5, 0.99, 1.0}) {
    if (a.op_time.quantile(q) != b.op_time.quantile(q)) return false;
  }
  const QueueStats& x = a.input_queue;
  const QueueStats& y = b.input_queue;
  return a.name == b.name && a.kind == b.kind &&
         a.concurrency == b.concurrency && a.items_in == b.items_in &&
         a.items_out == b.items_out && a.items_skipped == b.items_skipped &&
         a.calls == b.calls && a.failures == b.failures &&
         a.epochs == b.epochs && a.op_time.count() == b.op_time.count() &&
         a.op_time.sum() == b.op_time.sum() &&
         a.op_time.max() == b.op_time.max() && a.wait_input == b.wait_input &&
         a.wait_output == b.wait_output && a.finished == b.finished &&
         a.failed == b.failed && x.capacity == y.capacity &&
         x.depth == y.depth && x.max_depth == y.max_depth &&
         x.items_put == y.items_put && x.items_got == y.items_got &&
         x.depth_integral == y.depth_integral && x.time_empty == y.time_empty &&
         x.time_full == y.time_full && x.elapsed == y.elapsed &&
         x.put_wait == y.put_wait && x.get_wait == y.get_wait;
}

TEST(StageStatsRecordTest, RoundTripsEveryField) {
  std::vector<StageStats> stages = sample_stages();
  stages[1].failed = true;
  stages[1].items_skipped = 3;
  std::vector<StageStats> back = decode_stage_stats(encode_stage_stats(stages));
  ASSERT_EQ(back.size(), stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i) {
    EXPECT_TRUE(same_stage(back[i], stages[i])) << i;
  }
  EXPECT_TRUE(decode_stage_stats(encode_stage_stats({})).empty());
}

TEST(StageStatsRecordTest, EveryDamagedRecordIsAFormatError) {
  std::string record = encode_stage_stats(sample_stages());
  // Every truncation, and a byte more.
  for (std::size_t n = 0; n < record.size(); ++n) {
    EXPECT_THROW(decode_stage_stats(record.substr(0, n)), FormatError) << n;
  }
  EXPECT_THROW(decode_stage_stats(record + "x"), FormatError);
  // Every single byte flipped: a clear error or a record that decodes; never
  // a crash (ASan runs this too).
  for (std::size_t i = 0; i < record.size(); ++i) {
    std::string bad = record;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    try {
      decode_stage_stats(bad);
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("stage statistics record"),
                std::string::npos);
    }
  }
  std::string wrong_magic = record;
  wrong_magic[0] = 'X';
  EXPECT_THROW(decode_stage_stats(wrong_magic), FormatError);
}

TEST(StageStatsRecordTest, AccumulateSumsWorkers) {
  std::vector<StageStats> a = sample_stages();
  StageStats sum = a[1];
  accumulate(&sum, a[1]);
  EXPECT_EQ(sum.items_in, 2 * a[1].items_in);
  EXPECT_EQ(sum.calls, 2 * a[1].calls);
  EXPECT_EQ(sum.concurrency, 2 * a[1].concurrency);
  EXPECT_EQ(sum.op_time.count(), 2 * a[1].op_time.count());
  EXPECT_EQ(sum.op_time.max(), a[1].op_time.max());
  EXPECT_EQ(sum.input_queue.capacity, 2 * a[1].input_queue.capacity);
  EXPECT_EQ(sum.input_queue.elapsed, a[1].input_queue.elapsed);
  EXPECT_TRUE(sum.finished);
  StageStats unfinished = a[1];
  unfinished.finished = false;
  unfinished.failed = true;
  accumulate(&sum, unfinished);
  EXPECT_FALSE(sum.finished);
  EXPECT_TRUE(sum.failed);
  // Sums saturate instead of overflowing (the counters come from another
  // process).
  StageStats huge = a[1];
  huge.wait_input = nanoseconds::max();
  huge.items_in = UINT64_MAX;
  accumulate(&huge, huge);
  EXPECT_EQ(huge.wait_input, nanoseconds::max());
  EXPECT_EQ(huge.items_in, UINT64_MAX);
}

TEST(StatsTest, ReportedRegionsFollowTheirHostStage) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe([](int x) { return x; }, {.name = "host"})
               .add_sink()
               .build(2);
  std::vector<StageStats> worker = sample_stages();
  std::vector<StageStats> region(worker.begin() + 1, worker.end() - 1);
  EXPECT_THROW(p.untyped().report_region("region0", 1, 2, 2, region),
               InvalidArgument);
  EXPECT_THROW(p.untyped().report_region("region0", 7, 0, 2, region),
               InvalidArgument);
  p.untyped().report_region("region0", 1, 0, 2, region);
  PipelineStats s = p.stats();
  ASSERT_EQ(s.regions.size(), 1u);
  EXPECT_EQ(s.regions[0].workers, 2);
  EXPECT_EQ(s.regions[0].reporting, 1);
  EXPECT_EQ(s.regions[0].stages[0].items_out, 50u);
  // The second worker's counters add up; a newer report replaces the older.
  p.untyped().report_region("region0", 1, 1, 2, region);
  p.untyped().report_region("region0", 1, 1, 2, region);
  s = p.stats();
  EXPECT_EQ(s.regions[0].reporting, 2);
  EXPECT_EQ(s.regions[0].stages[0].items_out, 100u);
  std::string table = format_table(s);
  std::size_t host = table.find("1:host");
  std::size_t nested = table.find("  region0/1:double[2]");
  std::size_t sink = table.find("2:sink");
  ASSERT_NE(nested, std::string::npos) << table;
  EXPECT_LT(host, nested);
  EXPECT_LT(nested, sink);
  std::string json = to_json(s);
  EXPECT_NE(json.find("\"regions\":[{\"name\":\"region0\",\"host_stage\":1"),
            std::string::npos)
      << json;
  // The final statistics keep the regions.
  drain(p);
  EXPECT_EQ(p.stats().regions.size(), 1u);
}

}  // namespace
}  // namespace feedline
