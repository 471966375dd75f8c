// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: decode_stage_stats() on arbitrary bytes (the record a
// region's worker process sends the main process), then every use a
// snapshot gets: merging, the table and the JSON.
#include <string_view>

#include "feedline/base/error.h"
#include "feedline/pipeline/stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feedline;
  try {
    std::vector<StageStats> stages = decode_stage_stats(
        std::string_view(reinterpret_cast<const char*>(data), size));
    PipelineStats stats;
    stats.stages = stages;
    RegionStats region{"region0", 0, 2, 2, stages};
    for (std::size_t i = 0; i < stages.size(); ++i) {
      accumulate(&region.stages[i], stages[i]);
    }
    stats.regions.push_back(region);
    volatile std::size_t n = format_table(stats).size() + to_json(stats).size();
    (void)n;
  } catch (const FormatError&) {
  }
  return 0;
}
