// SPDX-License-Identifier: Apache-2.0
//
// PipelineImpl: owns the stage runners, the worker pool and the consumer's
// side of a pipeline. See pipeline.h for the contract and docs/threading.md
// for which thread runs what.
//
// Shutdown order (run_stop()): every runner is cancelled (no new work), the
// consumer is woken, outstanding async calls (and consumer reads) are
// awaited, then the pool is shut down, which runs the remaining (now trivial)
// worker tasks and joins its threads; the final statistics are kept and only
// then are the runners (with the ops they hold) destroyed. A stop runs inline
// on the caller or on stopper_, a thread that holds a reference to this
// object, so that a Pipeline may be destroyed while its stop still runs.
//
// Fork: a PipelineImpl inherited by a child process (inherited()) touches
// none of its locks or threads there; Pipeline leaks it instead of
// destroying it (leak_if_inherited()).
//
// Lock order: stop_mu_ (held by start()) before state_mu_, before a
// runner's mutex (stats()); async_mu_ is never held with another lock;
// failure_mu_ is a leaf.

#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "feedline/base/clock.h"
#include "feedline/base/error.h"
#include "feedline/base/mutex.h"
#include "feedline/concurrency/fork.h"
#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/stage_options.h"
#include "pipeline/autotune.h"
#include "pipeline/stage_runner.h"
#include "pipeline/trace_buffer.h"

namespace feedline::detail {

class SinkRunner;

class PipelineImpl : public std::enable_shared_from_this<PipelineImpl> {
 public:
  explicit PipelineImpl(BuildOptions options);
  ~PipelineImpl();

  // Build-time wiring. add_runner() returns the stage's index.
  StageRunner* add_runner(std::unique_ptr<StageRunner> runner);
  void set_sink(SinkRunner* sink) { sink_ = sink; }
  int next_index() const {
    MutexLock lock(state_mu_);
    return static_cast<int>(runners_.size());
  }

  void start();
  bool started() const { return started_.load(); }
  NextStatus wait_next(Item* out, std::optional<Pipeline::Deadline> deadline);
  // Starts the stop (first call) and waits at most `timeout` (none: until
  // done) for it. Requires: owned by a std::shared_ptr.
  bool stop(std::optional<std::chrono::nanoseconds> timeout) noexcept;
  // For ~Pipeline: stops a pipeline whose stop has not begun (blocking, as
  // stop()); leaves one that is stopping to its stopper.
  void stop_unless_stopping() noexcept;
  bool stopping() const;
  bool on_worker_thread() const;
  PipelineStats stats() const;
  Trace trace() const;
  // Where sampled calls go, or null when tracing is off.
  TraceBuffer* trace_buffer() const { return trace_.get(); }
  void report_region(const std::string& region, int host_stage, int worker,
                     int workers, std::vector<StageStats> stages);
  void report_consumer_gil_wait(std::chrono::nanoseconds wait) noexcept;
  std::exception_ptr failure() const;

  // True in a child process for a pipeline made before the fork.
  bool inherited() const { return inherited_from_parent(generation_); }
  // Empties `*impl` without destroying an inherited pipeline (its condition
  // variables may have waiters that no longer exist).
  static void leak_if_inherited(std::shared_ptr<PipelineImpl>* impl) noexcept;
  // Throws Error when inherited() (the first thing start() and reads do).
  void check_not_inherited() const;

  // For Pipeline: consumers take turns (`consumer_busy` while one has it; a
  // consumer waiting for its turn keeps its deadline); `consumers_waiting`
  // counts those whose turn it is (inside a wait); take_failure() hands the
  // failure once.
  Mutex consumer_mu;
  std::condition_variable consumer_cv;
  bool consumer_busy GUARDED_BY(consumer_mu) = false;
  std::atomic<int> consumers_waiting{0};
  std::atomic<bool> failure_taken{false};

  // For runners.
  ThreadPool& pool() { return *pool_; }
  // Kicks every stage (StageRunner::kick()): starts a worker wherever there
  // is work that nobody woke a worker for. For a starving consumer.
  void kick_all();
  // The sink's consumer read the end of the stream at `t` (the first call
  // counts): the statistics' clock stops there, so that the time between
  // the end and stop() (or a later stats() call) does not dilute rates and
  // busy fractions.
  void note_drained(Clock::time_point t) {
    Tick none = kNotDrained;
    drained_at_.compare_exchange_strong(none, t.time_since_epoch().count());
  }
  const Clock& clock() const { return *clock_; }
  const BuildOptions& options() const { return options_; }
  std::stop_token stop_token() const { return stop_source_.get_token(); }
  // Pipeline-wide failure budget, shared by stages without their own.
  void count_global_call();
  bool count_global_failure();  // true when exceeded
  // (failures, calls) counted against the pipeline-wide budget so far.
  std::pair<uint64_t, uint64_t> global_counts() const {
    return {global_failures_.load(), global_calls_.load()};
  }
  // Records a stage's failure (leaf lock) / cancels everything upstream of
  // a failed stage, and every source (the other inputs of a merge would go
  // on feeding the sink, forever from continuous sources): what is in
  // flight drains, then the consumer gets the failure.
  void record_stage_error(StageRunner* stage, std::exception_ptr error);
  void cancel_upstream(StageRunner* stage);
  void cancel_producers(StageRunner* stage);
  void async_started();
  void async_finished();

