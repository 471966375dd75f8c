// SPDX-License-Identifier: Apache-2.0
//
// AutotuneController: the decisions of autotune (AutotuneOptions), apart from
// the pipeline that applies them, so that they can be tested on statistics
// made up for the purpose.
//
// Each step reads the statistics of the interval since the last step:
//   1. A trial in progress (a change made two steps ago; the step right after
//      a change is skipped, as its interval mixes both settings) is kept if
//      the output rate rose by enough (kGainShare of what the change could
//      give at most, and at least kMinGain) and the CPU use stayed within the
//      budget; otherwise it is undone, and that knob is left alone for a
//      while (longer after each failure in a row).
//   2. Over the CPU budget: fewer active pool threads, in proportion.
//   3. Otherwise find_bottleneck() on the interval says whether anything
//      here can help (not when the consumer or the GIL sets the pace). The
//      candidates are the bottleneck stage, then the other tunable stages
//      whose calls keep their concurrency busy, busiest first, then the
//      pool (first when it is the bottleneck). The first that is not left
//      alone and has room is raised: a stage doubles while small, +50%
//      after, with more threads if its new calls would find none free; the
//      pool +50%. Each within the CPU the budget leaves, counting the CPU
//      each busy thread used and no more busy threads than active ones.
//
// Thread safety: none; one thread drives it.

#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "feedline/pipeline/stage_options.h"
#include "feedline/pipeline/stats.h"

namespace feedline::detail {

struct TunableStage {
  int index = 0;        // in PipelineStats::stages
  int concurrency = 1;  // where it starts
  int max = 1;          // its upper bound
};

class AutotuneController {
 public:
  // `cpus`: the machine's CPUs the budget is a share of.
  AutotuneController(const AutotuneOptions& options,
                     const std::vector<TunableStage>& stages, int threads,
                     int max_threads, int cpus);

  // One step with a snapshot taken now and the pool's CPU time so far.
  // Returns the changes to apply now, in order (none, one, or a stage and
  // the pool's threads together).
  std::vector<AutotuneDecision> step(const PipelineStats& stats,
                                     std::chrono::nanoseconds pool_cpu);

  double budget() const { return budget_; }  // CPUs
  double cpu_used() const { return cpu_used_; }
  int threads() const { return threads_knob_.value; }
  // The current concurrency of stage `index` (which must be tunable).
  int concurrency(int index) const;

  // A trial must raise the output rate by kGainShare of what it could give
  // at most (to / from - 1), and at least to kMinGain, to be kept: a stage
  // that shares the limit with another gives only part of its raise.
  static constexpr double kMinGain = 1.03;
  static constexpr double kGainShare = 0.1;
  // A stage whose calls keep more than this share of its concurrency busy
  // may be raised (and the pool, when its threads are this busy).
  static constexpr double kRaiseAbove = 0.6;
  // CPU use above budget * kOverBudget counts as over the budget.
  static constexpr double kOverBudget = 1.05;
  // Steps a knob is left alone after a failed trial (doubled for each
  // failure in a row, up to kMaxHoldSteps).
  static constexpr int kHoldSteps = 5;
  static constexpr int kMaxHoldSteps = 80;

 private:
  struct Knob {
    int stage = -1;  // -1: the pool's threads
    int value = 1;
    int max = 1;
    int64_t hold_until = 0;  // no trial before this step
    int failures = 0;        // failed trials in a row
  };
  struct Change {
    Knob* knob = nullptr;
    int from = 0;
    int to = 0;
  };
  struct Trial {
    bool active = false;
    int settle = 0;  // steps left to skip
    double rate_before = 0;
    double required_gain = 1;
    std::vector<Change> changes;
  };

  Knob* stage_knob(int index);
  AutotuneDecision decide(const Knob& knob, int from, int to,
                          std::string reason) const;
  std::string name_of(const Knob& knob) const;

  const double budget_;
  std::vector<Knob> stages_;
  Knob threads_knob_;
  bool has_prev_ = false;
  PipelineStats prev_;
  std::chrono::nanoseconds prev_cpu_{0};
  double cpu_used_ = 0;
  int64_t step_ = 0;
  std::chrono::nanoseconds now_{0};
  std::vector<std::string> names_;  // stage names of the latest snapshot
  Trial trial_;
};

}  // namespace feedline::detail
