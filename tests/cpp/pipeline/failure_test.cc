// SPDX-License-Identifier: Apache-2.0
//
// Failure budgets, rate-limited failure logs, and how a failed stage ends the
// pipeline: upstream cancelled, downstream drained, PipelineFailure last.

#include <algorithm>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/builder.h"
#include "testing/manual_clock.h"
#include "testing/pipeline_testing.h"
#include "testing/test_ops.h"

namespace feedline {
namespace {

using testing::drain;
using testing::iota;

// Reads items into `*got` until the pipeline throws; returns the failure,
// or nothing if it ended normally.
std::optional<PipelineFailure> read_until_failure(TypedPipeline<int>& p,
                                                  std::vector<int>* got) {
  try {
    while (auto x = p.next()) got->push_back(*x);
  } catch (const PipelineFailure& e) {
    return e;
  }
  return std::nullopt;
}

int fail_on_odd(int x) {
  if (x % 2) throw std::runtime_error("odd item " + std::to_string(x));
  return x;
}

TEST(FailureTest, CountBudgetFailsThePipelineAfterTheDrainedItems) {
  // 1, 3, 5 fail within budget; 7 is the 4th failure > 3.
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(fail_on_odd, {.name = "check",
                                   .max_failures = FailureBudget::max_count(3)})
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
  std::vector<int> got;
  std::optional<PipelineFailure> failure = read_until_failure(p, &got);
  ASSERT_TRUE(failure);
  {
    const PipelineFailure& e = *failure;
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0].stage, "1:check");
    EXPECT_NE(e.errors()[0].message.find("failed 4 of"), std::string::npos)
        << e.errors()[0].message;
    EXPECT_NE(e.errors()[0].message.find("odd item 7"), std::string::npos);
    EXPECT_THROW(std::rethrow_exception(e.errors()[0].error), TooManyFailures);
    // The call that tripped the budget is kept as the cause.
    try {
      std::rethrow_exception(e.errors()[0].error);
    } catch (const TooManyFailures& tmf) {
      ASSERT_TRUE(tmf.last_error());
      EXPECT_EQ(describe(tmf.last_error()), "odd item 7");
    }
  }
  EXPECT_EQ(got, (std::vector<int>{0, 2, 4, 6}));
  // Every later read fails the same way; stop() does not throw.
  EXPECT_THROW(p.next(), PipelineFailure);
  p.stop();
  EXPECT_TRUE(p.stats().stages[1].failed);
}

TEST(FailureTest, ZeroBudgetFailsOnTheFirstError) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(fail_on_odd, {.max_failures = FailureBudget::max_count(0)})
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
  std::vector<int> got;
  EXPECT_THROW(
      {
        while (auto x = p.next()) got.push_back(*x);
      },
      PipelineFailure);
  EXPECT_EQ(got, (std::vector<int>{0}));
}

TEST(FailureTest, UnlimitedByDefault) {
  auto p = PipelineBuilder()
               .add_source(iota(1000))
               .pipe(fail_on_odd, {.concurrency = 3})
               .add_sink()
               .build(BuildOptions{.num_threads = 2, .failure_log_burst = 0});
  EXPECT_EQ(drain(p).size(), 500u);
  EXPECT_EQ(p.stats().stages[1].failures, 500u);
  EXPECT_EQ(p.untyped().failure(), nullptr);
}

TEST(FailureTest, RateBudgetWaitsForProbationThenCompares) {
  FailureBudget b = FailureBudget::max_rate(1, 10, 100);
  EXPECT_FALSE(b.exceeded(50, 99));   // still on probation
  EXPECT_FALSE(b.exceeded(10, 100));  // exactly 10%: not more
  EXPECT_TRUE(b.exceeded(11, 100));
  EXPECT_FALSE(FailureBudget::max_rate(1, 1).exceeded(1000, 1000));
  EXPECT_THROW(FailureBudget::max_rate(0, 1), InvalidArgument);
  EXPECT_THROW(FailureBudget::max_rate(3, 2), InvalidArgument);
  EXPECT_EQ(b.to_string(), "10.0% after 100 calls");

  // 5% failing never trips a 10% budget; 20% does.
  for (int every : {20, 5}) {
    auto p = PipelineBuilder()
                 .add_source(iota(2000))
                 .pipe(
                     [every](int x) {
                       if (x % every == 0) throw std::runtime_error("bad");
                       return x;
                     },
                     {.max_failures = b})
                 .add_sink()
                 .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
    if (every == 20) {
      EXPECT_EQ(drain(p).size(), 1900u);
    } else {
      EXPECT_THROW(drain(p), PipelineFailure);
      EXPECT_LT(p.stats().stages[1].calls, 2000u);  // stopped early
    }
  }
}

