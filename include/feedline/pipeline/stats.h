// SPDX-License-Identifier: Apache-2.0
//
// Pipeline statistics: plain value snapshots of always-on counters.
//
// Every counter is a total since the pipeline started (or zero); compute
// rates by differencing two snapshots. Durations are wall time. docs/stats.md
// defines each field and how to read it to find the stage that starves the
// consumer.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/pipeline/histogram.h"

namespace feedline {

// The queue in front of a stage (its input).
struct QueueStats {
  std::size_t capacity = 0;
  std::size_t depth = 0;      // items queued at snapshot time
  std::size_t max_depth = 0;  // the most ever queued at once
  uint64_t items_put = 0;     // items and epoch markers put
  uint64_t items_got = 0;     // items and epoch markers taken
  // Integral of depth over time; divided by (capacity * elapsed) it gives
  // the mean occupancy. Stored as item-nanoseconds.
  double depth_integral = 0;
  std::chrono::nanoseconds time_empty{0};  // while holding nothing
  std::chrono::nanoseconds time_full{0};   // while at capacity
  std::chrono::nanoseconds elapsed{0};     // span the above are measured over
  // How long the producer waited for room to put (its wait_output) and the
  // consumer waited for something to get (its wait_input).
  std::chrono::nanoseconds put_wait{0};
  std::chrono::nanoseconds get_wait{0};

  // Mean depth / capacity over `elapsed`, in [0, 1].
  double occupancy() const;
};

// One stage's counters.
struct StageStats {
  std::string name;  // display name, "<index>:<name>[<concurrency>]"
  std::string kind;  // "source", "pipe", "aggregate", ...
  int concurrency = 1;
  uint64_t items_in = 0;       // taken from the input queue (markers excluded)
  uint64_t items_out = 0;      // emitted downstream (markers excluded)
  uint64_t items_skipped = 0;  // calls that returned no result
  uint64_t calls = 0;          // op invocations (generator pulls, flushes)
  uint64_t failures = 0;       // calls that threw
  uint64_t epochs = 0;         // epoch markers forwarded
  LatencyHistogram op_time;    // duration of each call
  // Time the stage could not work because its input was empty (waiting on
  // upstream) or its output was full (waiting on downstream), with no call
  // in flight. High input wait: upstream is the bottleneck. High output
  // wait: downstream is.
  std::chrono::nanoseconds wait_input{0};
  std::chrono::nanoseconds wait_output{0};
  // Python's GIL, for stages whose calls run Python (zero for native ops):
  // how many times the calls took it, the wall time they waited to take it,
  // and the CPU time their threads used while holding it (report_gil_time()
  // in op.h; the bindings time short holds by the wall clock). Waits inside
  // a call, when the interpreter hands the GIL to another thread midway, are
  // not seen. docs/stats.md#the-gil.
  uint64_t gil_acquisitions = 0;
  std::chrono::nanoseconds gil_wait{0};
  std::chrono::nanoseconds gil_held{0};
  bool finished = false;  // ended (normally, failed or cancelled)
  bool failed = false;
  QueueStats input_queue;  // empty (capacity 0) for sources
};

// Stages that run outside the pipeline's own threads on its behalf (the
// stages of a placement region, in worker processes): reported by the host
// stage that hands them work, and summed over the workers.
struct RegionStats {
  std::string name;
  int host_stage = -1;  // index in PipelineStats::stages of the host stage
  int workers = 0;      // workers that make up the region
  int reporting = 0;    // workers whose counters are in `stages`
  std::vector<StageStats> stages;  // summed stage by stage over the workers
};

// One change the autotune controller made (AutotuneOptions).
struct AutotuneDecision {
  std::chrono::nanoseconds at{0};  // since start()
  int stage = -1;      // index in PipelineStats::stages; -1: the pool
  std::string target;  // the stage's name, or "threads"
  int from = 0;        // concurrency, or active threads, before
  int to = 0;          // ... and after
  std::string reason;  // what it saw: the figures the move rests on
};

// What autotune did and is doing (enabled only when it runs).
struct AutotuneStats {
  bool enabled = false;
  double cpu_budget = 0;  // CPUs (the share times the machine's CPUs)
  double cpu_used = 0;  // CPUs the pool used in the controller's last interval
  std::vector<AutotuneDecision> decisions;  // the latest kMaxDecisions
  uint64_t decisions_total = 0;             // including older ones
  static constexpr std::size_t kMaxDecisions = 256;
};

struct PipelineStats {
  std::string name;
  int num_threads = 0;  // of the pipeline's thread pool (active ones)
  std::chrono::nanoseconds elapsed{0};  // since start()
  std::vector<StageStats> stages;       // source(s) first, sink last
  uint64_t items_delivered = 0;         // handed to the consumer
  std::vector<RegionStats> regions;     // in the order of their host stages
  AutotuneStats autotune;
};

// The statistics of what happened between `earlier` and `now`, two
// snapshots of the same pipeline: counters, times and histograms are
// differences; concurrency, capacities and depths are `now`'s. Regions are
// `now`'s as they are (their workers report totals at their own pace).
PipelineStats stats_since(const PipelineStats& now,
                          const PipelineStats& earlier);

// Adds the counters of `from`, the same stage run elsewhere (another worker),
// to `*into`: counts, times and histograms add up, concurrency and queue
// capacities add up, `finished` holds when both have, `failed` when either
// has, and elapsed spans are the longer one.
void accumulate(StageStats* into, const StageStats& from);

// A compact binary record of `stages`, to hand counters to another process
// of the same machine (same byte order), and its inverse. Decoding checks
// every length and value. Throws: FormatError naming what is wrong.
std::string encode_stage_stats(const std::vector<StageStats>& stages);
std::vector<StageStats> decode_stage_stats(std::string_view record);

// The stage that limits throughput, and why: what find_bottleneck() reads
// from a snapshot (or the difference of two) with the rules of
// docs/stats.md#finding-the-bottleneck.
struct Bottleneck {
  // "consumer": the pipeline outpaces its consumer (nothing to fix here).
  // "gil":      Python's GIL is saturated; more threads cannot help.
  // "stage":    `stage` is at its concurrency: its calls take the time.
  // "threads":  the pool's threads are all busy; `stage` costs the most.
  // "none":     too little to tell (nothing ran yet).
  std::string kind = "none";
  int stage = -1;          // index in PipelineStats::stages, or -1
  std::string stage_name;  // its name, or empty
  std::string reason;      // the figures the verdict rests on
  std::string advice;      // what to change
};
Bottleneck find_bottleneck(const PipelineStats& stats);

// One JSON object (a single line, no trailing newline) with every field,
// and the bottleneck. docs/stats.md#json.
std::string to_json(const PipelineStats& stats);

// Reads an object of to_json() back (an export: one line of a JSON Lines
// file). Counters and histograms come back exactly, durations to the
// nanosecond within to_json()'s 9 significant digits. Throws: FormatError
// naming the field that is missing, mistyped or out of range.
PipelineStats stats_from_json(std::string_view json);

// A human-readable table, one row per stage, for logs and the demo.
std::string format_table(const PipelineStats& stats);

}  // namespace feedline
