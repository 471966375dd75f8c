// SPDX-License-Identifier: Apache-2.0
//
// StageRunner: the non-blocking state machine that drives one stage.
//
// A runner owns the channels in front of it (its inputs) and writes to the
// channel of the next stage (its output). Work happens in "worker" tasks on
// the pipeline's pool: a worker repeatedly takes a unit of work under the
// runner's mutex (an input item plus a reserved output slot, an epoch marker,
// the end of stream), runs it without the mutex, and delivers the results.
// When no unit is available it exits; the events that make work available
// again (deliver() from upstream, on_room() from downstream, an async
// completion) start a new worker. Nothing ever waits on a queue.
//
// Lock order: a runner never holds its own mutex while taking another
// runner's; the pipeline's failure mutex is a leaf taken under it.
//
// Thread safety: every public method may be called from any thread.

#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "feedline/base/clock.h"
#include "feedline/base/mutex.h"
#include "feedline/pipeline/spec.h"
#include "feedline/pipeline/stats.h"
#include "pipeline/channel.h"
#include "pipeline/failure_log.h"
#include "pipeline/trace_buffer.h"

namespace feedline::detail {

class PipelineImpl;

// Collects, for its lifetime on this thread, the failures that the op being
// called reports with report_element_failure() (op.h). Nests.
class ElementFailureScope {
 public:
  explicit ElementFailureScope(std::vector<std::exception_ptr>* sink);
  ~ElementFailureScope();
  ElementFailureScope(const ElementFailureScope&) = delete;
  ElementFailureScope& operator=(const ElementFailureScope&) = delete;

 private:
  std::vector<std::exception_ptr>* saved_;
};

// The GIL time that the calls run on this thread during its lifetime report
// with report_gil_time() (op.h), added to `*sink`. Nests.
struct GilTimes {
  uint64_t acquisitions = 0;
  std::chrono::nanoseconds wait{0};
  std::chrono::nanoseconds held{0};
};
class GilTimeScope {
 public:
  explicit GilTimeScope(GilTimes* sink);
  ~GilTimeScope();
  GilTimeScope(const GilTimeScope&) = delete;
  GilTimeScope& operator=(const GilTimeScope&) = delete;

 private:
  GilTimes* saved_;
};

// Calls shorter than this defer waking the next stage (see deliver()): for
// them a thread wake-up would cost more than the work.
inline constexpr std::chrono::microseconds kDeferWakeBelow{20};
// Deferred results are never held back longer than this before the producer
// starts another call (see PipeRunner::run_worker).
inline constexpr std::chrono::microseconds kDeferWakeMaxAge{100};
// A worker that has run this long yields its thread when other tasks wait.
inline constexpr std::chrono::milliseconds kWorkerTimeSlice{2};

class StageRunner {
 public:
  StageRunner(PipelineImpl* pipeline, int index, StageKind kind,
              std::string name, int concurrency);
  virtual ~StageRunner();
  StageRunner(const StageRunner&) = delete;
  StageRunner& operator=(const StageRunner&) = delete;

  // Creates an input channel with `slots` slots, fed by `producer`.
  Channel* add_input(std::size_t slots, StageRunner* producer);
  void set_output(Channel* output) { output_ = output; }
  Channel* output() const { return output_; }
  const std::vector<std::unique_ptr<Channel>>& inputs() const {
    return inputs_;
  }

  // Starts the stage's clocks and, for sources, its first worker.
  virtual void start(Clock::time_point now);

  // Upstream appended `e` to `channel` (one of ours). With `defer`, no
  // worker is started for it until the channel is half full or kick() is
  // called: a producer of cheap items defers, then kicks when its worker run
  // ends, so that one wake-up covers a run of items instead of each one.
  // `t` is the caller's recent clock reading (clock reads are not free).
  virtual void deliver(Channel* channel, Entry e, bool defer,
                       Clock::time_point t);
  // Starts a worker if there is work (after deferred deliveries).
  virtual void kick();
  // Upstream finished: no more entries will come into `channel`.
  virtual void close_input(Channel* channel);
  // Downstream freed slots in our output channel.
  void on_room();
  // Stops taking work; the stage finishes once in-flight calls are done.
  void cancel();

  const std::string& name() const { return name_; }
  int index() const { return index_; }
  StageKind kind() const { return kind_; }

  // Whether autotune may change this stage's concurrency (a pipe stage of a
  // stateless op that can run calls side by side).
  virtual bool tunable() const { return false; }
  // Changes how many calls the stage may have in flight: more start at once
  // if input is waiting; fewer take effect as calls end.
  void set_concurrency(int n);
  virtual StageStats snapshot(Clock::time_point now);

 protected:
  enum class State { kRunning, kFailing, kCancelled, kFinished };

  // Whether a new worker should start now (called under mu_).
  virtual bool wants_worker_locked() REQUIRES(mu_) = 0;
  // The body of one worker task; returns when there is nothing to do. The
  // caller has incremented active_workers_.
  virtual void run_worker() = 0;
  // True when the stage has nothing in flight and can finish.
  virtual bool idle_locked() REQUIRES(mu_) = 0;
  // Called by cancel() under mu_: releases idle in-progress state (such as
  // generators nobody is pulling) into `*graveyard`, destroyed after mu_.
  virtual void on_cancel_locked(std::vector<std::unique_ptr<ItemGenerator>>*
                                /*graveyard*/) REQUIRES(mu_) {}

