// SPDX-License-Identifier: Apache-2.0
//
// Options of pipeline stages and of a whole pipeline.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace feedline {

class Clock;
struct PipelineStats;

// The order in which a pipe stage emits its results.
enum class OutputOrder {
  kCompletion,  // as calls finish (fastest; the default, as in SPDL)
  kInput,       // in the order the inputs arrived
};

// How many failed calls a stage (or a pipeline) tolerates before it fails.
//   - unlimited: never fails for per-item errors (the default);
//   - count n:   fails once failures > n (n = 0 fails on the first one);
//   - rate p/q:  fails once failures / calls > p/q, checked only after
//                `probation_calls` calls so that early bad luck is forgiven.
struct FailureBudget {
  enum class Kind { kUnlimited, kCount, kRate };

  Kind kind = Kind::kUnlimited;
  uint64_t count = 0;
  uint64_t numerator = 0;
  uint64_t denominator = 1;
  uint64_t probation_calls = 100;

  static FailureBudget unlimited() { return {}; }
  static FailureBudget max_count(uint64_t n);
  // Throws: InvalidArgument unless 0 < numerator / denominator <= 1.
  static FailureBudget max_rate(uint64_t numerator, uint64_t denominator,
                                uint64_t probation_calls = 100);

  // True once `failures` out of `calls` exceed the budget.
  bool exceeded(uint64_t failures, uint64_t calls) const;

  // "unlimited", "3", "10.0% after 100 calls".
  std::string to_string() const;
};

// Default capacity of the queue a stage writes to, in items (a stage may hold
// `concurrency` more results in flight). Each wake-up of the next stage moves
// up to half a queue, so deeper queues cost fewer thread handoffs per item;
// 16 keeps that cost small while bounding memory for large items (16 decoded
// images of 224x224x3 float32 are 9.6 MB). Queues after an aggregate default
// to kDefaultBatchQueueCapacity, since batches are large.
inline constexpr std::size_t kDefaultQueueCapacity = 16;
inline constexpr std::size_t kDefaultBatchQueueCapacity = 2;

struct PipeOptions {
  // Name shown in stats and errors. Default: the stage kind ("pipe").
  std::string name;
  // Maximum calls in flight. Default: 1.
  int concurrency = 1;
  OutputOrder output_order = OutputOrder::kCompletion;
  // This stage's own budget; unset means the pipeline-wide budget, counted
  // over all stages that have none of their own.
  std::optional<FailureBudget> max_failures;
  // Capacity of the queue this stage writes to, in items. 0: the default.
  std::size_t output_capacity = 0;
};

struct SourceOptions {
  std::string name = "source";
  // Re-iterate forever, with an epoch marker between passes.
  bool continuous = false;
  std::size_t output_capacity = 0;
};

using StatsHook = std::function<void(const PipelineStats&)>;

// Autotune (docs/stats.md#autotune): while the pipeline runs, a controller
// moves the concurrency of its pipe stages and the number of pool threads
// that run tasks toward the highest output rate, keeping the CPU time of the
// pool's threads within a budget. It reads the interval statistics every
// `interval`, raises the knob of the stage (or the pool) that limits the
// rate, keeps a change only if the rate rose, and lowers the pool's threads
// when the CPU use went over the budget. The stages' concurrency and
// num_threads given to the build are where it starts.
struct AutotuneOptions {
  bool enabled = false;
  // The share of the machine's CPUs the pool may use, in (0, 1]. The rest is
  // left to the trainer. Default: half.
  double cpu_budget = 0.5;
  // The machine's CPUs the budget is a share of; 0: those this process may
  // run on (sched_getaffinity).
  int cpus = 0;
  // Upper bound of a tuned stage's concurrency (a stage built with more
  // keeps its own as the bound). Tuned stages: pipe stages of a map, async
  // or generator op without state (an aggregate is not tuned).
  int max_concurrency = 32;
  // Upper bound of the pool's threads; 0: max(num_threads, max_concurrency).
  // The pool starts this many threads, num_threads of them active.
  int max_threads = 0;
  // How often the controller reads the statistics and may act.
  std::chrono::nanoseconds interval = std::chrono::milliseconds(200);
};

struct BuildOptions {
  // Threads of the worker pool that runs every op. Default: 4.
  int num_threads = 4;
  // Budget for stages without their own. Default: unlimited.
  FailureBudget max_failures;
  // Called with a snapshot every `report_interval` (when > 0) and once when
  // the pipeline ends or stops.
  StatsHook stats_hook;
  std::chrono::nanoseconds report_interval{0};
  // Log the per-stage stats table through feedline::log at the end.
  bool log_stats_at_end = false;
  // Failure logs: the first `failure_log_burst` failures of a stage are logged
  // in full, then at most one summary line per `failure_log_interval`.
  int failure_log_burst = 5;
  std::chrono::nanoseconds failure_log_interval = std::chrono::seconds(10);
  // Source of time for stats and log rate limiting. Default: steady clock.
  const Clock* clock = nullptr;
  // The pipeline's name in stats (PipelineStats::name) and errors.
  // Default: "pipeline".
  std::string name = "pipeline";
  // Tracing (trace.h): record one call in every `trace_every` of each stage
  // (0: off, the default; then nothing is sampled or stored), keeping the
  // latest `trace_capacity` events.
  int trace_every = 0;
  std::size_t trace_capacity = std::size_t{1} << 16;
  // Off by default.
  AutotuneOptions autotune;
};

}  // namespace feedline
