// SPDX-License-Identifier: Apache-2.0
//
// Build-time validation, start/stop/timeouts, thread hygiene.

#include <atomic>
#include <latch>
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

using testing::drain;
using testing::iota;

TEST(LifecycleTest, InvalidSpecsAreRejectedAtBuildWithTheStageNamed) {
  auto build_with = [](PipeOptions opt) {
    return PipelineBuilder()
        .add_source(iota(3))
        .pipe([](int x) { return x; }, opt)
        .add_sink()
        .build(2);
  };
  try {
    build_with({.name = "decode", .concurrency = 0});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'decode'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("got 0"), std::string::npos);
  }
  EXPECT_THROW(PipelineBuilder().add_source(iota(3)).add_sink().build(0),
               InvalidArgument);
  EXPECT_THROW(PipelineBuilder().add_source(iota(3)).aggregate(0),
               InvalidArgument);
  EXPECT_THROW(PipelineBuilder().add_source(iota(3)).add_sink(0).build(1),
               InvalidArgument);
  PipelineSpec no_sink = PipelineBuilder().add_source(iota(3)).spec();
  EXPECT_THROW(build_pipeline(std::move(no_sink), {}), InvalidArgument);
  PipelineSpec no_source;
  no_source.sink_capacity = 1;
  EXPECT_THROW(build_pipeline(std::move(no_source), {}), InvalidArgument);
  PipelineSpec gen_in_order = PipelineBuilder().add_source(iota(3)).spec();
  gen_in_order.stages.push_back(
      {StageKind::kPipe, std::make_shared<testing::RepeatOp>(),
       PipeOptions{.concurrency = 2, .output_order = OutputOrder::kInput}});
  gen_in_order.sink_capacity = 1;
  EXPECT_THROW(build_pipeline(std::move(gen_in_order), {}), InvalidArgument);
  PipelineSpec parallel_aggregate =
      PipelineBuilder().add_source(iota(3)).spec();
  parallel_aggregate.stages.push_back({StageKind::kAggregate,
                                       make_aggregate_op(2, false),
                                       PipeOptions{.concurrency = 2}});
  parallel_aggregate.sink_capacity = 1;
  EXPECT_THROW(build_pipeline(std::move(parallel_aggregate), {}),
               InvalidArgument);
}

TEST(LifecycleTest, StartTwiceIsAnError) {
  auto p = PipelineBuilder().add_source(iota(3)).add_sink().build(1);
  p.untyped().start();
  EXPECT_THROW(p.untyped().start(), InvalidArgument);
  EXPECT_EQ(drain(p), iota(3));
}

// 0, 1, 2 through a stage whose calls wait until `gate` opens.
TypedPipeline<int> gated_pipeline(std::shared_ptr<testing::Gate> gate) {
  return PipelineBuilder()
      .add_source(iota(3))
      .pipe([gate](int x) {
        gate->wait();
        return x;
      })
      .add_sink()
      .build(2);
}

TEST(LifecycleTest, NextTimesOutWhileTheSourceIsHeld) {
  auto gate = std::make_shared<testing::Gate>();
  auto p = gated_pipeline(gate);
  Item item;
  EXPECT_THROW(p.untyped().next(&item, std::chrono::milliseconds(20)), Timeout);
  gate->open();
  EXPECT_EQ(drain(p), iota(3));  // the timeout lost nothing
}

TEST(LifecycleTest, StopFromAnotherThreadWakesABlockedConsumer) {
  auto gate = std::make_shared<testing::Gate>();
  auto p = gated_pipeline(gate);
  p.untyped().start();
  std::jthread consumer([&] {
    // Items that made it out before the stop may still arrive; then kEnd.
    Item item;
    int items = 0;
    while (p.untyped().next(&item) == NextStatus::kItem) ++items;
    EXPECT_LE(items, 3);
  });
  // Whether stop() lands before or during the consumer's wait, the consumer
  // must see kEnd; the op is released so that stop() can finish.
  std::jthread stopper([&] { p.stop(); });
  gate->open();
  stopper.join();
  consumer.join();
}

TEST(LifecycleTest, NoThreadLeakAfterManyCycles) {
  int before = ThreadPool::live_threads();
  for (int cycle = 0; cycle < 300; ++cycle) {
    auto p = PipelineBuilder()
                 .add_source(iota(50))
                 .pipe([](int x) { return x; }, {.concurrency = 2})
                 .add_sink(2)
                 .build(3);
    Item item;
    for (int i = 0; i < cycle % 7; ++i) p.untyped().next(&item);
    if (cycle % 3 == 0) p.stop();
  }
  EXPECT_EQ(ThreadPool::live_threads(), before);
}

TEST(LifecycleTest, UnstartedPipelineStartsNoThreads) {
  int before = ThreadPool::live_threads();
  {
    auto p = PipelineBuilder().add_source(iota(5)).add_sink().build(4);
    EXPECT_EQ(ThreadPool::live_threads(), before);
  }
  EXPECT_EQ(ThreadPool::live_threads(), before);
}

TEST(LifecycleTest, PoolThreadsAreNamed) {
  std::atomic<bool> named{false};
  auto p = PipelineBuilder()
               .add_source(iota(1))
               .pipe([&](int x) {
                 char name[16] = {};
                 pthread_getname_np(pthread_self(), name, sizeof(name));
                 named = std::string(name).rfind("feedline:w", 0) == 0;
                 return x;
               })
               .add_sink()
               .build(1);
  drain(p);
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace feedline
