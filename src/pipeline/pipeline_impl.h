// SPDX-License-Identifier: Apache-2.0
//
// PipelineImpl: owns the stage runners, the worker pool and the consumer's
// side of a pipeline. See pipeline.h for the contract and docs/threading.md
// for which thread runs what.
//
// Shutdown order (stop()): every runner is cancelled (no new work), the
// consumer is woken, outstanding async calls are awaited, then the pool is
// destroyed, which runs the remaining (now trivial) worker tasks and joins its
// threads; only then may runners be destroyed. Members are declared so that
// the pool is destroyed before the runners it points into.

#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "feedline/base/clock.h"
#include "feedline/base/error.h"
#include "feedline/concurrency/mutex.h"
#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/stage_options.h"
#include "pipeline/stage_runner.h"

namespace feedline::detail {

class SinkRunner;

class PipelineImpl {
 public:
  explicit PipelineImpl(BuildOptions options);
  ~PipelineImpl();

  // Build-time wiring. add_runner() returns the stage's index.
  StageRunner* add_runner(std::unique_ptr<StageRunner> runner);
  void set_sink(SinkRunner* sink) { sink_ = sink; }
  int next_index() const { return static_cast<int>(runners_.size()); }

  void start();
  bool started() const { return started_.load(); }
  NextStatus next(Item* out, std::optional<std::chrono::nanoseconds> timeout);
  void stop() noexcept;
  PipelineStats stats() const;
  std::exception_ptr failure() const;

  // For runners.
  ThreadPool& pool() { return *pool_; }
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
  // Records a stage's failure (leaf lock) / cancels everything upstream of it.
  void record_stage_error(StageRunner* stage, std::exception_ptr error);
  void cancel_upstream(StageRunner* stage);
  void async_started();
  void async_finished();

 private:
  void report_final_stats();
  void run_reporter(const std::stop_token& stop);

  const BuildOptions options_;
  const Clock* const clock_;
  std::atomic<bool> started_{false};
  Clock::time_point start_time_{};
  std::stop_source stop_source_;

  std::atomic<uint64_t> global_calls_{0};
  std::atomic<uint64_t> global_failures_{0};

  mutable Mutex failure_mu_;
  std::vector<std::pair<int, StageError>> errors_ GUARDED_BY(failure_mu_);
  std::exception_ptr failure_ GUARDED_BY(failure_mu_);

  Mutex async_mu_;
  std::condition_variable async_cv_;
  int async_in_flight_ GUARDED_BY(async_mu_) = 0;

  Mutex stop_mu_;  // serialises stop() and the final report
  bool stopped_ GUARDED_BY(stop_mu_) = false;
  std::atomic<bool> final_reported_{false};

  // Runners outlive the pool (declared first, destroyed last).
  std::vector<std::unique_ptr<StageRunner>> runners_;
  SinkRunner* sink_ = nullptr;
  std::unique_ptr<ThreadPool> pool_;
  std::jthread reporter_;
};

}  // namespace feedline::detail
