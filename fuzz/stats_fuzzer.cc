// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the two ways statistics come back in from outside.
// decode_stage_stats() on arbitrary bytes (the record a region's worker
// process sends the main process) and stats_from_json() (an export a user
// hands to `python -m feedline stats`), then every use a snapshot gets:
// merging, the bottleneck, the table and the JSON, which must read back.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "feedline/base/error.h"
#include "feedline/pipeline/stats.h"

namespace {

void use(const feedline::PipelineStats& stats) {
  using namespace feedline;
  Bottleneck b = find_bottleneck(stats);
  std::string json = to_json(stats);
  volatile std::size_t n =
      format_table(stats).size() + json.size() + b.reason.size();
  (void)n;
  try {
    (void)stats_from_json(json);
  } catch (const FormatError& e) {
    // What to_json() writes must read back.
    std::fprintf(stderr, "to_json() output does not read back: %s\n%s\n",
                 e.what(), json.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feedline;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<StageStats> stages = decode_stage_stats(input);
    PipelineStats stats;
    stats.stages = stages;
    stats.num_threads = static_cast<int>(size % 9);
    for (const StageStats& s : stages) {
      stats.elapsed = std::max(stats.elapsed, s.input_queue.elapsed);
    }
    if (!stages.empty()) {
      RegionStats region{"region0", 0, 2, 2, stages};
      for (std::size_t i = 0; i < stages.size(); ++i) {
        accumulate(&region.stages[i], stages[i]);
      }
      stats.regions.push_back(region);
    }
    use(stats);
  } catch (const FormatError&) {
  }
  try {
    use(stats_from_json(input));
  } catch (const FormatError&) {
  }
  return 0;
}
