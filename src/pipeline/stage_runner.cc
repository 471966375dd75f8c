// SPDX-License-Identifier: Apache-2.0

#include "pipeline/stage_runner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "pipeline/pipeline_impl.h"

namespace feedline::detail {
namespace {

// "<index>:<name>", and "[<concurrency>]" after it for a concurrent stage.
std::string stage_label(int index, std::string name, int concurrency) {
  name.insert(0, std::to_string(index) + ":");
  if (concurrency > 1) name += "[" + std::to_string(concurrency) + "]";
  return name;
}

}  // namespace

StageRunner::StageRunner(PipelineImpl* pipeline, int index, StageKind kind,
                         std::string name, int concurrency)
    : pipeline_(pipeline),
      trace_(pipeline->trace_buffer()),
      index_(index),
      kind_(kind),
      name_(stage_label(index, std::move(name), concurrency)),
      concurrency_(concurrency) {
  MutexLock lock(mu_);
  stats_.name = name_;
  stats_.kind = to_string(kind);
  stats_.concurrency = concurrency;
  const BuildOptions& options = pipeline->options();
  failure_log_ = FailureLog(name_, options.failure_log_burst,
                            options.failure_log_interval);
}

StageRunner::~StageRunner() = default;

Channel* StageRunner::add_input(std::size_t slots, StageRunner* producer) {
  inputs_.push_back(std::make_unique<Channel>(slots, this));
  Channel* channel = inputs_.back().get();
  channel->set_producer(producer);
  if (producer != nullptr) producer->set_output(channel);
  return channel;
}

Clock::time_point StageRunner::now() const { return pipeline_->clock().now(); }

void StageRunner::start(Clock::time_point now) {
  MutexLock lock(mu_);
  for (auto& input : inputs_) input->start_clock(now);
  begin_wait_locked(/*on_output=*/false);
}

void StageRunner::deliver(Channel* channel, Entry e, bool defer,
                          Clock::time_point t) {
  bool launch = false;
  {
    MutexLock lock(mu_);
    channel->push(std::move(e), t);
    if (state_ == State::kRunning && (!defer || channel->half_full())) {
      launch = claim_worker_locked();
    }
  }
  if (launch) submit_worker();
}

void StageRunner::kick() { on_room(); }

void StageRunner::close_input(Channel* channel) {
  bool launch = false;
  bool finish_now = false;
  {
    MutexLock lock(mu_);
    channel->closed = true;
    launch = claim_worker_locked();
    if (!launch) finish_now = should_finish_locked();
  }
  if (launch) submit_worker();
  if (finish_now) finish();
}

void StageRunner::on_room() {
  bool launch = false;
  {
    MutexLock lock(mu_);
    if (state_ == State::kRunning) launch = claim_worker_locked();
  }
  if (launch) submit_worker();
}

void StageRunner::cancel() {
  bool finish_now = false;
  std::vector<std::unique_ptr<ItemGenerator>> graveyard;
  {
    MutexLock lock(mu_);
    if (state_ == State::kRunning) state_ = State::kCancelled;
    on_cancel_locked(&graveyard);
    finish_now = should_finish_locked();
  }
  graveyard.clear();
  if (finish_now) finish();
}

void StageRunner::set_concurrency(int n) {
  int launch = 0;
  {
    MutexLock lock(mu_);
    concurrency_ = std::max(n, 1);
    stats_.concurrency = concurrency_;
    if (state_ == State::kRunning) {
      while (claim_worker_locked()) ++launch;
    }
  }
  for (int i = 0; i < launch; ++i) submit_worker();
}

bool StageRunner::claim_worker_locked() {
  if (!wants_worker_locked()) return false;
  ++active_workers_;
  return true;
}

void StageRunner::submit_worker() {
  pipeline_->pool().submit([this] { run_worker(); });
}

bool StageRunner::reserve_output(long n) {
  if (output_->try_reserve(n)) return true;
  output_->producer_waiting.store(true, std::memory_order_seq_cst);
  return output_->try_reserve(n);
}

void StageRunner::emit(Entry e, bool defer, Clock::time_point t) {
  output_->consumer()->deliver(output_, std::move(e), defer, t);
}

Entry StageRunner::pop_locked(Channel* channel, Clock::time_point t) {
  return channel->pop(t);
}

void StageRunner::release_popped(Channel* channel, long n) {
  if (channel->release(n) && channel->producer() != nullptr) {
    channel->producer()->on_room();
  }
}

void StageRunner::begin_wait_locked(bool on_output) {
  if (waiting_) return;
  waiting_ = true;
  waiting_on_output_ = on_output;
  wait_start_ = now();
}

void StageRunner::end_wait_locked() {
  if (!waiting_) return;
  waiting_ = false;
  Clock::time_point t = now();
  if (t > wait_start_) {
    (waiting_on_output_ ? stats_.wait_output : stats_.wait_input) +=
        t - wait_start_;
  }
}

void StageRunner::record_gil_locked(const GilTimes& gil) {
  if (gil.acquisitions == 0) return;
  stats_.gil_acquisitions += gil.acquisitions;
  stats_.gil_wait += gil.wait;
  stats_.gil_held += gil.held;
}

void StageRunner::record_call_locked(Clock::duration elapsed, bool failed) {
  ++stats_.calls;
  if (!failed) ++succeeded_calls_;
  stats_.op_time.record(elapsed);
  // Source pulls are not calls a budget applies to (a source exception fails
  // the pipeline at once), so they do not count towards the pipeline-wide
  // rate either.
  if (budget_ == nullptr && kind_ != StageKind::kSource)
    pipeline_->count_global_call();
}

bool StageRunner::record_failure_locked(std::exception_ptr error,
                                        FailureLog::Line* line) {
  ++stats_.failures;
  // A call that fails once its stage is cancelled (the pipeline is stopping,
  // or downstream failed) most likely failed because of that: it is counted,
  // but neither logged nor held against the budget.
  if (state_ == State::kCancelled) return false;
  std::string message = describe(error);
  failure_log_.record(message, now(), line);
  last_error_ = error;
  bool exceeded = budget_ != nullptr
                      ? budget_->exceeded(stats_.failures, stats_.calls)
                      : pipeline_->count_global_failure();
  if (!exceeded || state_ != State::kRunning) return false;
  const FailureBudget& budget =
      budget_ != nullptr ? *budget_ : pipeline_->options().max_failures;
  std::string what = "stage " + name_ + " failed " +
                     std::to_string(stats_.failures) + " of " +
                     std::to_string(stats_.calls) + " calls, which exceeds ";
  if (budget_ != nullptr) {
    what += "its max_failures (" + budget.to_string() + ")";
  } else {
    // The pipeline-wide budget compares the totals of all stages without one.
    auto [failures, calls] = pipeline_->global_counts();
    what += "the pipeline-wide max_failures (" + budget.to_string() + ": " +
            std::to_string(failures) + " failures";
    if (budget.kind == FailureBudget::Kind::kRate) {
      what += " of " + std::to_string(calls) + " calls";
    }
    what += " over the stages without their own)";
  }
  what += "; last error: " + message;
  const auto& recent = failure_log_.recent();
  if (recent.size() > 1) {
    what += "; earlier errors:";
    for (std::size_t i = recent.size() - 1; i-- > 0;)
      what += " [" + recent[i] + "]";
  }
  fail_locked(std::make_exception_ptr(TooManyFailures(what, std::move(error))));
  return true;
}

bool StageRunner::record_element_failures_locked(
    std::vector<std::exception_ptr>* errors, FailureLog::Line* line) {
  bool trip = false;
  for (std::exception_ptr& error : *errors) {
    FailureLog::Line one;
    trip |= record_failure_locked(std::move(error), &one);
    if (!one.emit) continue;
    if (line->emit) line->text += "\n";
    line->emit = true;
    line->text += one.text;
  }
  errors->clear();
  return trip;
}

void StageRunner::fail_locked(std::exception_ptr error) {
  if (state_ == State::kFailing || state_ == State::kFinished) return;
  state_ = State::kFailing;
  stats_.failed = true;
  pipeline_->record_stage_error(this, std::move(error));
}

void StageRunner::cancel_upstream() { pipeline_->cancel_upstream(this); }

bool StageRunner::should_finish_locked() {
  if (state_ == State::kFinished || active_workers_ > 0 || !idle_locked()) {
    return false;
  }
  bool ending = state_ != State::kRunning || input_ended_;
  if (!ending) return false;
  if (state_ == State::kRunning && kind_ != StageKind::kSource &&
      stats_.calls > 0 && succeeded_calls_ == 0) {
    // Every call failed: however large the budget, ending normally would
    // deliver nothing with no error at all.
    std::string what = "stage " + name_ + ": all " +
                       std::to_string(stats_.calls) + " calls failed";
    const auto& recent = failure_log_.recent();
    if (!recent.empty()) what += "; last error: " + recent.back();
    fail_locked(
        std::make_exception_ptr(TooManyFailures(what, std::move(last_error_))));
  }
  state_ = State::kFinished;
  end_wait_locked();
  stats_.finished = true;
  return true;
}

void StageRunner::finish() {
  FailureLog::Line line;
  {
    MutexLock lock(mu_);
    failure_log_.flush(&line);
  }
  if (line.emit) log(LogLevel::kWarning, line.text);
  if (output_ != nullptr) output_->consumer()->close_input(output_);
}

StageStats StageRunner::snapshot(Clock::time_point t) {
  MutexLock lock(mu_);
  StageStats s = stats_;
  if (waiting_ && t > wait_start_) {
    (waiting_on_output_ ? s.wait_output : s.wait_input) += t - wait_start_;
  }
  if (!inputs_.empty()) {
    s.input_queue = inputs_[0]->snapshot(t);
    for (std::size_t i = 1; i < inputs_.size(); ++i) {
      QueueStats q = inputs_[i]->snapshot(t);
      s.input_queue.capacity += q.capacity;
      s.input_queue.depth += q.depth;
      s.input_queue.max_depth += q.max_depth;
      s.input_queue.items_put += q.items_put;
      s.input_queue.items_got += q.items_got;
      s.input_queue.depth_integral += q.depth_integral;
    }
  }
  return s;
}

}  // namespace feedline::detail
