// SPDX-License-Identifier: Apache-2.0

#include "pipeline/pipeline_impl.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <system_error>
#include <utility>

#include "feedline/base/cpus.h"
#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "pipeline/sink_runner.h"

namespace feedline::detail {

PipelineImpl::PipelineImpl(BuildOptions options)
    : generation_(fork_generation()),
      stats_hook_(std::exchange(options.stats_hook, {})),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &Clock::steady()),
      trace_(options_.trace_every > 0
                 ? std::make_unique<TraceBuffer>(options_.trace_every,
                                                 options_.trace_capacity)
                 : nullptr) {}

PipelineImpl::~PipelineImpl() {
  // Only a pipeline that no Pipeline ever owned (a failed build), or one
  // whose stop has finished, gets here: a running stop holds a reference.
  bool run = false;
  std::thread stopper;
  {
    MutexLock lock(stop_mu_);
    if (phase_ == StopPhase::kRunning) {
      phase_ = StopPhase::kStopping;
      run = true;
    }
    stopper = std::move(stopper_);
  }
  if (run) run_stop();
  if (stopper.joinable()) {
    // The stopper drops the last reference when the Pipeline went first.
    if (stopper.get_id() == std::this_thread::get_id()) {
      stopper.detach();
    } else {
      stopper.join();
    }
  }
}

void PipelineImpl::leak_if_inherited(
    std::shared_ptr<PipelineImpl>* impl) noexcept {
  if (*impl && (*impl)->inherited()) {
    // Never released. A failed allocation terminates (noexcept).
    // NOLINTNEXTLINE(bugprone-unhandled-exception-at-new)
    (void)new std::shared_ptr<PipelineImpl>(std::move(*impl));
  }
}

void PipelineImpl::check_not_inherited() const {
  if (!inherited()) return;
  throw Error("pipeline '" + options_.name +
              "' belongs to the parent process and cannot run in a child "
              "process (after fork); build a new pipeline in the child");
}

StageRunner* PipelineImpl::add_runner(std::unique_ptr<StageRunner> runner) {
  MutexLock lock(state_mu_);
  runners_.push_back(std::move(runner));
  return runners_.back().get();
}

void PipelineImpl::start() {
  check_not_inherited();
  if (started_.exchange(true)) {
    throw InvalidArgument("pipeline '" + options_.name +
                          "' was already started");
  }
  // Held throughout, so that a concurrent stop begins only once the stages
  // are started (starting submits tasks; it never waits on them).
  MutexLock lock(stop_mu_);
  if (phase_ != StopPhase::kRunning) return;
  bool report = false;
  {
    MutexLock state_lock(state_mu_);
    report = stats_hook_ && options_.report_interval.count() > 0;
  }
  // Threads first: if the OS refuses one, nothing has started, and the
  // pipeline is left as it was before start().
  try {
    std::unique_ptr<AutotuneController> autotune = make_autotune();
    pool_ = std::make_unique<ThreadPool>(pool_threads());
    pool_->set_active_threads(options_.num_threads);
    active_threads_.store(pool_->active_threads());
    if (report) {
      reporter_ = std::jthread(
          [this](const std::stop_token& stop) { run_reporter(stop); });
    }
    if (autotune) {
      {
        MutexLock state_lock(state_mu_);
        autotune_stats_.enabled = true;
        autotune_stats_.cpu_budget = autotune->budget();
      }
      autotuner_ = std::jthread([this, controller = std::move(autotune)](
                                    const std::stop_token& stop) mutable {
        run_autotune(stop, std::move(controller));
      });
    }
  } catch (const std::exception& e) {
    if (reporter_.joinable()) {
      reporter_.request_stop();
      reporter_.join();
    }
    if (pool_) pool_->shutdown();
    pool_.reset();
    started_.store(false);
    const auto* system = dynamic_cast<const std::system_error*>(&e);
    throw Error("pipeline '" + options_.name + "' could not start: " +
                (system != nullptr ? "could not start its stats reporter "
                                     "thread: "
                                   : "") +
                e.what());
  }
  Clock::time_point t = clock_->now();
  std::vector<StageRunner*> runners;
  {
    MutexLock state_lock(state_mu_);
    start_time_ = t;
    if (trace_) trace_->set_origin(t);
    for (auto& runner : runners_) runners.push_back(runner.get());
  }
  for (StageRunner* runner : runners) {
    if (!runner->inputs().empty()) runner->start(t);
  }
  for (StageRunner* runner : runners) {
    if (runner->inputs().empty()) runner->start(t);
  }
}

