// SPDX-License-Identifier: Apache-2.0
//
// Output order, skipping, generators, aggregate/disaggregate and merge,
// through the typed builder.

#include <latch>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/builder.h"
#include "testing/pipeline_testing.h"

namespace feedline {
namespace {

using testing::drain;
using testing::iota;
using testing::sorted;

// Item 0's call cannot return before items 1..3 have finished, so with
// concurrency 4 the calls complete out of input order. No sleeping: the latch
// forces the interleaving.
TEST(OrderingTest, InputOrderHoldsWhenCallsFinishOutOfOrder) {
  std::latch others_done(3);
  auto p = PipelineBuilder()
               .add_source(iota(4))
               .pipe(
                   [&](int x) {
                     if (x == 0) {
                       others_done.wait();
                     } else {
                       others_done.count_down();
                     }
                     return x;
                   },
                   {.concurrency = 4, .output_order = OutputOrder::kInput})
               .add_sink(8)
               .build(4);
  EXPECT_EQ(drain(p), iota(4));
}

TEST(OrderingTest, CompletionOrderEmitsFinishedCallsFirst) {
  // Item 0's call is held until the consumer has received three items, which
  // it can only do if finished calls overtake the held one.
  std::latch consumer_has_three(1);
  auto p = PipelineBuilder()
               .add_source(iota(4))
               .pipe(
                   [&](int x) {
                     if (x == 0) consumer_has_three.wait();
                     return x;
                   },
                   {.concurrency = 4})
               .add_sink(8)
               .build(4);
  std::vector<int> got;
  for (int i = 0; i < 3; ++i) got.push_back(*p.next());
  consumer_has_three.count_down();
  EXPECT_EQ(sorted(got), (std::vector<int>{1, 2, 3}));  // any order among them
  EXPECT_EQ(*p.next(), 0);
  EXPECT_EQ(p.next(), std::nullopt);
}

TEST(OrderingTest, InputOrderUnderLoadManyItems) {
  auto p = PipelineBuilder()
               .add_source(iota(5000))
               .pipe(
                   [](int x) {
                     // Uneven work so that calls overtake each other.
                     volatile int sink = 0;
                     for (int i = 0; i < (x % 7) * 200; ++i) sink = sink + i;
                     return x;
                   },
                   {.concurrency = 8, .output_order = OutputOrder::kInput})
               .add_sink(4)
               .build(3);
  EXPECT_EQ(drain(p), iota(5000));
}

TEST(OrderingTest, EmptyOptionalSkipsTheItem) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe([](int x) -> std::optional<int> {
                 if (x % 2) return std::nullopt;
                 return x;
               })
               .add_sink()
               .build(2);
  EXPECT_EQ(drain(p), (std::vector<int>{0, 2, 4, 6, 8}));
  const StageStats pipe = p.stats().stages[1];
  EXPECT_EQ(pipe.items_in, 10u);
  EXPECT_EQ(pipe.items_out, 5u);
  EXPECT_EQ(pipe.items_skipped, 5u);
}

TEST(OrderingTest, SkipsKeepInputOrder) {
  auto p = PipelineBuilder()
               .add_source(iota(1000))
               .pipe(
                   [](int x) -> std::optional<int> {
                     if (x % 3 == 0) return std::nullopt;
                     return x;
                   },
                   {.concurrency = 4, .output_order = OutputOrder::kInput})
               .add_sink()
               .build(2);
  std::vector<int> want;
  for (int i = 0; i < 1000; ++i) {
    if (i % 3) want.push_back(i);
  }
  EXPECT_EQ(drain(p), want);
}

TEST(OrderingTest, FlatMapYieldsZeroToManyPerItem) {
  auto p = PipelineBuilder()
               .add_source(iota(5))
               .flat_map([](int x) { return std::vector<int>(x, x); })
               .add_sink()
               .build(2);
  // Concurrency 1: one generator at a time, so the order is exact.
  EXPECT_EQ(drain(p), (std::vector<int>{1, 2, 2, 3, 3, 3, 4, 4, 4, 4}));
}

TEST(OrderingTest, FlatMapLargeOutputsAreBoundedByTheQueue) {
  // 3 inputs x 10000 outputs each through a 2-slot sink: the generator is
  // pulled only as the consumer makes room.
  auto p = PipelineBuilder()
               .add_source(iota(3))
               .flat_map([](int x) { return std::vector<int>(10000, x); },
                         {.concurrency = 2})
               .add_sink(2)
               .build(2);
  std::vector<int> got = drain(p);
  EXPECT_EQ(got.size(), 30000u);
  const StageStats gen = p.stats().stages[1];
  EXPECT_EQ(gen.items_in, 3u);
  EXPECT_EQ(gen.items_out, 30000u);
  EXPECT_LE(p.stats().stages[2].input_queue.max_depth,
            p.stats().stages[2].input_queue.capacity);
}

TEST(OrderingTest, AggregateKeepsOrDropsTheLastPartialBatch) {
  for (bool drop_last : {false, true}) {
    auto p = PipelineBuilder()
                 .add_source(iota(10))
                 .aggregate(3, drop_last)
                 .add_sink()
                 .build(2);
    std::vector<std::vector<int>> got = drain(p);
    std::vector<std::vector<int>> want = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
    if (!drop_last) want.push_back({9});
    EXPECT_EQ(got, want) << "drop_last=" << drop_last;
  }
}

TEST(OrderingTest, DisaggregateRestoresTheItems) {
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .aggregate(7)
               .disaggregate()
               .add_sink()
               .build(2);
  EXPECT_EQ(drain(p), iota(100));
}

TEST(OrderingTest, MergeInterleavesEveryItemOnce) {
  std::vector<TypedBuilder<int>> inputs;
  inputs.push_back(PipelineBuilder().add_source(iota(500)));
  inputs.push_back(PipelineBuilder()
                       .add_source(iota(500, 1000))
                       .pipe([](int x) { return x; }, {.concurrency = 3}));
  auto p = PipelineBuilder::merge(std::move(inputs)).add_sink().build(3);
  std::vector<int> want = iota(500);
  for (int x : iota(500, 1000)) want.push_back(x);
  EXPECT_EQ(sorted(drain(p)), want);
}

TEST(OrderingTest, TypeMismatchIsACountedFailureNamingBothTypes) {
  // An untyped spec whose stage expects a string but gets ints.
  PipelineSpec spec = PipelineBuilder().add_source(iota(3)).spec();
  struct WantsString final : MapOp {
    Item call(Item in) override { return Item(in.take_as<std::string>()); }
  };
  spec.stages.push_back({StageKind::kPipe, std::make_shared<WantsString>(),
                         PipeOptions{.name = "strings"}});
  spec.sink_capacity = 2;
  testing::LogCapture logs;
  Pipeline p = build_pipeline(std::move(spec), BuildOptions{.num_threads = 1});
  EXPECT_THROW(drain<int>(p), PipelineFailure);  // every call failed
  EXPECT_EQ(p.stats().stages[1].failures, 3u);
  ASSERT_FALSE(logs.lines().empty());
  EXPECT_NE(logs.lines()[0].find("expected std::__cxx11::basic_string"),
            std::string::npos)
      << logs.lines()[0];
  EXPECT_NE(logs.lines()[0].find("got int"), std::string::npos);
}

}  // namespace
}  // namespace feedline
