// SPDX-License-Identifier: Apache-2.0
//
// The consumer's end: next() takes the ready entries in runs, yet the sink
// holds no more than its buffer and its stats count each entry when the
// consumer receives it.

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/pipeline/builder.h"
#include "testing/manual_clock.h"
#include "testing/pipeline_testing.h"

namespace feedline {
namespace {

using std::chrono::milliseconds;
using testing::iota;

const StageStats& sink_of(const PipelineStats& s) { return s.stages.back(); }

// Waits until the sink's queue holds `depth` entries (the pipeline fills it
// while nobody reads, so this always comes).
void wait_for_depth(const Pipeline& p, std::size_t depth) {
  while (sink_of(p.stats()).input_queue.depth < depth) {
    std::this_thread::yield();
  }
}

TEST(SinkTest, HeldRunCountsAsQueuedUntilHandedOut) {
  auto typed = PipelineBuilder().add_source(iota(20)).add_sink(3).build(1);
  Pipeline& p = typed.untyped();
  p.start();
  const std::size_t capacity = sink_of(p.stats()).input_queue.capacity;
  ASSERT_EQ(capacity, 4u);  // buffer_size 3 + the source's one call
  wait_for_depth(p, capacity);

  Item item;
  ASSERT_EQ(p.next(&item), NextStatus::kItem);
  StageStats s = sink_of(p.stats());
  EXPECT_EQ(s.items_in, 1u);
  EXPECT_EQ(s.items_out, 1u);
  EXPECT_EQ(s.input_queue.items_got, 1u);
  // The other three are with the consumer but not handed out: still queued,
  // and still holding their slots, so the source cannot refill past them.
  EXPECT_EQ(s.input_queue.depth, 3u);
  EXPECT_EQ(s.input_queue.items_put, 4u);

  int received = 1;
  while (p.next(&item) == NextStatus::kItem) {
    ++received;
    s = sink_of(p.stats());
    EXPECT_EQ(s.items_out, static_cast<uint64_t>(received));
    EXPECT_EQ(s.input_queue.items_got, static_cast<uint64_t>(received));
    EXPECT_EQ(s.input_queue.items_put - s.input_queue.items_got,
              s.input_queue.depth);
    EXPECT_LE(s.input_queue.max_depth, capacity);
  }
  EXPECT_EQ(received, 20);
  s = sink_of(p.stats());
  EXPECT_EQ(s.input_queue.depth, 0u);
  EXPECT_TRUE(s.finished);
}

TEST(SinkTest, EpochsCountWhenTheConsumerSeesTheMarker) {
  auto typed = PipelineBuilder()
                   .add_source(iota(2), {.continuous = true})
                   .add_sink(8)
                   .build(1);
  Pipeline& p = typed.untyped();
  p.start();
  // Two items, a marker, two items, a marker, ...: at least two markers wait.
  wait_for_depth(p, 6);
  Item item;
  ASSERT_EQ(p.next(&item), NextStatus::kItem);
  ASSERT_EQ(p.next(&item), NextStatus::kItem);
  EXPECT_EQ(sink_of(p.stats()).epochs, 0u);
  ASSERT_EQ(p.next(&item), NextStatus::kEpochEnd);
  EXPECT_EQ(sink_of(p.stats()).epochs, 1u);
  ASSERT_EQ(p.next(&item), NextStatus::kItem);
  EXPECT_EQ(sink_of(p.stats()).epochs, 1u);
  EXPECT_EQ(sink_of(p.stats()).items_out, 3u);
  p.stop();
}

TEST(SinkTest, StopEndsTheConsumerEvenWithAHeldRun) {
  auto typed = PipelineBuilder().add_source(iota(20)).add_sink(3).build(1);
  Pipeline& p = typed.untyped();
  p.start();
  wait_for_depth(p, 4);
  Item item;
  ASSERT_EQ(p.next(&item), NextStatus::kItem);
  p.stop();
  EXPECT_EQ(p.next(&item), NextStatus::kEnd);
  EXPECT_EQ(sink_of(p.stats()).items_out, 1u);
}

TEST(SinkTest, DepthOverTimeCountsTheHeldRun) {
  testing::ManualClock clock;
  auto typed = PipelineBuilder().add_source(iota(20)).add_sink(3).build(
      BuildOptions{.num_threads = 1, .clock = &clock});
  Pipeline& p = typed.untyped();
  p.start();
  wait_for_depth(p, 4);
  Item item;
  ASSERT_EQ(p.next(&item), NextStatus::kItem);
  QueueStats before = sink_of(p.stats()).input_queue;
  clock.advance(milliseconds(10));
  QueueStats after = sink_of(p.stats()).input_queue;
  // Three entries held for 10 ms: neither empty nor full meanwhile.
  EXPECT_DOUBLE_EQ(
      after.depth_integral - before.depth_integral,
      3.0 * static_cast<double>(
                std::chrono::nanoseconds(milliseconds(10)).count()));
  EXPECT_EQ(after.time_empty, before.time_empty);
  EXPECT_EQ(after.time_full, before.time_full);
  p.stop();
}

}  // namespace
}  // namespace feedline