NextStatus PipelineImpl::wait_next(Item* out,
                                   std::optional<Pipeline::Deadline> deadline) {
  check_not_inherited();
  if (!started_.load()) start();
  // Counted like an async call: a pop can wake upstream and submit to the
  // pool, so the stop must not tear the pool down (nor release the runners)
  // while we are in here.
  {
    MutexLock lock(async_mu_);
    if (drained_) return NextStatus::kEnd;
    ++async_in_flight_;
  }
  struct Guard {
    PipelineImpl* self;
    ~Guard() { self->async_finished(); }
  };
  NextStatus status;
  {
    Guard guard{this};
    status = sink_->next(out, deadline);
  }
  if (status != NextStatus::kEnd || stopping()) return status;
  report_final_stats();
  std::exception_ptr failed = failure();
  if (failed) std::rethrow_exception(failed);
  return status;
}

bool PipelineImpl::stop(
    std::optional<std::chrono::nanoseconds> timeout) noexcept {
  if (inherited()) return true;  // nothing of it runs in this process
  bool on_pool_thread = false;
  bool run_here = false;
  bool no_stopper = false;
  {
    MutexLock lock(stop_mu_);
    on_pool_thread = pool_ && pool_->in_pool_thread();
    if (phase_ == StopPhase::kRunning) {
      phase_ = StopPhase::kStopping;
      if (timeout || on_pool_thread) {
        try {
          // The stopper keeps this object alive until the stop is done.
          stopper_ =
              std::thread([self = shared_from_this()] { self->run_stop(); });
        } catch (const std::system_error&) {
          // The OS refused the thread: stop here, or, on a pool thread
          // (which cannot join its own pool), cancel now and leave the rest
          // of the stop to the next stop() or the destructor.
          run_here = !on_pool_thread;
          no_stopper = on_pool_thread;
          if (no_stopper) phase_ = StopPhase::kRunning;
        }
      } else {
        run_here = true;
      }
    }
    // A pool thread cannot wait for a stop that joins it.
    if (on_pool_thread && !no_stopper) return phase_ == StopPhase::kStopped;
  }
  if (no_stopper) {
    cancel_all();
    return false;
  }
  if (run_here) run_stop();
  return wait_stopped(timeout);
}

bool PipelineImpl::on_worker_thread() const {
  if (inherited()) return false;
  MutexLock lock(stop_mu_);
  return pool_ && pool_->in_pool_thread();
}

void PipelineImpl::stop_unless_stopping() noexcept {
  if (inherited()) return;
  {
    MutexLock lock(stop_mu_);
    if (phase_ != StopPhase::kRunning) return;
  }
  stop(std::nullopt);
}

bool PipelineImpl::stopping() const {
  if (inherited()) return true;
  MutexLock lock(stop_mu_);
  return phase_ != StopPhase::kRunning;
}

bool PipelineImpl::wait_stopped(
    std::optional<std::chrono::nanoseconds> timeout) {
  MutexLock lock(stop_mu_);
  auto done = [this]() NO_THREAD_SAFETY_ANALYSIS {
    return phase_ == StopPhase::kStopped && !joining_;
  };
  if (timeout) {
    if (!stop_cv_.wait_until(lock.native(), deadline_after(*timeout), done))
      return false;
  } else {
    stop_cv_.wait(lock.native(), done);
  }
  if (stopper_.joinable()) {
    // Joined by one waiter; the others wait for it (joining_), so that no
    // stop() returns true while the stopper thread still exists.
    std::thread stopper = std::move(stopper_);
    joining_ = true;
    lock.unlock();
    stopper.join();
    lock.lock();
    joining_ = false;
    stop_cv_.notify_all();
  }
  return true;
}

void PipelineImpl::run_stop() noexcept {
  if (sink_ != nullptr) sink_->wake_for_stop();
  bool started;
  {
    MutexLock lock(stop_mu_);
    started = pool_ != nullptr;
  }
  if (started) cancel_all();
  stop_source_.request_stop();
  {
    MutexLock lock(async_mu_);
    async_cv_.wait(lock.native(), [this]() NO_THREAD_SAFETY_ANALYSIS {
      return async_in_flight_ == 0;
    });
    drained_ = true;
  }
  if (started) {
    if (autotuner_.joinable()) {
      autotuner_.request_stop();
      autotuner_.join();
    }
    // Runs what is left (each task ends at once: every stage is cancelled)
    // and joins. The pool object itself lives on until the destructor.
    pool_->shutdown();
    if (reporter_.joinable()) {
      reporter_.request_stop();
      reporter_.join();
    }
    if (started_.load()) report_final_stats();
  }
  // Keep the final statistics, then release the stages: their ops, sources
  // and queued items may hold resources (Python objects, say) that must not
  // live as long as the pipeline handle.
  std::vector<std::unique_ptr<StageRunner>> released;
  StatsHook hook;
  {
    MutexLock lock(state_mu_);
    final_stats_ = live_stats_locked();
    released.swap(runners_);
    hook = std::exchange(stats_hook_, {});
  }
  released.clear();
  hook = nullptr;
  MutexLock lock(stop_mu_);
  phase_ = StopPhase::kStopped;
  stop_cv_.notify_all();
}

