// SPDX-License-Identifier: Apache-2.0
//
// Stopping: stop with a deadline while an op is stuck, repeated and
// concurrent stops, stops from the pipeline's own pool threads, destruction
// during a stop, wait_next()'s timeout and interrupt statuses, and what
// survives the stop
// (final statistics, the failure) and what does not (the ops).

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/builder.h"
#include "testing/pipeline_testing.h"
#include "testing/test_ops.h"

namespace feedline {
namespace {

using std::chrono::milliseconds;
using testing::drain;
using testing::Gate;
using testing::iota;

// Opens `gate` when destroyed: tells a test that whatever holds it is gone.
struct OpensOnDestruction {
  explicit OpensOnDestruction(std::shared_ptr<Gate> g) : gate(std::move(g)) {}
  ~OpensOnDestruction() { gate->open(); }
  std::shared_ptr<Gate> gate;
};

// A map stage whose first call opens `entered`, then waits for `release`.
// `released` opens once the op itself is destroyed.
struct HeldOp {
  std::shared_ptr<Gate> entered = std::make_shared<Gate>();
  std::shared_ptr<Gate> release = std::make_shared<Gate>();
  std::shared_ptr<Gate> released = std::make_shared<Gate>();

  TypedPipeline<int> build(int items = 3, int threads = 2) {
    auto token = std::make_shared<OpensOnDestruction>(released);
    return PipelineBuilder()
        .add_source(iota(items))
        .pipe([entered = entered, release = release, token](int x) {
          entered->open();
          release->wait();
          return x;
        })
        .add_sink()
        .build(threads);
  }
};

TEST(StopTest, StopWithADeadlineReturnsWhileAnOpIsStuck) {
  int threads_before = ThreadPool::live_threads();
  HeldOp held;
  auto p = held.build();
  p.untyped().start();
  held.entered->wait();
  EXPECT_FALSE(p.untyped().stopping());
  EXPECT_FALSE(p.untyped().stop(milliseconds(0)));
  EXPECT_FALSE(p.untyped().stop(milliseconds(5)));  // the same stop
  EXPECT_TRUE(p.untyped().stopping());
  held.release->open();
  p.untyped().stop();  // waits for the stop that is under way
  EXPECT_TRUE(p.untyped().stop(milliseconds(0)));
  EXPECT_EQ(ThreadPool::live_threads(), threads_before);
  Item item;
  EXPECT_EQ(p.untyped().wait_next(&item), NextStatus::kEnd);
}

TEST(StopTest, RepeatedAndConcurrentStopsAllSeeTheSameStop) {
  HeldOp held;
  auto p = held.build();
  p.untyped().start();
  held.entered->wait();
  std::atomic<int> done{0};
  std::vector<std::jthread> stoppers;
  for (int i = 0; i < 4; ++i) {
    stoppers.emplace_back([&, i] {
      if (i % 2 == 0) {
        p.untyped().stop();
        done.fetch_add(1);
      } else {
        // Polls with short deadlines until the stop completes.
        while (!p.untyped().stop(milliseconds(1))) {
        }
        done.fetch_add(1);
      }
    });
  }
  EXPECT_FALSE(p.untyped().stop(milliseconds(0)));
  held.release->open();
  for (auto& t : stoppers) t.join();
  EXPECT_EQ(done.load(), 4);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(p.untyped().stop(milliseconds(0)));
  p.untyped().stop();
}

TEST(StopTest, StopOnAPoolThreadNeverWaits) {
  int threads_before = ThreadPool::live_threads();
  std::atomic<Pipeline*> self{nullptr};
  std::atomic<int> timed_result{-1};
  std::atomic<bool> blocking_returned{false};
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe([&](int x) {
                 if (x == 0) {
                   // Both would deadlock if they waited: the stop joins this
                   // very thread.
                   timed_result = self.load()->stop(std::chrono::hours(1));
                   self.load()->stop();
                   blocking_returned = true;
                 }
                 return x;
               })
               .add_sink()
               .build(2);
  self = &p.untyped();
  Item item;
  while (p.untyped().wait_next(&item) == NextStatus::kItem) {
  }
  p.untyped().stop();  // the stop the op began; waits for it
  EXPECT_EQ(timed_result.load(), 0);
  EXPECT_TRUE(blocking_returned.load());
  EXPECT_TRUE(p.untyped().stopping());
  EXPECT_TRUE(p.untyped().stop(milliseconds(0)));
  EXPECT_EQ(ThreadPool::live_threads(), threads_before);
}

TEST(StopTest, DestroyingAPipelineOnItsOwnPoolThreadDoesNotDeadlock) {
  int threads_before = ThreadPool::live_threads();
  auto released = std::make_shared<Gate>();
  auto owner = std::make_shared<std::unique_ptr<Pipeline>>();
  auto token = std::make_shared<OpensOnDestruction>(released);
  Gate destroyed;
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe([owner, token, &destroyed](int x) {
                 if (x == 0) {
                   owner->reset();  // the last owner lets go, here
                   destroyed.open();
                 }
                 return x;
               })
               .add_sink()
               .build(2);
  token.reset();
  *owner = std::make_unique<Pipeline>(std::move(p.untyped()));
  (*owner)->start();
  destroyed.wait();
  owner.reset();
  released->wait();  // the stop finished on its own thread and let go
  EXPECT_EQ(ThreadPool::live_threads(), threads_before);
}

TEST(StopTest, DestroyingAPipelineWhoseStopTimedOutNeitherHangsNorCrashes) {
  int threads_before = ThreadPool::live_threads();
  HeldOp held;
  {
    auto p = held.build();
    p.untyped().start();
    held.entered->wait();
    EXPECT_FALSE(p.untyped().stop(milliseconds(1)));
  }  // destroyed while the stop waits for the stuck call
  held.release->open();
  held.released->wait();  // the stopper completed the stop and released it
  EXPECT_EQ(ThreadPool::live_threads(), threads_before);
}

TEST(StopTest, WaitNextReturnsTimeoutAndLosesNothing) {
  HeldOp held;
  auto p = held.build();
  Item item;
  EXPECT_EQ(p.untyped().wait_next(&item, std::chrono::steady_clock::now()),
            NextStatus::kTimeout);
  held.entered->wait();
  EXPECT_EQ(p.untyped().wait_next(
                &item, std::chrono::steady_clock::now() + milliseconds(10)),
            NextStatus::kTimeout);
  EXPECT_THROW(p.untyped().next(&item, milliseconds(1)), Timeout);
  held.release->open();
  EXPECT_EQ(drain(p), iota(3));
}

TEST(StopTest, WaitNextWithAnInterruptReturnsInterruptedAndLosesNothing) {
  HeldOp held;
  auto p = held.build();
  Item item;
  int calls = 0;
  // Called once per slice while the op is stuck; the third call stops it.
  auto interrupt = [&] {
    held.entered->wait();  // the wait is certainly for the held item
    return ++calls == 3;
  };
  EXPECT_EQ(
      p.untyped().wait_next(&item, std::nullopt, interrupt, milliseconds(1)),
      NextStatus::kInterrupted);
  EXPECT_EQ(calls, 3);
  held.release->open();
  EXPECT_EQ(drain(p), iota(3));
}

TEST(StopTest, WaitNextKeepsWaitingWhileTheInterruptDeclines) {
  HeldOp held;
  auto p = held.build();
  Item item;
  int calls = 0;
  // Declines, and on its first call lets the stuck op go: the wait then
  // returns the item it was waiting for.
  auto interrupt = [&] {
    if (++calls == 1) held.release->open();
    return false;
  };
  ASSERT_EQ(
      p.untyped().wait_next(&item, std::nullopt, interrupt, milliseconds(1)),
      NextStatus::kItem);
  EXPECT_EQ(item.as<int>(), 0);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(drain(p), (std::vector<int>{1, 2}));
}

TEST(StopTest, WaitNextWithAnInterruptStillTimesOutAndPassesOnItsErrors) {
  HeldOp held;
  auto p = held.build();
  Item item;
  int calls = 0;
  auto decline = [&] { return ++calls < 0; };
  // A deadline in the past: one slice, one call of the interrupt.
  EXPECT_EQ(p.untyped().wait_next(&item, std::chrono::steady_clock::now(),
                                  decline, std::chrono::hours(1)),
            NextStatus::kTimeout);
  EXPECT_EQ(calls, 1);
  auto fail = []() -> bool { throw std::runtime_error("interrupt failed"); };
  EXPECT_THROW(
      p.untyped().wait_next(&item, std::nullopt, fail, milliseconds(1)),
      std::runtime_error);
  held.release->open();
  EXPECT_EQ(drain(p), iota(3));
}

TEST(StopTest, StatsAfterStopAreTheFinalOnes) {
  auto p = PipelineBuilder().add_source(iota(10)).add_sink(20).build(2);
  Item item;
  ASSERT_EQ(p.untyped().wait_next(&item), NextStatus::kItem);
  p.untyped().stop();
  PipelineStats first = p.untyped().stats();
  PipelineStats second = p.untyped().stats();
  EXPECT_EQ(first.items_delivered, 1u);
  // Frozen: a live snapshot's elapsed time would grow between the calls.
  EXPECT_EQ(first.elapsed, second.elapsed);
  EXPECT_GT(first.elapsed.count(), 0);
  ASSERT_EQ(first.stages.size(), second.stages.size());
  EXPECT_EQ(first.stages[0].items_out, second.stages[0].items_out);
}

TEST(StopTest, TheFailureSurvivesTheStopAndReadsEndQuietly) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [](int x) -> int {
                     if (x == 3) throw std::runtime_error("bad 3");
                     return x;
                   },
                   {.max_failures = FailureBudget::max_count(0)})
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
  EXPECT_THROW(drain(p), PipelineFailure);
  std::exception_ptr before = p.untyped().failure();
  ASSERT_TRUE(before);
  p.untyped().stop();
  EXPECT_EQ(p.untyped().failure(), before);
  EXPECT_TRUE(p.untyped().stats().stages[1].failed);
  // After the stop the consumer is told the end; the failure was reported.
  Item item;
  EXPECT_EQ(p.untyped().wait_next(&item), NextStatus::kEnd);
}

