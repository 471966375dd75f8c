#include <numeric>
#include <ranges>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/pipeline/builder.h"

namespace feedline {
namespace {

TEST(SmokeTest, ThreeStages) {
  std::vector<int> src(1000);
  std::iota(src.begin(), src.end(), 0);
  auto p = PipelineBuilder()
               .add_source(src)
               .pipe([](int x) { return x * 2; }, {.concurrency = 4})
               .pipe([](int x) { return x + 1; })
               .aggregate(10)
               .add_sink(3)
               .build(4);
  long sum = 0;
  int n = 0;
  for (auto& batch : p) {
    n += static_cast<int>(batch.size());
    for (int v : batch) sum += v;
  }
  EXPECT_EQ(n, 1000);
  EXPECT_EQ(sum, 999L * 1000 + 1000);
}

}  // namespace
}  // namespace feedline
