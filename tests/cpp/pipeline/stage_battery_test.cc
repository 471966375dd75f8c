// SPDX-License-Identifier: Apache-2.0
//
// The stage battery: every stage kind through the same checks — exactly-once
// delivery under concurrency, end of stream, per-item errors (raise and
// skip), cancellation mid-stream with full and with empty queues,
// destruction while blocked, and the stats invariants.

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/spec.h"
#include "testing/pipeline_testing.h"
#include "testing/test_ops.h"

namespace feedline {
namespace {

using testing::Completer;
using testing::Gate;

enum class Kind {
  kMap,
  kMapInputOrder,
  kAsyncInline,
  kAsyncThread,
  kGenerator,
  kAggregateDisaggregate,
  kMerge,
};

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::kMap:
      return "Map";
    case Kind::kMapInputOrder:
      return "MapInputOrder";
    case Kind::kAsyncInline:
      return "AsyncInline";
    case Kind::kAsyncThread:
      return "AsyncThread";
    case Kind::kGenerator:
      return "Generator";
    case Kind::kAggregateDisaggregate:
      return "AggregateDisaggregate";
    case Kind::kMerge:
      return "Merge";
  }
  return "?";
}

struct Case {
  Kind kind;
  int concurrency;
  int threads;
};

// A pipeline: source 0..n-1 → stage(s) under test → sink. Items out are the
// items in (each once), whatever the stage kind. `fail_every` makes the
// stage under test (or, for structural stages, a map in front of it) fail on
// multiples of that number.
class Battery : public ::testing::TestWithParam<std::tuple<Kind, int, int>> {
 protected:
  Case param() const {
    return {std::get<0>(GetParam()), std::get<1>(GetParam()),
            std::get<2>(GetParam())};
  }

  PipelineSpec make_spec(int n, int fail_every, std::size_t capacity = 0) {
    Case s = param();
    PipelineSpec spec;
    PipeOptions opt;
    opt.name = "under_test";
    opt.concurrency = s.concurrency;
    opt.output_capacity = capacity;
    auto map_fail = [&]() {
      return fail_every > 0 ? testing::failing_op(fail_every)
                            : testing::identity_op();
    };
    if (s.kind == Kind::kMerge) {
      // Evens from one source, odds from another.
      for (int parity = 0; parity < 2; ++parity) {
        PipelineSpec sub;
        sub.source = testing::int_source(n);
        auto keep = std::make_shared<testing::IntMapOp>(
            [parity](int x) -> std::optional<int> {
              if (x % 2 != parity) return std::nullopt;
              return x;
            });
        PipeOptions keep_opt;
        keep_opt.name = "parity" + std::to_string(parity);
        sub.stages.push_back({StageKind::kPipe, keep, keep_opt});
        spec.merge_inputs.push_back(std::move(sub));
      }
      spec.stages.push_back({StageKind::kPipe, map_fail(), opt});
      spec.sink_capacity = capacity == 0 ? 3 : capacity;
      return spec;
    }
    spec.source = testing::int_source(n);
    switch (s.kind) {
      case Kind::kMap:
        spec.stages.push_back({StageKind::kPipe, map_fail(), opt});
        break;
      case Kind::kMapInputOrder:
        opt.output_order = OutputOrder::kInput;
        spec.stages.push_back({StageKind::kPipe, map_fail(), opt});
        break;
      case Kind::kAsyncInline:
      case Kind::kAsyncThread:
        if (s.kind == Kind::kAsyncThread)
          completer_ = std::make_shared<Completer>();
        spec.stages.push_back(
            {StageKind::kPipe,
             std::make_shared<testing::IntAsyncOp>(completer_, fail_every),
             opt});
        break;
      case Kind::kGenerator: {
        // x -> [x]: a generator with one output per input.
        struct One final : GeneratorOp {
          int fail_every;
          explicit One(int f) : fail_every(f) {}
          std::unique_ptr<ItemGenerator> start(Item input) override {
            int x = input.take_as<int>();
            if (fail_every > 0 && x % fail_every == 0) {
              throw std::runtime_error("generator start failed");
            }
            ItemBatch b;
            b.push_back(Item(x));
            return make_disaggregate_op_generator(std::move(b));
          }
          static std::unique_ptr<ItemGenerator> make_disaggregate_op_generator(
              ItemBatch b) {
            return std::static_pointer_cast<GeneratorOp>(make_disaggregate_op())
                ->start(Item(std::move(b)));
          }
        };
        spec.stages.push_back(
            {StageKind::kPipe, std::make_shared<One>(fail_every), opt});
        break;
      }
      case Kind::kAggregateDisaggregate: {
        spec.stages.push_back({StageKind::kPipe, map_fail(), opt});
        PipeOptions agg;
        agg.name = "aggregate";
        spec.stages.push_back(
            {StageKind::kAggregate, make_aggregate_op(7, false), agg});
        PipeOptions dis;
        dis.name = "disaggregate";
        dis.concurrency = s.concurrency;
        spec.stages.push_back(
            {StageKind::kDisaggregate, make_disaggregate_op(), dis});
        break;
      }
      case Kind::kMerge:
        break;
    }
    spec.sink_capacity = capacity == 0 ? 3 : capacity;
    return spec;
  }

