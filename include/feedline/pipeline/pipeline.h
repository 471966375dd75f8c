// SPDX-License-Identifier: Apache-2.0
//
// Pipeline: a running graph of stages and the consumer's end of it.
//
// Execution model (docs/threading.md): every stage is a non-blocking state
// machine; the worker pool (BuildOptions::num_threads) runs stage tasks that
// take an input, call the op and hand the result straight to the next stage.
// A stage starts a call only when it holds a free slot in its output queue,
// so no pool thread ever blocks on a queue and the queues bound memory. Only
// the consumer blocks, in wait_next()/next().
//
// Lifecycle: build_pipeline() → start() (or the first read) → wait_next() or
// next() until kEnd → stop() or destruction. A failed stage ends the
// pipeline: its upstream is cancelled, downstream drains, and the reads
// return the drained items, then throw PipelineFailure.
//
// Stopping: the first stop() cancels every stage, waits for the calls in
// flight, joins the pool and then releases the stages (their ops, sources and
// queued items); later calls wait for that same stop. A stop with a timeout,
// or one asked for on one of the pipeline's own pool threads, runs on a
// stopper thread the pipeline owns, so the caller can give up waiting while
// an op is stuck in a call; the stop still completes once the call returns.
// stats() and failure() keep their final values after the stop. The
// destructor stops a pipeline nobody stopped (blocking, as stop()); one
// whose stop is already under way is left to its stopper, which keeps what
// it needs alive, so destroying it never waits for a stuck op.
//
// Thread safety: every method may be called from any thread, concurrently;
// consumers calling wait_next()/next() from several threads take turns, one
// wait at a time. stop() called on one
// of the pipeline's own pool threads (an op, a finalizer that runs there)
// never waits: it starts the stop and returns.
//
// Fork: in a child process a pipeline inherited from the parent is dead
// (feedline/concurrency/fork.h): start() and reads throw Error, stop()
// returns true at once, stopping() is true, stats() holds only the name and
// failure() is null; destroying it leaks it. A child builds its own.

#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "feedline/pipeline/item.h"
#include "feedline/pipeline/stats.h"
#include "feedline/pipeline/trace.h"

namespace feedline {

namespace detail {
class PipelineImpl;
}  // namespace detail

enum class NextStatus {
  kItem,         // an item was stored
  kEpochEnd,     // a continuous source finished a pass; read again
  kEnd,          // the pipeline ended (or was stopped); stays ended
  kTimeout,      // wait_next(): the deadline passed first; nothing was lost
  kInterrupted,  // wait_next() with an interrupt: it asked to stop waiting
};

class Pipeline {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  explicit Pipeline(std::unique_ptr<detail::PipelineImpl> impl);
  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;
  ~Pipeline();

  // Starts the stages. Does nothing once the pipeline is stopped.
  // Throws: InvalidArgument if already started; Error if the OS refuses a
  // thread (nothing is left running, and a later start() or read tries
  // again); Error in a child process for a pipeline of the parent.
  void start();
  bool started() const;

  // Blocks until the next item, epoch end or end, or until `deadline` (none:
  // no limit); starts the pipeline first if needed. Returns kTimeout when the
  // deadline passes first, and kEnd at once after stop().
  // Throws: PipelineFailure once the items that made it through are drained,
  // if a stage failed (and on every later call until stop()).
  NextStatus wait_next(Item* out, std::optional<Deadline> deadline = {});

  // wait_next() that calls `interrupt` (on this thread) each time it has
  // waited `interval` without an entry, and when the deadline passes, and
  // returns kInterrupted as soon as that returns true; nothing is lost, a
  // later wait returns what was next. `interrupt` runs with no engine lock
  // held. Lets a consumer handle outside events (e.g. signals) while it waits.
  // Throws: what `interrupt` throws; as wait_next().
  NextStatus wait_next(Item* out, std::optional<Deadline> deadline,
                       const std::function<bool()>& interrupt,
                       std::chrono::nanoseconds interval);

  // wait_next() with a timeout instead of a deadline (and with an interrupt
  // when given, as above: then it may return kInterrupted).
  // Throws: Timeout when the timeout passes first; as wait_next().
  NextStatus next(Item* out,
                  std::optional<std::chrono::nanoseconds> timeout = {});
  NextStatus next(Item* out, std::optional<std::chrono::nanoseconds> timeout,
                  const std::function<bool()>& interrupt,
                  std::chrono::nanoseconds interval);

  // Stops the pipeline (see "Stopping" above) and waits until it is fully
  // stopped: every in-flight call finished, every thread joined, the stages
  // released. Items still queued are discarded. Idempotent; never throws. On
  // one of the pipeline's own pool threads it returns without waiting.
  void stop() noexcept;

  // As stop(), but waits at most `timeout` (0: not at all). Returns true once
  // fully stopped; false while the stop still runs, on the stopper thread.
  // Call again to wait for the same stop. Never throws.
  bool stop(std::chrono::nanoseconds timeout) noexcept;

  // True once a stop has begun (it may still be running).
  bool stopping() const;

  // True when called on one of this pipeline's pool threads (in an op):
  // there stop() only requests the stop, as it cannot wait for itself.
  bool on_worker_thread() const;

  // A snapshot of every stage's counters. Cheap; callable while running.
  // After the stop: the final counters, the same on every call.
  PipelineStats stats() const;

  // The sampled calls so far (BuildOptions::trace_every; empty when off).
  // Write them out with to_trace_json(trace(), stats()).
  Trace trace() const;

  // Records the latest counters of worker `worker` (of `workers`) of a
  // region: stages that run on the pipeline's behalf outside its threads
  // (the stages of a placement region, in worker processes), fed by stage
  // `host_stage`. From then on stats() lists the region after its host with
  // each stage's counters summed over the workers that have reported.
  // `stages` are totals, so a later report replaces an earlier one. Cheap
  // and thread-safe; ignored once the stop has kept the final statistics.
  // Throws: InvalidArgument for a worker outside [0, workers) or a host
  // stage that does not exist.
  void report_region(const std::string& region, int host_stage, int worker,
                     int workers, std::vector<StageStats> stages);

  // Records that the consumer, after taking an item, waited `wait` before it
  // could go on: a Python consumer retaking the GIL. Counted on the sink
  // stage as one GIL acquisition and its wait, so that find_bottleneck()
  // does not name as slow a consumer that the pipeline's own Python stages
  // held back. Cheap, thread-safe, never throws.
  void report_consumer_gil_wait(std::chrono::nanoseconds wait) noexcept;

  // The PipelineFailure of a failed pipeline, else null. Kept after stop().
  std::exception_ptr failure() const;

  // The failure() once the stop has finished, handed out once: null before
  // the stop finishes and on every later call. Lets a consumer take over the
  // error (convert it, drop what it references) exactly once. Never waits.
  std::exception_ptr take_failure();

  // The consumers inside a wait_next()/next() now (at most 1; others wait for
  // their turn).
  int consumers_waiting() const;

 private:
  // Shared with a running stopper thread, which may outlive this object.
  std::shared_ptr<detail::PipelineImpl> impl_;
};

}  // namespace feedline
