// SPDX-License-Identifier: Apache-2.0
//
// Statistics: exact durations under a ManualClock, hooks, JSON, table, and
// the histogram.

#include <atomic>
#include <cmath>
#include <deque>
#include <latch>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/histogram.h"
#include "feedline/pipeline/trace.h"
#include "pipeline/channel.h"
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

// An async call is timed from its start to its completion. A worker that
// starts calls one after another timed each from before the previous start,
// so a call completed at once took as long as all the starts before it.
TEST(StatsTest, AsyncCallsAreTimedFromTheirOwnStart) {
  testing::ManualClock clock;
  struct Starts final : AsyncOp {
    explicit Starts(testing::ManualClock* c) : clock(c) {}
    void start(Item input, Completion&& done) override {
      clock->advance(milliseconds(3));  // starting costs (the GIL, say)
      done.emit(std::move(input));
    }
    testing::ManualClock* clock;
  };
  PipelineSpec spec = PipelineBuilder().add_source(iota(10)).spec();
  spec.stages.push_back({StageKind::kPipe, std::make_shared<Starts>(&clock),
                         PipeOptions{.concurrency = 4}});
  spec.sink_capacity = 16;
  Pipeline p = build_pipeline(std::move(spec),
                              BuildOptions{.num_threads = 1, .clock = &clock});
  EXPECT_EQ(drain<int>(p).size(), 10u);
  const StageStats s = p.stats().stages[1];
  EXPECT_EQ(s.op_time.count(), 10u);
  EXPECT_EQ(s.op_time.max(), milliseconds(3));
  EXPECT_EQ(s.op_time.sum(), milliseconds(30));
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

TEST(HistogramTest, ANanQuantileIsTheLowest) {
  LatencyHistogram h;
  for (int ms : {1, 2, 30}) h.record(milliseconds(ms));
  EXPECT_EQ(h.quantile(std::nan("")), h.quantile(0));
  EXPECT_EQ(h.quantile(-1), h.quantile(0));
  EXPECT_EQ(h.quantile(2), h.quantile(1));
}

TEST(StatsTest, StatsBeforeStartDoNotCountTheClocksZero) {
  // A snapshot before start() charged the queues from the clock's zero
  // (the machine's uptime) as empty time, which stayed after the start.
  testing::ManualClock clock;
  clock.advance(std::chrono::hours(10));
  auto p = PipelineBuilder()
               .add_source(iota(5))
               .pipe([](int x) { return x; })
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .clock = &clock});
  for (const StageStats& s : p.stats().stages) {
    EXPECT_EQ(s.input_queue.elapsed, nanoseconds(0)) << s.name;
    EXPECT_EQ(s.input_queue.time_empty, nanoseconds(0)) << s.name;
  }
  clock.advance(milliseconds(3));
  drain(p);
  clock.advance(milliseconds(2));
  for (const StageStats& s : p.stats().stages) {
    EXPECT_LE(s.input_queue.time_empty, s.input_queue.elapsed) << s.name;
    EXPECT_LE(s.input_queue.elapsed, milliseconds(2)) << s.name;
  }
}

TEST(ChannelTest, HandedOutEntriesAreChargedForTheirShareOfTheInterval) {
  // The sink takes all queued entries at once and hands them out one by
  // one without the lock. Each snapshot charged its interval at the depth
  // it found at its end, as if every entry handed out meanwhile had left
  // at its start: 0 entry-ms here without snapshots between. Entries handed
  // out are now charged half the interval each (the consumer reads no
  // clock per entry), within 20% of the true 100 entry-ms either way.
  for (bool snapshots_between : {false, true}) {
    detail::Channel c(4, nullptr);
    const Clock::time_point t0{std::chrono::seconds(100)};
    c.start_clock(t0);
    for (int i = 0; i < 4; ++i) c.push(detail::Entry{Item(i)}, t0);
    std::deque<detail::Entry> taken;
    c.take_all(t0, &taken);
    for (int k = 1; k <= 4; ++k) {
      c.hand_out();  // at t0 + 10 k ms
      if (snapshots_between) c.snapshot(t0 + milliseconds(10 * k + 5));
    }
    const QueueStats s = c.snapshot(t0 + milliseconds(40));
    // Held 10, 20, 30 and 40 ms: 100 entry-ms in 40 ms of 4 slots.
    EXPECT_GE(s.depth_integral, 80e6) << snapshots_between;
    EXPECT_LE(s.depth_integral, 100e6) << snapshots_between;
  }
}