  Pipeline build(PipelineSpec spec) {
    BuildOptions options;
    options.num_threads = param().threads;
    options.failure_log_burst = 0;  // keep test output quiet
    return build_pipeline(std::move(spec), std::move(options));
  }

  std::shared_ptr<Completer> completer_;
};

TEST_P(Battery, DeliversEveryItemExactlyOnce) {
  const int n = 3000;
  Pipeline p = build(make_spec(n, 0));
  NextStatus last;
  std::vector<int> got = testing::sorted(testing::drain<int>(p, &last));
  EXPECT_EQ(last, NextStatus::kEnd);
  EXPECT_EQ(got, testing::iota(n));
}

TEST_P(Battery, EndOfStreamIsSticky) {
  Pipeline p = build(make_spec(10, 0));
  testing::drain<int>(p);
  Item item;
  EXPECT_EQ(p.next(&item), NextStatus::kEnd);
  EXPECT_EQ(p.next(&item), NextStatus::kEnd);
  EXPECT_FALSE(item.has_value());
}

TEST_P(Battery, FailedItemsAreDroppedAndCounted) {
  const int n = 500;
  Pipeline p = build(make_spec(n, 7));
  std::vector<int> got = testing::sorted(testing::drain<int>(p));
  std::vector<int> want;
  for (int i = 0; i < n; ++i) {
    if (i % 7 != 0) want.push_back(i);
  }
  EXPECT_EQ(got, want);
  PipelineStats stats = p.stats();
  uint64_t failures = 0;
  for (const StageStats& s : stats.stages) failures += s.failures;
  EXPECT_EQ(failures, static_cast<uint64_t>(n - static_cast<int>(want.size())));
  EXPECT_EQ(p.failure(), nullptr);
}

TEST_P(Battery, StatsInvariantsHoldOnceDrained) {
  const int n = 1000;
  Pipeline p = build(make_spec(n, 9));
  std::vector<PipelineStats> snapshots;
  Item item;
  int k = 0;
  while (p.next(&item) == NextStatus::kItem) {
    if (++k % 100 == 0) snapshots.push_back(p.stats());
  }
  snapshots.push_back(p.stats());
  // Counters never decrease.
  for (std::size_t i = 1; i < snapshots.size(); ++i) {
    for (std::size_t s = 0; s < snapshots[i].stages.size(); ++s) {
      const StageStats& a = snapshots[i - 1].stages[s];
      const StageStats& b = snapshots[i].stages[s];
      EXPECT_LE(a.items_in, b.items_in) << b.name;
      EXPECT_LE(a.items_out, b.items_out) << b.name;
      EXPECT_LE(a.calls, b.calls) << b.name;
      EXPECT_LE(a.failures, b.failures) << b.name;
      EXPECT_LE(a.op_time.count(), b.op_time.count()) << b.name;
      EXPECT_LE(a.wait_input, b.wait_input) << b.name;
      EXPECT_LE(a.wait_output, b.wait_output) << b.name;
      EXPECT_LE(a.input_queue.items_put, b.input_queue.items_put) << b.name;
    }
  }
  const PipelineStats& last = snapshots.back();
  for (const StageStats& s : last.stages) {
    EXPECT_TRUE(s.finished) << s.name;
    EXPECT_EQ(s.input_queue.items_put, s.input_queue.items_got) << s.name;
    EXPECT_EQ(s.input_queue.depth, 0u) << s.name;
    EXPECT_LE(s.input_queue.max_depth, s.input_queue.capacity) << s.name;
    if (s.kind == "pipe") {
      EXPECT_EQ(s.items_in, s.items_out + s.failures + s.items_skipped)
          << s.name;
    }
  }
  // What each stage emits is what the next one takes.
  for (std::size_t i = 0; i + 1 < last.stages.size(); ++i) {
    if (last.stages[i + 1].kind == "merge" || last.stages[i].kind == "merge")
      continue;
    if (param().kind == Kind::kMerge && i < 4) continue;  // two sub-chains
    EXPECT_EQ(last.stages[i].items_out, last.stages[i + 1].items_in)
        << last.stages[i].name;
  }
  EXPECT_EQ(last.stages.back().items_out, static_cast<uint64_t>(k));
  EXPECT_EQ(last.items_delivered, static_cast<uint64_t>(k));
}