TEST(FailureTest, PipelineWideRateCountsOpCallsNotSourcePulls) {
  // 20% of calls fail. The 10% budget may only be checked once the op has
  // made 100 calls: source pulls are not calls it applies to.
  auto p =
      PipelineBuilder()
          .add_source(iota(500))
          .pipe([](int x) {
            if (x % 5 == 0) throw std::runtime_error("bad");
            return x;
          })
          .add_sink()
          .build(BuildOptions{.num_threads = 1,
                              .max_failures = FailureBudget::max_rate(1, 10),
                              .failure_log_burst = 0});
  std::vector<int> got;
  std::optional<PipelineFailure> failure = read_until_failure(p, &got);
  ASSERT_TRUE(failure);
  EXPECT_GE(p.stats().stages[1].calls, 100u);
  EXPECT_GE(got.size(), 80u);
  EXPECT_NE(failure->errors()[0].message.find("failures of 1"),
            std::string::npos)
      << failure->errors()[0].message;
}

TEST(FailureTest, PipelineWideBudgetIsSharedByStagesWithoutTheirOwn) {
  // Two stages fail 2 items each: 4 > 3 only when counted together.
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe([](int x) {
                 if (x == 1 || x == 2) throw std::runtime_error("a");
                 return x;
               })
               .pipe([](int x) {
                 if (x == 5 || x == 6) throw std::runtime_error("b");
                 return x;
               })
               .add_sink()
               .build(BuildOptions{.num_threads = 1,
                                   .max_failures = FailureBudget::max_count(3),
                                   .failure_log_burst = 0});
  EXPECT_THROW(drain(p), PipelineFailure);
}

TEST(FailureTest, SourceExceptionDeliversEarlierItemsThenFails) {
  struct Breaks final : ItemSource {
    int i = 0;
    bool next(Item* out) override {
      if (i == 3) throw IoError("listing.txt: read failed");
      *out = Item(i++);
      return true;
    }
  };
  auto p = PipelineBuilder()
               .add_source<int>([]() -> std::unique_ptr<ItemSource> {
                 return std::make_unique<Breaks>();
               })
               .add_sink()
               .build(2);
  std::vector<int> got;
  std::optional<PipelineFailure> failure = read_until_failure(p, &got);
  ASSERT_TRUE(failure);
  {
    const PipelineFailure& e = *failure;
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0].stage, "0:source");
    EXPECT_THROW(std::rethrow_exception(e.errors()[0].error), IoError);
    EXPECT_NE(std::string(e.what()).find("listing.txt"), std::string::npos);
  }
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
}

TEST(FailureTest, DownstreamFailureCancelsUpstreamOfAnEndlessSource) {
  // The source never ends; the failure must still reach the consumer.
  auto p = PipelineBuilder()
               .add_source(iota(100), {.continuous = true})
               .pipe(fail_on_odd, {.max_failures = FailureBudget::max_count(2)})
               .add_sink()
               .build(BuildOptions{.num_threads = 2, .failure_log_burst = 0});
  EXPECT_THROW(
      {
        for (;;) {
          Item item;
          p.untyped().next(&item);
        }
      },
      PipelineFailure);
  // The failed stage closed its output, so the consumer saw the failure even
  // though the source never ends. The cancelled source may still be leaving
  // its last pull; stop() waits for that.
  p.stop();
  for (const StageStats& s : p.stats().stages)
    EXPECT_TRUE(s.finished) << s.name;
  EXPECT_TRUE(p.stats().stages[1].failed);
}

TEST(FailureTest, LogsTheFirstFailuresThenSummariesNotOneLinePerItem) {
  testing::LogCapture logs;
  testing::ManualClock clock;
  auto p =
      PipelineBuilder()
          .add_source(iota(20000))
          .pipe([&clock](int x) -> int {
            if (x == 10000) clock.advance(std::chrono::seconds(11));
            throw std::runtime_error("bad " + std::to_string(x));
          })
          .add_sink()
          .build(BuildOptions{.num_threads = 1,
                              .failure_log_burst = 5,
                              .failure_log_interval = std::chrono::seconds(10),
                              .clock = &clock});
  // Every call failed: the end is a failure, whatever the budget.
  EXPECT_THROW(drain(p), PipelineFailure);
  std::vector<std::string> lines = logs.lines();
  // 5 in full, one summary once 10 s have passed, one final summary.
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_NE(lines[0].find("bad 0"), std::string::npos);
  EXPECT_NE(lines[4].find("summarised"), std::string::npos);
  EXPECT_NE(lines[5].find("more failures"), std::string::npos);
  EXPECT_NE(lines[6].find("more failures (20000 in total)"), std::string::npos)
      << lines[6];
}

