// SPDX-License-Identifier: Apache-2.0
//
// Pipeline: a running graph of stages and the consumer's end of it.
//
// Execution model (docs/threading.md): every stage is a non-blocking state
// machine; the worker pool (BuildOptions::num_threads) runs stage tasks that
// take an input, call the op and hand the result straight to the next stage.
// A stage starts a call only when it holds a free slot in its output queue,
// so no pool thread ever blocks on a queue and the queues bound memory. Only
// the consumer blocks, in next().
//
// Lifecycle: build_pipeline() → start() (or the first next()) → next() until
// kEnd → destruction. stop() may be called at any time from any thread and
// returns once every in-flight call has finished and every thread is
// joined; the destructor calls it. A failed stage ends the pipeline: its
// upstream is cancelled, downstream drains, and next() returns the drained
// items, then throws PipelineFailure.
//
// Thread safety: next() must be called from one thread at a time; stop(),
// stats() and failure() from any thread.

#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>

#include "feedline/pipeline/item.h"
#include "feedline/pipeline/stats.h"

namespace feedline {

namespace detail {
class PipelineImpl;
}  // namespace detail

enum class NextStatus {
  kItem,      // an item was stored
  kEpochEnd,  // a continuous source finished a pass; call next() again
  kEnd,       // the pipeline ended (or was stopped); stays ended
};

class Pipeline {
 public:
  explicit Pipeline(std::unique_ptr<detail::PipelineImpl> impl);
  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;
  ~Pipeline();

  // Starts the stages. Throws: InvalidArgument if already started.
  void start();
  bool started() const;

  // Blocks until the next item, epoch end or end; starts the pipeline first
  // if needed. With a timeout, waits at most that long.
  // Throws: Timeout when the timeout passes first; PipelineFailure once the
  // items that made it through are drained, if a stage failed (and on every
  // later call).
  NextStatus next(Item* out,
                  std::optional<std::chrono::nanoseconds> timeout = {});

  // Cancels every stage, waits for in-flight calls, joins all threads.
  // Idempotent; never throws. Items still queued are discarded.
  void stop() noexcept;

  // A snapshot of every stage's counters. Cheap; callable while running.
  PipelineStats stats() const;

  // The PipelineFailure of a failed pipeline, else null.
  std::exception_ptr failure() const;

 private:
  std::unique_ptr<detail::PipelineImpl> impl_;
};

}  // namespace feedline