TEST_P(Battery, DestroyWithFullQueuesAndNoConsumer) {
  int threads_before = ThreadPool::live_threads();
  for (int read : {0, 1, 10}) {
    Pipeline p = build(make_spec(100000, 0, /*capacity=*/2));
    Item item;
    for (int i = 0; i < read; ++i) ASSERT_EQ(p.next(&item), NextStatus::kItem);
    if (read == 0) p.start();
    // Destroyed here with every queue full (or filling): must not hang.
  }
  completer_.reset();
  EXPECT_EQ(ThreadPool::live_threads(), threads_before);
}

TEST_P(Battery, StopMidStreamThenNextReturnsEnd) {
  Pipeline p = build(make_spec(100000, 0));
  Item item;
  for (int i = 0; i < 50; ++i) ASSERT_EQ(p.next(&item), NextStatus::kItem);
  p.stop();
  EXPECT_EQ(p.next(&item), NextStatus::kEnd);
  p.stop();  // idempotent
  for (const StageStats& s : p.stats().stages)
    EXPECT_TRUE(s.finished) << s.name;
}

TEST_P(Battery, StopWithEmptyQueuesWhileSourceIsHeld) {
  // The source hands out 5 items, then blocks inside next() until the gate
  // opens: every queue drains empty while the source call is in flight.
  auto gate = std::make_shared<Gate>();
  PipelineSpec spec = make_spec(0, 0);
  std::vector<PipelineSpec*> heads;
  if (spec.merge_inputs.empty()) {
    heads.push_back(&spec);
  } else {
    for (auto& sub : spec.merge_inputs) heads.push_back(&sub);
  }
  for (PipelineSpec* head : heads) {
    head->source = [gate]() -> std::unique_ptr<ItemSource> {
      struct Held final : ItemSource {
        std::shared_ptr<Gate> gate;
        int i = 0;
        bool next(Item* out) override {
          if (i == 5) gate->wait();
          if (i == 10) return false;
          *out = Item(i++);
          return true;
        }
      };
      auto s = std::make_unique<Held>();
      s->gate = gate;
      return s;
    };
  }
  Pipeline p = build(std::move(spec));
  Item item;
  // A source blocked in next() holds a pool thread; with a single thread
  // nothing else can run meanwhile, so only read items when others exist.
  // (Merge: each source's first 5 items hold 2 or 3 of its parity; the
  // aggregate holds its 5 items back waiting for a batch of 7.)
  int expected = param().kind == Kind::kMerge ? 4 : 5;
  if (param().threads == 1 || param().kind == Kind::kAggregateDisaggregate) {
    expected = 0;
  }
  if (expected == 0) p.start();
  for (int i = 0; i < expected; ++i)
    ASSERT_EQ(p.next(&item), NextStatus::kItem);
  std::jthread stopper([&] { p.stop(); });
  gate->open();  // lets the in-flight source call return, before or during stop
  stopper.join();
  EXPECT_EQ(p.next(&item), NextStatus::kEnd);
}

INSTANTIATE_TEST_SUITE_P(
    AllStages, Battery,
    ::testing::Combine(::testing::Values(Kind::kMap, Kind::kMapInputOrder,
                                         Kind::kAsyncInline, Kind::kAsyncThread,
                                         Kind::kGenerator,
                                         Kind::kAggregateDisaggregate,
                                         Kind::kMerge),
                       ::testing::Values(1, 4),   // concurrency
                       ::testing::Values(1, 3)),  // threads
    [](const ::testing::TestParamInfo<std::tuple<Kind, int, int>>& p) {
      return kind_name(std::get<0>(p.param)) + "_c" +
             std::to_string(std::get<1>(p.param)) + "_t" +
             std::to_string(std::get<2>(p.param));
    });

}  // namespace
}  // namespace feedline