TEST(FailureTest, AsyncOpThatDropsItsCompletionIsAFailureNotAHang) {
  struct Drops final : AsyncOp {
    void start(Item, Completion&&) override {}  // never completes
  };
  PipelineSpec spec = PipelineBuilder().add_source(iota(5)).spec();
  spec.stages.push_back(
      {StageKind::kPipe, std::make_shared<Drops>(), PipeOptions{}});
  spec.sink_capacity = 2;
  Pipeline p = build_pipeline(
      std::move(spec), BuildOptions{.num_threads = 2, .failure_log_burst = 0});
  EXPECT_THROW(drain<int>(p), PipelineFailure);  // every call failed
  EXPECT_EQ(p.stats().stages[1].failures, 5u);
}

TEST(FailureTest, AsyncOpThatThrowsSynchronouslyReportsItsOwnError) {
  struct Throws final : AsyncOp {
    void start(Item, Completion&&) override { throw DecodeError("x.jpg: bad"); }
  };
  testing::LogCapture logs;
  PipelineSpec spec = PipelineBuilder().add_source(iota(2)).spec();
  spec.stages.push_back(
      {StageKind::kPipe, std::make_shared<Throws>(), PipeOptions{}});
  spec.sink_capacity = 2;
  Pipeline p = build_pipeline(std::move(spec), BuildOptions{.num_threads = 1});
  EXPECT_THROW(drain<int>(p), PipelineFailure);  // every call failed
  ASSERT_FALSE(logs.lines().empty());
  EXPECT_NE(logs.lines()[0].find("x.jpg: bad"), std::string::npos);
}

TEST(FailureTest, AsyncOpThatThrowsAfterCompletingIsLoggedOnceNotDropped) {
  struct EmitsThenThrows final : AsyncOp {
    void start(Item input, Completion&& done) override {
      done.emit(std::move(input));
      throw DecodeError("late trouble");
    }
  };
  testing::LogCapture logs;
  PipelineSpec spec = PipelineBuilder().add_source(iota(3)).spec();
  spec.stages.push_back(
      {StageKind::kPipe, std::make_shared<EmitsThenThrows>(), PipeOptions{}});
  spec.sink_capacity = 4;
  Pipeline p = build_pipeline(std::move(spec), BuildOptions{.num_threads = 1});
  std::vector<int> got = drain<int>(p);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));  // the results stand
  EXPECT_EQ(p.stats().stages[1].failures, 0u);
  const std::vector<std::string> lines = logs.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("threw after completing its call"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("late trouble"), std::string::npos) << lines[0];
}

TEST(FailureTest, CallsThatFailBecauseOfStopAreCountedButNotReported) {
  // The async call gives up when the stop token fires, as a well-behaved op
  // does; stop() cancels the stages first, so that is not an error to log.
  struct GivesUpOnStop final : AsyncOp {
    std::latch started{1};
    std::optional<Completion> pending;
    std::optional<std::stop_callback<std::function<void()>>> on_stop;
    void start(Item, Completion&& done) override {
      pending.emplace(std::move(done));
      on_stop.emplace(
          pending->stop_token(), std::function<void()>([this] {
            pending->fail(std::make_exception_ptr(Cancelled("gave up")));
          }));
      started.count_down();
    }
  };
  auto op = std::make_shared<GivesUpOnStop>();
  testing::LogCapture logs;
  PipelineSpec spec = PipelineBuilder().add_source(iota(1)).spec();
  spec.stages.push_back({StageKind::kPipe, op, PipeOptions{}});
  spec.sink_capacity = 2;
  Pipeline p = build_pipeline(std::move(spec), BuildOptions{.num_threads = 1});
  p.start();
  op->started.wait();
  p.stop();
  EXPECT_EQ(p.stats().stages[1].failures, 1u);
  EXPECT_TRUE(logs.lines().empty()) << logs.lines()[0];
  EXPECT_FALSE(p.failure());
}

}  // namespace
}  // namespace feedline
