// SPDX-License-Identifier: Apache-2.0
//
// The consumer's end: consumers on several threads take turns, the count of
// consumers inside a wait, next() with an interrupt, the failure handed over
// once, and the small engine helpers the Python layer builds on
// (op_signature(), the disaggregate op's splitter).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/builder.h"
#include "testing/pipeline_testing.h"
#include "testing/test_ops.h"

namespace feedline {
namespace {

using std::chrono::milliseconds;
using testing::Gate;
using testing::iota;

// iota(n) through a stage that waits for `release` before each item.
auto gated(int n, std::shared_ptr<Gate> release) {
  return PipelineBuilder()
      .add_source(iota(n))
      .pipe([release](int x) {
        release->wait();
        return x;
      })
      .add_sink()
      .build(1);
}

TEST(ConsumerTest, ConsumersOnSeveralThreadsTakeTurnsAndShareTheItems) {
  constexpr int kItems = 2000;
  auto p = PipelineBuilder()
               .add_source(iota(kItems))
               .pipe([](int x) { return x; }, {.concurrency = 2})
               .add_sink(8)
               .build(2);
  std::mutex mu;
  std::vector<int> seen;
  std::vector<std::thread> consumers;
  for (int t = 0; t < 4; ++t) {
    consumers.emplace_back([&] {
      Item item;
      while (p.untyped().wait_next(&item) == NextStatus::kItem) {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(item.as<int>());
      }
    });
  }
  for (std::thread& t : consumers) t.join();
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kItems));
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(),
            static_cast<std::size_t>(kItems));
}

TEST(ConsumerTest, ConsumersWaitingCountsTheConsumerInsideAWait) {
  auto release = std::make_shared<Gate>();
  auto p = gated(1, release);
  EXPECT_EQ(p.untyped().consumers_waiting(), 0);
  int inside = -1;
  // The interrupt runs inside the wait, with the consumer's turn held.
  auto interrupt = [&] {
    inside = p.untyped().consumers_waiting();
    release->open();
    return false;
  };
  Item item;
  ASSERT_EQ(
      p.untyped().wait_next(&item, std::nullopt, interrupt, milliseconds(1)),
      NextStatus::kItem);
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(p.untyped().consumers_waiting(), 0);
}

TEST(ConsumerTest, NextWithAnInterruptThrowsTimeoutWhenTheTimeoutPasses) {
  auto release = std::make_shared<Gate>();
  auto p = gated(2, release);
  Item item;
  int calls = 0;
  auto decline = [&] { return ++calls < 0; };
  EXPECT_THROW(
      p.untyped().next(&item, milliseconds(0), decline, std::chrono::hours(1)),
      Timeout);
  EXPECT_EQ(calls, 1);
  auto stop_waiting = [] { return true; };
  EXPECT_EQ(
      p.untyped().next(&item, std::nullopt, stop_waiting, milliseconds(1)),
      NextStatus::kInterrupted);
  release->open();
  EXPECT_EQ(testing::drain(p), iota(2));
}

// A consumer whose turn waits on another consumer's (blocked on a slow
// stage) keeps its deadline and its interrupt instead of waiting for the
// other's item.
TEST(ConsumerTest, AConsumerWaitingForItsTurnKeepsItsDeadline) {
  auto release = std::make_shared<Gate>();
  auto p = gated(2, release);
  std::atomic<NextStatus> first{NextStatus::kTimeout};
  std::thread a([&] {
    Item item;
    first = p.untyped().wait_next(&item);
  });
  while (p.untyped().consumers_waiting() == 0) std::this_thread::yield();
  Item item;
  EXPECT_EQ(p.untyped().wait_next(
                &item, std::chrono::steady_clock::now() + milliseconds(5)),
            NextStatus::kTimeout);
  EXPECT_THROW(p.untyped().next(&item, milliseconds(5)), Timeout);
  int calls = 0;
  EXPECT_EQ(
      p.untyped().wait_next(
          &item, std::nullopt, [&] { return ++calls == 2; }, milliseconds(1)),
      NextStatus::kInterrupted);
  EXPECT_EQ(calls, 2);
  release->open();
  a.join();
  EXPECT_EQ(first.load(), NextStatus::kItem);
}

// Cheap calls defer waking the next stage; a call that then blocks must not
// hold back the items emitted before it: a starving consumer gets them.
TEST(ConsumerTest, ItemsBeforeABlockedCallReachAStarvingConsumer) {
  for (int threads : {2, 4}) {
    auto release = std::make_shared<Gate>();
    auto p = PipelineBuilder()
                 .add_source(iota(48))
                 .pipe([release](int x) {
                   if (x == 5) release->wait();
                   return x;
                 })
                 .pipe([](int x) { return x; }, {.concurrency = 2})
                 .add_sink()
                 .build(threads);
    std::vector<int> got;
    Item item;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got.size() < 5 &&
           p.untyped().wait_next(&item, deadline) == NextStatus::kItem) {
      got.push_back(item.as<int>());
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, iota(5)) << threads << " threads";
    release->open();
    std::vector<int> rest = testing::drain(p);
    EXPECT_EQ(rest.size(), 43u);
  }
}