void PipelineImpl::cancel_all() {
  std::vector<StageRunner*> runners;
  {
    MutexLock lock(state_mu_);
    for (auto& runner : runners_) runners.push_back(runner.get());
  }
  // Downstream first, so that a stage finishing on cancellation never wakes
  // a stage that is still running. Stages are cancelled before the stop token
  // fires, so that calls that give up on it find their stage cancelled (and
  // their failures are not reported as errors).
  // An index loop: clang 14 cannot use libstdc++ 12's views::reverse.
  for (std::size_t i = runners.size(); i-- > 0;) runners[i]->cancel();
  stop_source_.request_stop();
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
  cancel_producers(stage);
  std::vector<StageRunner*> sources;
  {
    MutexLock lock(state_mu_);
    for (const auto& r : runners_) {
      if (r->kind() == StageKind::kSource) sources.push_back(r.get());
    }
  }
  for (StageRunner* source : sources) source->cancel();
}

void PipelineImpl::cancel_producers(StageRunner* stage) {
  for (auto& input : stage->inputs()) {
    StageRunner* producer = input->producer();
    if (producer == nullptr) continue;
    producer->cancel();
    cancel_producers(producer);
  }
}

void PipelineImpl::kick_all() {
  {
    // A consumer of a pipeline whose stop came before its start waits in
    // the sink until the stop wakes it: no stage of it may run.
    MutexLock lock(stop_mu_);
    if (pool_ == nullptr) return;
  }
  std::vector<StageRunner*> runners;
  {
    MutexLock lock(state_mu_);
    for (const auto& r : runners_) runners.push_back(r.get());
  }
  for (StageRunner* r : runners) r->kick();
}

std::exception_ptr PipelineImpl::failure() const {
  if (inherited()) return nullptr;
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

Trace PipelineImpl::trace() const {
  if (!trace_ || inherited()) return Trace();
  return trace_->snapshot();
}

PipelineStats PipelineImpl::stats() const {
  if (inherited()) {
    PipelineStats s;
    s.name = options_.name;
    return s;
  }
  MutexLock lock(state_mu_);
  if (final_stats_) return *final_stats_;
  return live_stats_locked();
}

PipelineStats PipelineImpl::live_stats_locked() const {
  PipelineStats s;
  s.name = options_.name;
  const int active = active_threads_.load();
  s.num_threads = active > 0 ? active : options_.num_threads;
  s.autotune = autotune_stats_;
  Clock::time_point t = clock_->now();
  const Tick drained = drained_at_.load();
  if (drained != kNotDrained)
    t = std::min(t, Clock::time_point(Clock::time_point::duration(drained)));
  if (start_time_) s.elapsed = t - *start_time_;
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
  add_regions(&s);
  return s;
}

void PipelineImpl::report_consumer_gil_wait(
    std::chrono::nanoseconds wait) noexcept {
  if (sink_ != nullptr && !inherited()) sink_->record_consumer_gil_wait(wait);
}

void PipelineImpl::report_region(const std::string& region, int host_stage,
                                 int worker, int workers,
                                 std::vector<StageStats> stages) {
  if (workers < 1 || worker < 0 || worker >= workers) {
    throw InvalidArgument("report_region: worker " + std::to_string(worker) +
                          " of " + std::to_string(workers));
  }
  if (host_stage < 0 || host_stage >= next_index()) {
    throw InvalidArgument("report_region: no stage " +
                          std::to_string(host_stage));
  }
  if (inherited()) return;
  MutexLock lock(region_mu_);
  auto it =
      std::find_if(regions_.begin(), regions_.end(),
                   [&](const RegionWorkers& r) { return r.name == region; });
  if (it == regions_.end()) {
    // Kept in the order of their host stages.
    auto at = std::find_if(
        regions_.begin(), regions_.end(),
        [&](const RegionWorkers& r) { return r.host_stage > host_stage; });
    it = regions_.insert(at, RegionWorkers{region, host_stage, {}});
  }
  it->host_stage = host_stage;
  it->workers.resize(static_cast<std::size_t>(workers));
  it->workers[static_cast<std::size_t>(worker)] = std::move(stages);
}

void PipelineImpl::add_regions(PipelineStats* stats) const {
  MutexLock lock(region_mu_);
  for (const RegionWorkers& r : regions_) {
    RegionStats out;
    out.name = r.name;
    out.host_stage = r.host_stage;
    out.workers = static_cast<int>(r.workers.size());
    for (const auto& worker : r.workers) {
      if (!worker) continue;
      if (out.reporting++ == 0) {
        out.stages = *worker;
        continue;
      }
      // Workers run the same stages; a mismatched report is left out.
      if (worker->size() != out.stages.size()) {
        --out.reporting;
        continue;
      }
      for (std::size_t i = 0; i < worker->size(); ++i) {
        accumulate(&out.stages[i], (*worker)[i]);
      }
    }
    stats->regions.push_back(std::move(out));
  }
}

void PipelineImpl::report_final_stats() {
  MutexLock report_lock(report_mu_);
  if (final_reported_) return;
  final_reported_ = true;
  StatsHook hook;  // a copy: the stop may release the member meanwhile
  {
    MutexLock lock(state_mu_);
    hook = stats_hook_;
  }
  if (!hook && !options_.log_stats_at_end) return;
  PipelineStats s = stats();
  if (hook) hook(s);
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
    MutexLock report_lock(report_mu_);
    if (final_reported_) break;  // nothing may follow the final report
    StatsHook hook;
    {
      MutexLock hook_lock(state_mu_);
      hook = stats_hook_;
    }
    if (hook) hook(stats());
  }
}

}  // namespace feedline::detail

