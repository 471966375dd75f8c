// SPDX-License-Identifier: Apache-2.0

#include "pipeline/pipeline_impl.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "pipeline/sink_runner.h"

namespace feedline::detail {

PipelineImpl::PipelineImpl(BuildOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &Clock::steady()) {}

PipelineImpl::~PipelineImpl() { stop(); }

StageRunner* PipelineImpl::add_runner(std::unique_ptr<StageRunner> runner) {
  runners_.push_back(std::move(runner));
  return runners_.back().get();
}

void PipelineImpl::start() {
  if (started_.exchange(true)) {
    throw InvalidArgument("pipeline '" + options_.name +
                          "' was already started");
  }
  {
    MutexLock lock(stop_mu_);
    if (stopped_) return;
    pool_ = std::make_unique<ThreadPool>(options_.num_threads);
  }
  start_time_ = clock_->now();
  for (auto& runner : runners_) {
    if (!runner->inputs().empty()) runner->start(start_time_);
  }
  for (auto& runner : runners_) {
    if (runner->inputs().empty()) runner->start(start_time_);
  }
  if (options_.stats_hook && options_.report_interval.count() > 0) {
    reporter_ = std::jthread(
        [this](const std::stop_token& stop) { run_reporter(stop); });
  }
}

NextStatus PipelineImpl::next(Item* out,
                              std::optional<std::chrono::nanoseconds> timeout) {
  if (!started_.load()) start();
  // Counted like an async call: a pop can wake upstream and submit to the
  // pool, so stop() must not tear the pool down while we are in here.
  struct Guard {
    PipelineImpl* self;
    ~Guard() { self->async_finished(); }
  };
  async_started();
  NextStatus status;
  {
    Guard guard{this};
    status = sink_->next(out, timeout);
  }
  if (status != NextStatus::kEnd) return status;
  report_final_stats();
  std::exception_ptr failed = failure();
  if (failed) std::rethrow_exception(failed);
  return status;
}

void PipelineImpl::stop() noexcept {
  {
    MutexLock lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (sink_ != nullptr) sink_->wake_for_stop();
  // Downstream first, so that a stage finishing on cancellation never wakes
  // a stage that is still running. Stages are cancelled before the stop token
  // fires, so that calls that give up on it find their stage cancelled (and
  // their failures are not reported as errors).
  if (pool_) {
    for (std::size_t i = runners_.size(); i-- > 0;) runners_[i]->cancel();
  }
  stop_source_.request_stop();
  if (!pool_) return;  // never started: no stage ever ran
  {
    MutexLock lock(async_mu_);
    async_cv_.wait(lock.native(), [this]() NO_THREAD_SAFETY_ANALYSIS {
      return async_in_flight_ == 0;
    });
  }
  // Runs what is left (each task ends at once: every stage is cancelled) and
  // joins. The pool object itself lives on until the destructor, since a
  // worker may still submit a follow-up task while the queue drains.
  if (pool_) pool_->shutdown();
  if (reporter_.joinable()) {
    reporter_.request_stop();
    reporter_.join();
  }
  if (started_.load()) report_final_stats();
}

void PipelineImpl::count_global_call() {
  if (options_.max_failures.kind == FailureBudget::Kind::kRate) {
    global_calls_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool PipelineImpl::count_global_failure() {
  uint64_t failures = global_failures_.fetch_add(1) + 1;
  return options_.max_failures.exceeded(failures, global_calls_.load());
}

void PipelineImpl::record_stage_error(StageRunner* stage,
                                      std::exception_ptr error) {
  MutexLock lock(failure_mu_);
  // Kept in stage order (source first), whatever order they failed in.
  auto at = std::upper_bound(
      errors_.begin(), errors_.end(), stage->index(),
      [](int index, const auto& e) { return index < e.first; });
  std::string what = describe(error);
  errors_.insert(
      at, {stage->index(),
           StageError{stage->name(), std::move(error), std::move(what)}});
  std::vector<StageError> ordered;
  for (const auto& e : errors_) ordered.push_back(e.second);
  failure_ = std::make_exception_ptr(PipelineFailure(std::move(ordered)));
}

void PipelineImpl::cancel_upstream(StageRunner* stage) {
  for (auto& input : stage->inputs()) {
    StageRunner* producer = input->producer();
    if (producer == nullptr) continue;
    producer->cancel();
    cancel_upstream(producer);
  }
}

std::exception_ptr PipelineImpl::failure() const {
  MutexLock lock(failure_mu_);
  return failure_;
}

void PipelineImpl::async_started() {
  MutexLock lock(async_mu_);
  ++async_in_flight_;
}

void PipelineImpl::async_finished() {
  MutexLock lock(async_mu_);
  if (--async_in_flight_ == 0) async_cv_.notify_all();
}

PipelineStats PipelineImpl::stats() const {
  PipelineStats s;
  s.name = options_.name;
  Clock::time_point t = clock_->now();
  if (started_.load()) s.elapsed = t - start_time_;
  for (const auto& runner : runners_) {
    s.stages.push_back(runner->snapshot(t));
  }
  // Queue waits: each side's wait, seen from the queue between them.
  for (std::size_t i = 0; i < runners_.size(); ++i) {
    StageStats& stage = s.stages[i];
    stage.input_queue.get_wait = stage.wait_input;
    for (const auto& input : runners_[i]->inputs()) {
      StageRunner* producer = input->producer();
      if (producer == nullptr) continue;
      stage.input_queue.put_wait +=
          s.stages[static_cast<std::size_t>(producer->index())].wait_output;
    }
  }
  if (sink_ != nullptr) s.items_delivered = s.stages.back().items_out;
  return s;
}

void PipelineImpl::report_final_stats() {
  if (final_reported_.exchange(true)) return;
  if (!options_.stats_hook && !options_.log_stats_at_end) return;
  PipelineStats s = stats();
  if (options_.stats_hook) options_.stats_hook(s);
  if (options_.log_stats_at_end) log(LogLevel::kInfo, format_table(s));
}

void PipelineImpl::run_reporter(const std::stop_token& stop) {
  Mutex mu;
  std::condition_variable_any cv;
  MutexLock lock(mu);
  while (!stop.stop_requested()) {
    cv.wait_for(lock.native(), stop, options_.report_interval,
                [] { return false; });
    if (stop.stop_requested()) break;
    options_.stats_hook(stats());
  }
}

}  // namespace feedline::detail