TEST(StatsTest, TheClockStopsWhenTheStreamEnds) {
  // Time after the consumer read the end (before stop(), or a later
  // stats()) diluted the rates and busy fractions of the run.
  testing::ManualClock clock;
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [&](int x) {
                     clock.advance(milliseconds(1));
                     return x;
                   },
                   {.name = "work"})
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .clock = &clock});
  drain(p);
  const PipelineStats at_end = p.stats();
  EXPECT_EQ(at_end.elapsed, milliseconds(10));
  clock.advance(std::chrono::seconds(60));
  const PipelineStats later = p.stats();
  EXPECT_EQ(later.elapsed, at_end.elapsed);
  EXPECT_EQ(later.stages[1].input_queue.elapsed,
            at_end.stages[1].input_queue.elapsed);
  p.stop();
  EXPECT_EQ(p.stats().elapsed, at_end.elapsed);
}

TEST(StatsTest, ALongPipelineNameKeepsTheTablesFirstLineWhole) {
  auto p = PipelineBuilder().add_source(iota(3)).add_sink().build(
      BuildOptions{.num_threads = 1, .name = std::string(250, 'n')});
  drain(p);
  const std::string table = format_table(p.stats());
  const std::string first = table.substr(0, table.find('\n'));
  EXPECT_EQ(first.rfind("pipeline '" + std::string(250, 'n') + "': 3 items", 0),
            0u)
      << first;
  EXPECT_EQ(first.substr(first.size() - 8), "items/s)") << first;
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

// Counters from other processes are summed without wrapping around, and
// what a sum holds reads back (stats_fuzzer found both).
TEST(HistogramTest, MergeSaturatesAndRestoreAcceptsWhatMergeMakes) {
  LatencyHistogram h;
  const uint64_t low = LatencyHistogram::bucket_lower_bound(40);
  ASSERT_TRUE(LatencyHistogram::restore({{40, UINT64_MAX - 1}}, UINT64_MAX - 5,
                                        low, &h));
  h.merge(h);
  EXPECT_EQ(h.count(), UINT64_MAX);
  EXPECT_EQ(h.bucket_count(40), UINT64_MAX);
  EXPECT_EQ(static_cast<uint64_t>(h.sum().count()), UINT64_MAX);
  LatencyHistogram back;
  EXPECT_TRUE(LatencyHistogram::restore({{40, UINT64_MAX}, {40, 7}}, UINT64_MAX,
                                        low, &back));
  EXPECT_EQ(back.count(), UINT64_MAX);
  StageStats s;
  s.name = "1:summed";
  s.calls = UINT64_MAX;
  s.op_time = h;
  s.wait_input = nanoseconds::max();
  s.wait_output = nanoseconds::max();
  PipelineStats stats;
  stats.elapsed = std::chrono::seconds(1);
  stats.stages = {s};
  std::string json = to_json(stats);
  EXPECT_EQ(to_json(stats_from_json(json)), json);
  EXPECT_EQ(find_bottleneck(stats).kind, "stage");
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
         a.wait_output == b.wait_output &&
         a.gil_acquisitions == b.gil_acquisitions && a.gil_wait == b.gil_wait &&
         a.gil_held == b.gil_held && a.finished == b.finished &&
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
  stages[1].gil_acquisitions = 7;
  stages[1].gil_wait = microseconds(70);
  stages[1].gil_held = microseconds(700);
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
  a[1].gil_acquisitions = 3;
  a[1].gil_wait = microseconds(5);
  a[1].gil_held = microseconds(9);
  StageStats sum = a[1];
  accumulate(&sum, a[1]);
  EXPECT_EQ(sum.gil_acquisitions, 6u);
  EXPECT_EQ(sum.gil_wait, microseconds(10));
  EXPECT_EQ(sum.gil_held, microseconds(18));
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

// Ops that call an interpreter report their GIL time from the calling
// thread; the stage adds it up, and a report outside a call goes nowhere.
TEST(StatsTest, GilTimeReportedByCallsAddsUpPerStage) {
  EXPECT_FALSE(report_gil_time(microseconds(1), microseconds(1)));
  auto p =
      PipelineBuilder()
          .add_source(iota(10))
          .pipe(
              [](int x) {
                EXPECT_TRUE(report_gil_time(microseconds(3), microseconds(5)));
                EXPECT_TRUE(report_gil_time(microseconds(1), microseconds(1)));
                return x;
              },
              {.name = "python", .concurrency = 3})
          .pipe([](int x) { return x; }, {.name = "native"})
          .add_sink()
          .build(3);
  drain(p);
  PipelineStats s = p.stats();
  EXPECT_EQ(s.num_threads, 3);
  EXPECT_EQ(s.stages[1].gil_acquisitions, 20u);
  EXPECT_EQ(s.stages[1].gil_wait, microseconds(40));
  EXPECT_EQ(s.stages[1].gil_held, microseconds(60));
  EXPECT_EQ(s.stages[2].gil_acquisitions, 0u);
  std::string json = to_json(s);
  for (const char* key :
       {"\"gil_wait_s\"", "\"gil_held_s\"", "\"gil_acquisitions\":20",
        "\"num_threads\":3", "\"bottleneck\":{\"kind\":"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  std::string table = format_table(s);
  EXPECT_NE(table.find("gil_wait"), std::string::npos) << table;
  EXPECT_NE(table.find("bottleneck: "), std::string::npos) << table;
}

// Synthetic snapshots, one per verdict of find_bottleneck().
class BottleneckTest : public ::testing::Test {
 protected:
  // source -> a -> b -> sink over 10 s on 8 threads; every stage idle.
  BottleneckTest() {
    stats_.num_threads = 8;
    stats_.elapsed = std::chrono::seconds(10);
    for (const char* kind : {"source", "pipe", "pipe", "sink"}) {
      StageStats s;
      s.name = std::to_string(stats_.stages.size()) + ":" + kind;
      s.kind = kind;
      s.calls = 100;
      s.items_in = s.items_out = 100;
      s.input_queue.capacity = 4;
      s.input_queue.elapsed = stats_.elapsed;
      stats_.stages.push_back(s);
    }
    stats_.stages[1].concurrency = 4;
    stats_.stages[2].concurrency = 2;
  }
  // `seconds` of calls on stage `i`, in 100 calls.
  void busy(int i, double seconds) {
    LatencyHistogram& h = stats_.stages[i].op_time;
    h = LatencyHistogram();
    for (int k = 0; k < 100; ++k) {
      h.record(nanoseconds(static_cast<int64_t>(seconds * 1e7)));
    }
  }
  // Both pipes look saturated (their calls include the waits for the GIL),
  // but the GIL was held 95% of the time and calls queued 5 s/s for it.
  void gil_bound() {
    busy(1, 39.0);
    busy(2, 19.5);
    for (int i : {1, 2}) stats_.stages[i].gil_acquisitions = 100;
    stats_.stages[1].gil_held = std::chrono::milliseconds(6500);
    stats_.stages[1].gil_wait = std::chrono::seconds(30);
    stats_.stages[2].gil_held = std::chrono::milliseconds(3000);
    stats_.stages[2].gil_wait = std::chrono::seconds(20);
  }
  // The pipeline kept up: the consumer waited for items 1% of the time and
  // the sink queue was 90% full.
  void consumer_kept_up() {
    StageStats& sink = stats_.stages[3];
    sink.wait_input = std::chrono::milliseconds(100);
    sink.input_queue.depth_integral =
        0.9 * 4 * static_cast<double>(stats_.elapsed.count());
  }
  PipelineStats stats_;
};

TEST_F(BottleneckTest, NothingRanYet) {
  PipelineStats empty;
  EXPECT_EQ(find_bottleneck(empty).kind, "none");
  EXPECT_EQ(find_bottleneck(empty).stage, -1);
  for (StageStats& s : stats_.stages) s.calls = 0;
  EXPECT_EQ(find_bottleneck(stats_).kind, "none");
}

TEST_F(BottleneckTest, TheStageAtItsConcurrency) {
  busy(0, 1.0);
  busy(1, 39.0);  // 3.9 of 4 threads
  busy(2, 6.0);   // 0.6 of 2
  stats_.stages[0].wait_output = std::chrono::seconds(8);
  stats_.stages[2].wait_input = std::chrono::seconds(5);
  Bottleneck b = find_bottleneck(stats_);
  EXPECT_EQ(b.kind, "stage");
  EXPECT_EQ(b.stage, 1);
  EXPECT_EQ(b.stage_name, "1:pipe");
  EXPECT_NE(b.reason.find("busy 3.90 of 4 threads (98%)"), std::string::npos)
      << b.reason;
  EXPECT_NE(b.advice.find("raise its concurrency (4)"), std::string::npos)
      << b.advice;
}

TEST_F(BottleneckTest, TheSource) {
  busy(0, 9.8);
  busy(1, 4.0);
  Bottleneck b = find_bottleneck(stats_);
  EXPECT_EQ(b.kind, "stage");
  EXPECT_EQ(b.stage, 0);
  EXPECT_NE(b.advice.find("source"), std::string::npos) << b.advice;
}

TEST_F(BottleneckTest, TheConsumer) {
  busy(1, 39.0);
  consumer_kept_up();
  Bottleneck b = find_bottleneck(stats_);
  EXPECT_EQ(b.kind, "consumer");
  EXPECT_EQ(b.stage, -1);
  EXPECT_NE(b.reason.find("90% full"), std::string::npos) << b.reason;
}

TEST_F(BottleneckTest, ThePoolsThreads) {
  // 7.2 of 8 threads busy, no stage at its concurrency.
  stats_.stages[1].concurrency = 16;
  stats_.stages[2].concurrency = 16;
  busy(0, 2.0);
  busy(1, 50.0);
  busy(2, 20.0);
  Bottleneck b = find_bottleneck(stats_);
  EXPECT_EQ(b.kind, "threads");
  EXPECT_EQ(b.stage, 1);
  EXPECT_NE(b.reason.find("8 threads were 90% busy"), std::string::npos)
      << b.reason;
}

TEST_F(BottleneckTest, TheGilAheadOfBusyThreads) {
  gil_bound();
  Bottleneck b = find_bottleneck(stats_);
  EXPECT_EQ(b.kind, "gil");
  EXPECT_EQ(b.stage, 1);
  EXPECT_NE(b.reason.find("held the GIL 95%"), std::string::npos) << b.reason;
  EXPECT_NE(b.advice.find("ProcessPoolExecutorConfig"), std::string::npos);
  // The same calls with little waiting: one Python stage at its
  // concurrency, not the GIL.
  stats_.stages[1].gil_wait = std::chrono::milliseconds(100);
  stats_.stages[2].gil_wait = std::chrono::milliseconds(100);
  b = find_bottleneck(stats_);
  EXPECT_EQ(b.kind, "stage");
  EXPECT_EQ(b.stage, 1);
}

TEST_F(BottleneckTest, TheGilAheadOfAConsumerItHeldBack) {
  // The sink queue was full and the consumer barely waited for items, but
  // it waited 6 of the 10 s to retake the GIL with them: the Python stages
  // that held it set its pace, not the consumer's own work.
  gil_bound();
  consumer_kept_up();
  StageStats& sink = stats_.stages[3];
  sink.gil_acquisitions = 100;
  sink.gil_wait = std::chrono::seconds(6);
  Bottleneck b = find_bottleneck(stats_);
  EXPECT_EQ(b.kind, "gil") << b.reason;
  EXPECT_EQ(b.stage, 1);
  // A consumer that took the GIL at once is the pace-setter again.
  sink.gil_wait = std::chrono::milliseconds(50);
  EXPECT_EQ(find_bottleneck(stats_).kind, "consumer");
}

// The consumer's waits to resume after each item are the sink's GIL figures.
TEST(StatsTest, TheConsumersGilWaitsAreTheSinks) {
  auto p = PipelineBuilder().add_source(iota(3)).add_sink(4).build(1);
  int items = 0;
  while (p.next()) {
    ++items;
    p.untyped().report_consumer_gil_wait(milliseconds(2));
  }
  EXPECT_EQ(items, 3);
  StageStats sink = p.stats().stages.back();
  EXPECT_EQ(sink.gil_acquisitions, 3u);
  EXPECT_EQ(sink.gil_wait, milliseconds(6));
  EXPECT_EQ(sink.gil_held, nanoseconds(0));
}

// What to_json() writes reads back: the same JSON, the same table.
TEST(StatsJsonTest, ReadsBackWhatToJsonWrites) {
  PipelineStats stats;
  {
    auto p = PipelineBuilder()
                 .add_source(iota(60))
                 .pipe(
                     [](int x) {
                       if (x % 7 == 3) throw std::runtime_error("bad");
                       return x;
                     },
                     {.name = "a \"quoted\"\tname", .concurrency = 2})
                 .add_sink(4)
                 .build(2);
    drain(p);
    stats = p.stats();
  }
  stats.stages[1].gil_acquisitions = 5;
  stats.stages[1].gil_wait = microseconds(1234567);
  stats.stages[1].gil_held = nanoseconds(987654321);
  stats.regions.push_back(
      RegionStats{"region0", 1, 2, 1, {stats.stages[1], stats.stages[2]}});
  std::string json = to_json(stats);
  PipelineStats back = stats_from_json(json);
  EXPECT_EQ(to_json(back), json);
  EXPECT_EQ(format_table(back), format_table(stats));
  ASSERT_EQ(back.stages.size(), stats.stages.size());
  EXPECT_EQ(back.stages[1].name, "1:a \"quoted\"\tname[2]");
  EXPECT_EQ(back.stages[1].op_time.count(), stats.stages[1].op_time.count());
  EXPECT_EQ(back.stages[1].op_time.sum(), stats.stages[1].op_time.sum());
  EXPECT_EQ(back.stages[1].op_time.quantile(0.9),
            stats.stages[1].op_time.quantile(0.9));
  EXPECT_EQ(back.stages[1].failures, stats.stages[1].failures);
  EXPECT_EQ(back.stages[1].gil_held, nanoseconds(987654321));
  EXPECT_EQ(back.num_threads, 2);
  EXPECT_EQ(back.regions.at(0).host_stage, 1);
  EXPECT_EQ(find_bottleneck(back).stage_name,
            find_bottleneck(stats).stage_name);
  // Whitespace between tokens is fine; \u escapes decode to UTF-8.
  PipelineStats spaced =
      stats_from_json(" " + json.substr(0, json.size() - 1) + " } \n");
  EXPECT_EQ(spaced.stages.size(), stats.stages.size());
  std::string named = json;
  named.replace(named.find("\"name\":\"pipeline\""), 17,
                "\"name\":\"p\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(stats_from_json(named).name, "p\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(StatsJsonTest, EveryBadRecordIsAFormatErrorNamingTheField) {
  PipelineStats stats;
  {
    auto p = PipelineBuilder().add_source(iota(5)).add_sink(1).build(1);
    drain(p);
    stats = p.stats();
  }
  const std::string json = to_json(stats);
  for (std::size_t n = 0; n < json.size(); ++n) {
    EXPECT_THROW(stats_from_json(json.substr(0, n)), FormatError) << n;
  }
  auto message = [](const std::string& bad) -> std::string {
    try {
      (void)stats_from_json(bad);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "no error";
  };
  auto replace = [&json](const std::string& from, const std::string& to) {
    std::string out = json;
    std::size_t at = out.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return out.replace(at, from.size(), to);
  };
  EXPECT_NE(message(replace("\"calls\":5", "\"calls\":-5"))
                .find("stages[0].calls is not a whole number"),
            std::string::npos);
  EXPECT_NE(message(replace("\"calls\":5", "\"calls\":\"5\""))
                .find("stages[0].calls"),
            std::string::npos);
  EXPECT_NE(message(replace("\"kind\":\"sink\",", ""))
                .find("stages[1] has no \"kind\""),
            std::string::npos);
  EXPECT_NE(message(replace("\"op_time_max_ns\":", "\"op_time_max_ns\":9"))
                .find("not a consistent histogram"),
            std::string::npos);
  EXPECT_NE(message(json + "x").find("text after"), std::string::npos);
  EXPECT_NE(message("[1e999]").find("bad number"), std::string::npos);
  EXPECT_NE(message("\"\\ud800\"").find("surrogate"), std::string::npos);
  EXPECT_NE(message(std::string(40, '[') + std::string(40, ']'))
                .find("deeper than 32"),
            std::string::npos);
  EXPECT_NE(message("[1,2]").find("is not an object"), std::string::npos);
  EXPECT_EQ(message(json), "no error");
}

// Tracing: one call in every N of each stage, on the thread that ran it,
// written as the Trace Event Format; nothing at all when off.
TEST(TraceTest, SamplesOneCallInNPerStageAndWritesTraceEvents) {
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe([](int x) { return x; }, {.name = "a", .concurrency = 2})
               .pipe(
                   [](int x) {
                     if (x == 30) throw std::runtime_error("bad");
                     return x;
                   },
                   {.name = "b"})
               .add_sink()
               .build(BuildOptions{.num_threads = 2, .trace_every = 10});
  drain(p);
  Trace t = p.trace();
  EXPECT_EQ(t.every, 10);
  int per_stage[4] = {0, 0, 0, 0};
  for (const TraceEvent& e : t.events) {
    ASSERT_GE(e.stage, 0);
    ASSERT_LT(e.stage, 3);  // the sink runs no calls
    ++per_stage[e.stage];
    EXPECT_GE(e.thread, 1);
    EXPECT_FALSE(e.async);
    EXPECT_GE(e.duration.count(), 0);
  }
  // Calls 0, 10, ..., 90 of each stage (the source's 100 pulls too).
  EXPECT_EQ(per_stage[0], 10);
  EXPECT_EQ(per_stage[1], 10);
  EXPECT_EQ(per_stage[2], 10);
  EXPECT_EQ(t.recorded, 30u);
  EXPECT_EQ(t.dropped, 0u);
  std::string json = to_trace_json(t, p.stats());
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  for (const char* key :
       {"\"traceEvents\":[", "\"ph\":\"X\"", "\"name\":\"1:a[2]\"",
        "\"name\":\"thread_name\"", "\"feedline_trace_every\":10",
        "\"displayTimeUnit\":\"ms\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
  // Off: nothing is recorded.
  auto off = PipelineBuilder().add_source(iota(10)).add_sink().build(1);
  drain(off);
  EXPECT_EQ(off.trace().every, 0);
  EXPECT_TRUE(off.trace().events.empty());
}

TEST(TraceTest, TimesAreExactMicrosecondsHoweverLongTheRun) {
  // 9 significant digits rounded a day's 8.64e10 us to 100 us.
  Trace t;
  t.every = 1;
  t.events.push_back(
      TraceEvent{.stage = 0,
                 .thread = 1,
                 .start = std::chrono::seconds(86400) + nanoseconds(12345),
                 .duration = nanoseconds(1500)});
  auto p = PipelineBuilder().add_source(iota(1)).add_sink().build(1);
  drain(p);
  const std::string json = to_trace_json(t, p.stats());
  EXPECT_NE(json.find("\"ts\":86400000012.345"), std::string::npos) << json;
  EXPECT_NE(json.find("\"dur\":1.500"), std::string::npos) << json;
}

TEST(TraceTest, KeepsTheLatestEventsUpToItsCapacity) {
  auto p = PipelineBuilder().add_source(iota(50)).add_sink().build(
      BuildOptions{.num_threads = 1, .trace_every = 1, .trace_capacity = 8});
  drain(p);
  Trace t = p.trace();
  EXPECT_EQ(t.recorded, 50u);
  EXPECT_EQ(t.dropped, 42u);
  ASSERT_EQ(t.events.size(), 8u);
  for (std::size_t i = 1; i < t.events.size(); ++i) {
    EXPECT_LE(t.events[i - 1].start, t.events[i].start);  // oldest first
  }
}

}  // namespace
}  // namespace feedline