 private:
  enum class StopPhase { kRunning, kStopping, kStopped };

  // The work of a stop; runs once, on the caller or on stopper_.
  void run_stop() noexcept;
  // Cancels every stage (downstream first) and fires the stop token.
  void cancel_all();
  // Waits for phase kStopped and joins the stopper.
  bool wait_stopped(std::optional<std::chrono::nanoseconds> timeout);
  PipelineStats live_stats_locked() const REQUIRES(state_mu_);
  void report_final_stats();
  void run_reporter(const std::stop_token& stop);
  // The autotune loop (AutotuneOptions), on autotuner_.
  void run_autotune(const std::stop_token& stop,
                    std::unique_ptr<AutotuneController> controller);
  // The controller for this pipeline's stages, or null when autotune is off.
  std::unique_ptr<AutotuneController> make_autotune() const;
  // Pool threads to start, and of them active at first.
  int pool_threads() const;

  const uint64_t generation_;  // fork generation of the creating process
  // Held apart from options_ so that the stop can release it (it may hold
  // a Python callable).
  StatsHook stats_hook_ GUARDED_BY(state_mu_);
  const BuildOptions options_;
  const Clock* const clock_;
  std::atomic<bool> started_{false};
  std::stop_source stop_source_;

  std::atomic<uint64_t> global_calls_{0};
  std::atomic<uint64_t> global_failures_{0};

  mutable Mutex failure_mu_;
  std::vector<std::pair<int, StageError>> errors_ GUARDED_BY(failure_mu_);
  std::exception_ptr failure_ GUARDED_BY(failure_mu_);

  Mutex async_mu_;
  std::condition_variable async_cv_;
  int async_in_flight_ GUARDED_BY(async_mu_) = 0;
  // Set by the stop once nothing is in flight: reads return kEnd from then
  // on without touching the (released) runners.
  bool drained_ GUARDED_BY(async_mu_) = false;

  mutable Mutex stop_mu_;
  std::condition_variable stop_cv_;
  StopPhase phase_ GUARDED_BY(stop_mu_) = StopPhase::kRunning;
  bool joining_ GUARDED_BY(stop_mu_) = false;  // a waiter joins stopper_
  std::thread stopper_ GUARDED_BY(stop_mu_);
  // Serialises the stats reports (periodic and final) and the hook calls,
  // so that the final report is the last one the hook sees. Held while the
  // hook runs: a hook must not wait for the pipeline (see docs/threading.md).
  Mutex report_mu_;
  bool final_reported_ GUARDED_BY(report_mu_) = false;

  // Runners outlive the pool (declared first, destroyed last); the stop
  // releases them, after keeping their final statistics.
  mutable Mutex state_mu_;
  std::vector<std::unique_ptr<StageRunner>> runners_ GUARDED_BY(state_mu_);
  std::optional<Clock::time_point> start_time_ GUARDED_BY(state_mu_);
  std::optional<PipelineStats> final_stats_ GUARDED_BY(state_mu_);
  AutotuneStats autotune_stats_ GUARDED_BY(state_mu_);
  // The pool's active threads (autotune changes them).
  std::atomic<int> active_threads_{0};
  // note_drained()'s time, as a count of Clock::time_point's ticks.
  using Tick = Clock::time_point::rep;
  static constexpr Tick kNotDrained = std::numeric_limits<Tick>::min();
  std::atomic<Tick> drained_at_{kNotDrained};

  // The latest counters of every region's workers (report_region()); a leaf
  // lock, taken under state_mu_ by the snapshots.
  struct RegionWorkers {
    std::string name;
    int host_stage = 0;
    std::vector<std::optional<std::vector<StageStats>>> workers;
  };
  mutable Mutex region_mu_;
  std::vector<RegionWorkers> regions_ GUARDED_BY(region_mu_);
  void add_regions(PipelineStats* stats) const;
  SinkRunner* sink_ = nullptr;
  // Made by start() under stop_mu_, before any runner can use it; kept
  // until destruction, since a draining worker may still submit to it.
  std::unique_ptr<ThreadPool> pool_;
  std::jthread reporter_;
  // Joined by the stop before the pool shuts down.
  std::jthread autotuner_;
  const std::unique_ptr<TraceBuffer> trace_;  // null when tracing is off
};

}  // namespace feedline::detail