// In input order, the worker that delivers a run of results must not start
// a blocking call while it still holds the delivery: item 4, finished by the
// other worker after item 5's call began, must still reach the consumer.
TEST(ConsumerTest, InOrderResultsDoNotWaitBehindTheDeliverersBlockedCall) {
  auto entered4 = std::make_shared<Gate>();
  auto entered5 = std::make_shared<Gate>();
  auto release = std::make_shared<Gate>();
  auto p = PipelineBuilder()
               .add_source(iota(8))
               .pipe(
                   [=](int x) {
                     if (x == 3) entered4->wait();  // finishes after 4 began
                     if (x == 4) {
                       entered4->open();
                       entered5->wait();  // finishes after 5 began
                     }
                     if (x == 5) {
                       entered5->open();
                       release->wait();
                     }
                     return x;
                   },
                   {.concurrency = 2, .output_order = OutputOrder::kInput})
               .add_sink()
               .build(2);
  std::vector<int> got;
  Item item;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.size() < 5 &&
         p.untyped().wait_next(&item, deadline) == NextStatus::kItem) {
    got.push_back(item.as<int>());
  }
  EXPECT_EQ(got, iota(5));
  release->open();
  EXPECT_EQ(testing::drain(p), (std::vector<int>{5, 6, 7}));
}

TEST(ConsumerTest, TakeFailureHandsTheFailureOverOnceAfterTheStop) {
  auto p = PipelineBuilder()
               .add_source(iota(5))
               .pipe(
                   [](int x) -> int {
                     if (x == 2) throw InvalidArgument("bad 2");
                     return x;
                   },
                   {.max_failures = FailureBudget::max_count(0)})
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
  EXPECT_THROW(testing::drain(p), PipelineFailure);
  EXPECT_EQ(p.untyped().take_failure(), nullptr);  // not stopped yet
  p.untyped().stop();
  std::exception_ptr taken = p.untyped().take_failure();
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken, p.untyped().failure());
  EXPECT_EQ(p.untyped().take_failure(), nullptr);  // once only
  EXPECT_EQ(p.untyped().failure(), taken);         // failure() keeps it
}

// A generator op whose start() gives no generator is a failed call of its
// stage (the engine dereferenced it).
TEST(ConsumerTest, AGeneratorOpThatStartsNoGeneratorFailsTheCall) {
  struct NoGenerator final : GeneratorOp {
    std::unique_ptr<ItemGenerator> start(Item input) override {
      if (input.as<int>() == 1) return nullptr;
      return testing::RepeatOp().start(std::move(input));
    }
  };
  auto p = PipelineBuilder()
               .add_source(iota(4))
               .pipe<int>(std::make_shared<NoGenerator>())
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
  std::vector<int> got = testing::drain(p);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int>{2, 2, 3, 3, 3}));
  EXPECT_EQ(p.untyped().stats().stages[1].failures, 1);
}

TEST(ConsumerTest, TakeFailureIsNullForAPipelineThatDidNotFail) {
  auto p = PipelineBuilder().add_source(iota(3)).add_sink().build(1);
  EXPECT_EQ(testing::drain(p), iota(3));
  p.untyped().stop();
  EXPECT_EQ(p.untyped().take_failure(), nullptr);
}

TEST(ConsumerTest, OpSignatureNamesWhatAnOpTakesAndGives) {
  EXPECT_STREQ(op_kind_name(OpKind::kMap), "map");
  EXPECT_STREQ(op_kind_name(OpKind::kGenerator), "generator");
  EXPECT_STREQ(op_kind_name(OpKind::kAsync), "async");
  const std::string batch = type_name(typeid(ItemBatch));
  EXPECT_EQ(op_signature(*make_aggregate_op(2, false)), "any -> " + batch);
  EXPECT_EQ(op_signature(*make_disaggregate_op()), batch + " -> " + batch);
  EXPECT_EQ(op_signature(*make_map_op<int>([](int x) { return x; })),
            type_name(typeid(int)) + " -> " + type_name(typeid(int)));
}

// A generator that yields `n` copies of its input.
class Repeat final : public ItemGenerator {
 public:
  Repeat(int value, int n) : value_(value), left_(n) {}
  bool next(Item* out) override {
    if (left_ == 0) return false;
    --left_;
    *out = Item(value_);
    return true;
  }

 private:
  int value_;
  int left_;
};

TEST(ConsumerTest, DisaggregateSplitsOtherItemsWithItsSplitter) {
  OpPtr plain = make_disaggregate_op();
  ASSERT_NE(plain->input_type(), nullptr);
  EXPECT_TRUE(*plain->input_type() == typeid(ItemBatch));
  OpPtr op = make_disaggregate_op(
      [](Item in) { return std::make_unique<Repeat>(in.as<int>(), 3); });
  EXPECT_EQ(op->input_type(), nullptr);  // takes any item
  auto& gen = static_cast<GeneratorOp&>(*op);
  std::vector<int> out;
  auto collect = [&](std::unique_ptr<ItemGenerator> g) {
    Item item;
    while (g->next(&item)) out.push_back(item.as<int>());
  };
  ItemBatch batch;
  batch.emplace_back(1);
  batch.emplace_back(2);
  collect(gen.start(Item(std::move(batch))));
  collect(gen.start(Item(7)));
  EXPECT_EQ(out, (std::vector<int>{1, 2, 7, 7, 7}));
}

}  // namespace
}  // namespace feedline
