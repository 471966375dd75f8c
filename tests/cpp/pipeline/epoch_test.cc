// SPDX-License-Identifier: Apache-2.0
//
// Continuous sources: one epoch per pass, boundaries no item crosses.

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

TEST(EpochTest, ContinuousSourceGivesOneEpochPerPass) {
  auto p = PipelineBuilder()
               .add_source(iota(50), {.continuous = true})
               .pipe([](int x) { return x; }, {.concurrency = 4})
               .add_sink(3)
               .build(3);
  for (int epoch = 0; epoch < 4; ++epoch) {
    NextStatus last;
    std::vector<int> got = drain(p, &last);
    EXPECT_EQ(last, NextStatus::kEpochEnd) << "epoch " << epoch;
    EXPECT_EQ(sorted(got), iota(50)) << "epoch " << epoch;
  }
  EXPECT_EQ(p.stats().stages.back().epochs, 4u);  // markers the consumer saw
}

TEST(EpochTest, PartialBatchesNeverStraddleEpochs) {
  auto p = PipelineBuilder()
               .add_source(iota(10), {.continuous = true})
               .pipe([](int x) { return x; }, {.concurrency = 3})
               .aggregate(4)
               .add_sink(2)
               .build(2);
  for (int epoch = 0; epoch < 3; ++epoch) {
    NextStatus last;
    std::vector<std::vector<int>> batches = drain(p, &last);
    EXPECT_EQ(last, NextStatus::kEpochEnd);
    ASSERT_EQ(batches.size(), 3u) << "epoch " << epoch;
    EXPECT_EQ(batches[2].size(), 2u);  // the partial batch of this epoch
    std::vector<int> all;
    for (auto& b : batches) all.insert(all.end(), b.begin(), b.end());
    EXPECT_EQ(sorted(all), iota(10));
  }
}

TEST(EpochTest, DropLastDiscardsEachEpochsPartialBatch) {
  auto p = PipelineBuilder()
               .add_source(iota(10), {.continuous = true})
               .aggregate(4, /*drop_last=*/true)
               .add_sink(2)
               .build(2);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::vector<int>> batches = drain(p);
    EXPECT_EQ(batches,
              (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  }
}

TEST(EpochTest, InputOrderStageForwardsTheMarkerAfterItsItems) {
  auto p = PipelineBuilder()
               .add_source(iota(100), {.continuous = true})
               .pipe([](int x) { return x; },
                     {.concurrency = 5, .output_order = OutputOrder::kInput})
               .add_sink(3)
               .build(3);
  for (int epoch = 0; epoch < 3; ++epoch) EXPECT_EQ(drain(p), iota(100));
}

TEST(EpochTest, MergeIsAnEpochBarrierAcrossInputs) {
  std::vector<TypedBuilder<int>> inputs;
  inputs.push_back(PipelineBuilder().add_source(iota(3), {.continuous = true}));
  inputs.push_back(
      PipelineBuilder().add_source(iota(40, 100), {.continuous = true}));
  auto p = PipelineBuilder::merge(std::move(inputs)).add_sink(2).build(3);
  std::vector<int> want = iota(3);
  for (int x : iota(40, 100)) want.push_back(x);
  for (int epoch = 0; epoch < 5; ++epoch) {
    NextStatus last;
    EXPECT_EQ(sorted(drain(p, &last)), want) << "epoch " << epoch;
    EXPECT_EQ(last, NextStatus::kEpochEnd);
  }
}

// A stage of one input that exceeds its budget ends the whole pipeline:
// the other input (continuous: endless) stopped feeding the merge only
// when it ended, so the failure never reached the consumer.
TEST(EpochTest, AFailureInOneInputOfAMergeEndsThePipeline) {
  std::vector<TypedBuilder<int>> inputs;
  inputs.push_back(PipelineBuilder()
                       .add_source(iota(3), {.continuous = true})
                       .pipe(
                           [](int x) -> int {
                             if (x == 1) throw InvalidArgument("bad 1");
                             return x;
                           },
                           {.max_failures = FailureBudget::max_count(0)}));
  inputs.push_back(
      PipelineBuilder().add_source(iota(40, 100), {.continuous = true}));
  auto p = PipelineBuilder::merge(std::move(inputs))
               .add_sink(2)
               .build(BuildOptions{.num_threads = 3, .failure_log_burst = 0});
  bool failed = false;
  for (int epoch = 0; epoch < 50 && !failed; ++epoch) {
    try {
      drain(p);
    } catch (const PipelineFailure& e) {
      failed = true;
      EXPECT_NE(std::string(e.what()).find("bad 1"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(failed);
}

TEST(EpochTest, MixedContinuousModeIsRejectedAtBuild) {
  std::vector<TypedBuilder<int>> inputs;
  inputs.push_back(PipelineBuilder().add_source(iota(3), {.continuous = true}));
  inputs.push_back(PipelineBuilder().add_source(iota(3)));
  EXPECT_THROW(PipelineBuilder::merge(std::move(inputs)).add_sink().build(2),
               InvalidArgument);
}

}  // namespace
}  // namespace feedline