  // Starts a worker if wants_worker_locked(). Returns true if it did; the
  // caller must then call submit_worker() after unlocking.
  bool claim_worker_locked() REQUIRES(mu_);
  void submit_worker();

  // Reserves `n` output slots, registering for on_room() if there are none.
  bool reserve_output(long n);
  // Appends `e` to the output channel (into a slot reserved before).
  void emit(Entry e, bool defer, Clock::time_point t);
  void kick_downstream() { output_->consumer()->kick(); }
  // Pops the head of `channel`; the freed slot is given back by
  // release_popped() after mu_ is dropped.
  Entry pop_locked(Channel* channel, Clock::time_point t) REQUIRES(mu_);
  void release_popped(Channel* channel, long n);

  // Marks the start or end of a period with nothing to do.
  void begin_wait_locked(bool on_output) REQUIRES(mu_);
  void end_wait_locked() REQUIRES(mu_);

  // Tracing (trace.h): whether to record the call about to be counted (one
  // in every BuildOptions::trace_every; never when tracing is off), and
  // recording it. Lock-free; safe with or without mu_.
  bool trace_sample() {
    TraceBuffer* trace = trace_;
    return trace != nullptr &&
           trace_tick_.fetch_add(1, std::memory_order_relaxed) %
                   static_cast<uint64_t>(trace->every()) ==
               0;
  }
  void trace_call(Clock::time_point t0, Clock::time_point t1, bool failed,
                  bool async) {
    trace_->record(index_, t0, t1, failed, async);
  }
  // Adds the GIL time of calls (report_gil_time()).
  void record_gil_locked(const GilTimes& gil) REQUIRES(mu_);
  // Counts one finished call; `failed`: it threw.
  void record_call_locked(Clock::duration elapsed, bool failed = false)
      REQUIRES(mu_);
  // Counts a failed call (after record_call_locked) and logs it through
  // `*line`. Returns true when this failure exceeds the budget: the stage is
  // then failing, and the caller must call cancel_upstream() without mu_.
  bool record_failure_locked(std::exception_ptr error, FailureLog::Line* line)
      REQUIRES(mu_);
  // Records the element failures a call reported (report_element_failure()),
  // each as record_failure_locked(); the log lines are joined into `*line`.
  bool record_element_failures_locked(std::vector<std::exception_ptr>* errors,
                                      FailureLog::Line* line) REQUIRES(mu_);
  // Fails the stage with `error`: it takes no more input and the pipeline
  // records the error now, before the stage can finish, so the consumer can
  // never see a normal end first. Takes the pipeline's (leaf) failure mutex.
  void fail_locked(std::exception_ptr error) REQUIRES(mu_);
  void cancel_upstream();
  // If the stage is idle and ending, finishes it exactly once: closes the
  // output and tells the pipeline. Called at the very end of a worker, with
  // the decision `finish` taken under mu_ by should_finish_locked().
  bool should_finish_locked() REQUIRES(mu_);
  void finish();

  Clock::time_point now() const;

  PipelineImpl* const pipeline_;
  TraceBuffer* const trace_;  // the pipeline's, or null
  std::atomic<uint64_t> trace_tick_{0};
  const int index_;
  const StageKind kind_;
  const std::string name_;
  Mutex mu_;
  int concurrency_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Channel>> inputs_;  // entries GUARDED_BY(mu_)
  Channel* output_ = nullptr;
  State state_ GUARDED_BY(mu_) = State::kRunning;
  bool input_ended_ GUARDED_BY(mu_) = false;  // end of stream handled
  int active_workers_ GUARDED_BY(mu_) = 0;
  StageStats stats_ GUARDED_BY(mu_);
  FailureLog failure_log_ GUARDED_BY(mu_);
  const FailureBudget* budget_ = nullptr;  // own budget, or null for global
  FailureBudget own_budget_;

 private:
  // Calls that did not throw: a stage that made calls and none of them
  // succeeded fails the pipeline at its end (see should_finish_locked()).
  uint64_t succeeded_calls_ GUARDED_BY(mu_) = 0;
  // The last failure held against the stage: the cause of the error that
  // ends a stage whose every call failed.
  std::exception_ptr last_error_ GUARDED_BY(mu_);
  bool waiting_ GUARDED_BY(mu_) = false;
  bool waiting_on_output_ GUARDED_BY(mu_) = false;
  Clock::time_point wait_start_ GUARDED_BY(mu_){};
};

// Creates the runner for one stage of a pipe kind (pipe, aggregate,
// disaggregate) and for the head and tail stages.
std::unique_ptr<StageRunner> make_pipe_runner(PipelineImpl* pipeline, int index,
                                              const StageSpec& spec);
std::unique_ptr<StageRunner> make_source_runner(PipelineImpl* pipeline,
                                                int index,
                                                SourceFactory factory,
                                                const SourceOptions& options);
std::unique_ptr<StageRunner> make_merge_runner(PipelineImpl* pipeline,
                                               int index, std::string name);

}  // namespace feedline::detail