namespace feedline::detail {

int PipelineImpl::pool_threads() const {
  const AutotuneOptions& a = options_.autotune;
  if (!a.enabled) return options_.num_threads;
  return std::max(options_.num_threads,
                  a.max_threads > 0 ? a.max_threads : a.max_concurrency);
}

std::unique_ptr<AutotuneController> PipelineImpl::make_autotune() const {
  const AutotuneOptions& a = options_.autotune;
  if (!a.enabled) return nullptr;
  std::vector<TunableStage> stages;
  {
    MutexLock lock(state_mu_);
    for (const auto& runner : runners_) {
      if (!runner->tunable()) continue;
      TunableStage t;
      t.index = runner->index();
      t.concurrency = runner->snapshot(clock_->now()).concurrency;
      t.max = std::max(t.concurrency, a.max_concurrency);
      stages.push_back(t);
    }
  }
  return std::make_unique<AutotuneController>(
      a, std::move(stages), options_.num_threads, pool_threads(),
      a.cpus > 0 ? a.cpus : usable_cpus());
}

void PipelineImpl::run_autotune(
    const std::stop_token& stop,
    std::unique_ptr<AutotuneController> controller) {
  Mutex mu;
  std::condition_variable_any cv;
  MutexLock lock(mu);
  while (!stop.stop_requested()) {
    cv.wait_for(lock.native(), stop, options_.autotune.interval,
                [] { return false; });
    if (stop.stop_requested()) break;
    // pool_ is set before this thread starts and outlives it (the stop joins
    // this thread before it shuts the pool down).
    std::vector<AutotuneDecision> decisions =
        controller->step(stats(), pool_->cpu_time());
    std::vector<std::string> lines;
    for (const AutotuneDecision& d : decisions) {
      if (d.stage < 0) {
        pool_->set_active_threads(d.to);
        active_threads_.store(pool_->active_threads());
      } else {
        StageRunner* runner = nullptr;
        {
          MutexLock state_lock(state_mu_);
          const auto i = static_cast<std::size_t>(d.stage);
          if (i < runners_.size()) runner = runners_[i].get();
        }
        if (runner != nullptr) runner->set_concurrency(d.to);
      }
      lines.push_back(
          "pipeline '" + options_.name + "': autotune: " + d.target +
          (d.stage < 0 ? " " : " concurrency ") + std::to_string(d.from) +
          " -> " + std::to_string(d.to) + " (" + d.reason + ")");
    }
    {
      MutexLock state_lock(state_mu_);
      AutotuneStats& a = autotune_stats_;
      a.cpu_used = controller->cpu_used();
      for (AutotuneDecision& d : decisions) {
        if (a.decisions.size() >= AutotuneStats::kMaxDecisions) {
          a.decisions.erase(a.decisions.begin());
        }
        a.decisions.push_back(std::move(d));
        ++a.decisions_total;
      }
    }
    for (const std::string& line : lines) log(LogLevel::kInfo, line);
  }
}

}  // namespace feedline::detail
