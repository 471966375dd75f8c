// SPDX-License-Identifier: Apache-2.0
//
// Sampled stage activity, for a timeline: which thread ran which stage's
// call, when, and for how long. Off by default; BuildOptions::trace_every = N
// records one call in every N of each stage (the first, the N+1-th, ...),
// keeping the latest BuildOptions::trace_capacity. to_trace_json() writes
// them in the Trace Event Format that Perfetto (ui.perfetto.dev) and
// chrome://tracing open. docs/stats.md#traces.

#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "feedline/pipeline/stats.h"

namespace feedline {

struct TraceEvent {
  int stage = -1;      // index in PipelineStats::stages
  int thread = 0;      // the thread that ran the call (1, 2, ...); 0: async
  bool async = false;  // an AsyncOp call: from its start to its completion
  bool failed = false;
  std::chrono::nanoseconds start{0};  // since the pipeline started
  std::chrono::nanoseconds duration{0};
};

struct Trace {
  int every = 0;                   // one call in `every` per stage; 0: off
  uint64_t recorded = 0;           // events recorded since start
  uint64_t dropped = 0;            // of those, overwritten (over the capacity)
  std::vector<TraceEvent> events;  // the kept ones, oldest first
};

// The Trace Event Format (JSON): a process named after the pipeline, a
// thread per worker thread ("worker N"), a complete event ("X") per call
// named after its stage (category: the stage kind), async calls as
// begin/end pairs ("b"/"e") with an id, times in microseconds.
std::string to_trace_json(const Trace& trace, const PipelineStats& stats);

}  // namespace feedline