TEST(StopTest, TheStopReleasesOpsSourcesAndHooks) {
  auto op_gate = std::make_shared<Gate>();
  auto hook_gate = std::make_shared<Gate>();
  auto op_token = std::make_shared<OpensOnDestruction>(op_gate);
  auto hook_token = std::make_shared<OpensOnDestruction>(hook_gate);
  std::weak_ptr<OpensOnDestruction> op_alive = op_token;
  std::weak_ptr<OpensOnDestruction> hook_alive = hook_token;
  BuildOptions options{.num_threads = 2};
  options.stats_hook = [hook_token](const PipelineStats&) {};
  auto p = PipelineBuilder()
               .add_source(iota(5))
               .pipe([op_token](int x) { return x; })
               .add_sink()
               .build(std::move(options));
  op_token.reset();
  hook_token.reset();
  EXPECT_EQ(drain(p), iota(5));
  EXPECT_FALSE(op_alive.expired());  // held while the pipeline runs
  p.untyped().stop();
  // Released by the stop, while the Pipeline object still exists.
  EXPECT_TRUE(op_alive.expired());
  EXPECT_TRUE(hook_alive.expired());
  EXPECT_EQ(p.untyped().stats().items_delivered, 5u);
}

TEST(StopTest, StartAndStopOnTwoThreadsLeaveNothingBehind) {
  int threads_before = ThreadPool::live_threads();
  for (int i = 0; i < 20; ++i) {
    auto p = PipelineBuilder()
                 .add_source(iota(1000))
                 .pipe([](int x) { return x; }, {.concurrency = 2})
                 .add_sink()
                 .build(2);
    std::jthread starter([&] { p.untyped().start(); });
    std::jthread stopper([&] { p.untyped().stop(); });
    starter.join();
    stopper.join();
    EXPECT_TRUE(p.untyped().stop(milliseconds(0)));
    Item item;
    EXPECT_EQ(p.untyped().wait_next(&item), NextStatus::kEnd);
  }
  EXPECT_EQ(ThreadPool::live_threads(), threads_before);
}

}  // namespace
}  // namespace feedline
