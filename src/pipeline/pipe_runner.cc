// SPDX-License-Identifier: Apache-2.0
//
// PipeRunner: runs a pipe, aggregate or disaggregate stage.
//
// Units of work, taken under mu_ with their output slots reserved:
//   kCall  - pop an input item and call a map op, start an async call, or
//            start a generator and pull it once;
//   kPull  - pull an idle generator once;
//   kEpoch - the epoch marker at the head of the input, once nothing is in
//            flight: flush a stateful op, then forward the marker;
//   kEnd   - end of input for a stateful op: flush it.
// In completion order a worker emits its result right after the call. In
// input order results wait in `reorder_` and one worker at a time (the one
// that finds `delivering_` clear) emits the ready prefix, so results can
// never overtake each other.

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cxxabi.h>

#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "pipeline/pipeline_impl.h"
#include "pipeline/stage_runner.h"

namespace feedline::detail {
namespace {

struct Generator {
  std::unique_ptr<ItemGenerator> gen;
  bool busy = false;
};

struct Unit {
  enum Kind { kNone, kCall, kPull, kEpoch, kEnd };
  Kind kind = kNone;
  Item input;
  uint64_t seq = 0;
  Generator* gen = nullptr;
};

struct Outcome {
  bool valid = false;
  Unit::Kind kind = Unit::kNone;
  uint64_t seq = 0;
  Generator* gen = nullptr;
  bool emitted = false;    // a result went downstream (completion order)
  bool deferred = false;   // ... without waking the next stage
  Item result;             // kept for input order
  bool called = false;     // an op call happened (counts in stats)
  bool exhausted = false;  // the generator is done
  std::exception_ptr error;
  std::vector<std::exception_ptr> element_failures;  // reported by the op
  GilTimes gil;                                      // reported by the op
  Clock::duration elapsed{};
};

struct ReorderSlot {
  bool done = false;
  Item item;
};

class PipeRunner final : public StageRunner, public CompletionTarget {
 public:
  PipeRunner(PipelineImpl* pipeline, int index, const StageSpec& spec)
      : StageRunner(pipeline, index, spec.kind, spec.options.name,
                    spec.options.concurrency),
        op_(spec.op),
        op_kind_(spec.op->kind()),
        stateful_(spec.op->stateful()),
        tunable_(spec.kind == StageKind::kPipe && !stateful_ &&
                 !(op_kind_ == OpKind::kGenerator &&
                   spec.options.output_order == OutputOrder::kInput)),
        // A stage autotune may widen reorders from the start.
        in_order_(spec.options.output_order == OutputOrder::kInput &&
                  (spec.options.concurrency > 1 ||
                   (tunable_ && pipeline->options().autotune.enabled))) {
    if (spec.options.max_failures) {
      own_budget_ = *spec.options.max_failures;
      budget_ = &own_budget_;
    }
  }

  ~PipeRunner() override = default;

  void complete(uint64_t token, Item result,
                std::exception_ptr error) noexcept override;
  bool tunable() const override { return tunable_; }

 protected:
  bool wants_worker_locked() override REQUIRES(mu_);
  void run_worker() override;
  bool idle_locked() override REQUIRES(mu_) {
    return occupied_ == 0 && generators_.empty() && !delivering_ &&
           reorder_.empty() && !barrier_;
  }

 private:
  Channel* input() const { return inputs_[0].get(); }
  int worker_limit() const REQUIRES(mu_) {
    return op_kind_ == OpKind::kAsync ? 1 : concurrency_;
  }
  bool take_unit_locked(Unit* u, long* popped, Clock::time_point t)
      REQUIRES(mu_);
  bool take_unit_inner_locked(Unit* u, long* popped, Clock::time_point t)
      REQUIRES(mu_);
  // Runs `u`; `*t` is set to the clock reading at its end.
  Outcome execute(Unit& u, Clock::time_point* t);
  void start_async(Unit& u);
  void complete_locked(Outcome& o, FailureLog::Line* line, bool* trip)
      REQUIRES(mu_);
  // Moves the ready prefix of reorder_ into `out` if no other thread is
  // delivering; keeps `*deliverer` in step with delivering_.
  void collect_ordered_locked(std::vector<Entry>* out, bool* deliverer)
      REQUIRES(mu_);
  void drop_generators_locked(std::vector<std::unique_ptr<ItemGenerator>>* out)
      REQUIRES(mu_);
  void on_cancel_locked(std::vector<std::unique_ptr<ItemGenerator>>* graveyard)
      override REQUIRES(mu_) {
    drop_generators_locked(graveyard);
  }
  // The tail shared by workers and async completions: logs, cancellation,
  // slot release, ordered delivery.
  void after_unlock(const FailureLog::Line& line, bool trip, long popped,
                    std::vector<Entry>* ordered, bool defer,
                    Clock::time_point t);

  const OpPtr op_;
  const OpKind op_kind_;
  const bool stateful_;
  const bool tunable_;
  const bool in_order_;

  // Errors an async op threw after handing its call on (see start_async());
  // the first is logged.
  uint64_t late_errors_ GUARDED_BY(mu_) = 0;
  int occupied_ GUARDED_BY(mu_) = 0;  // calls in flight + live generators
  std::vector<std::unique_ptr<Generator>> generators_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  uint64_t emit_seq_ GUARDED_BY(mu_) = 0;
  std::deque<ReorderSlot> reorder_ GUARDED_BY(mu_);
  bool delivering_ GUARDED_BY(mu_) = false;
  // An epoch marker or end-of-stream flush is running: nothing else may start
  // until it has been emitted, or an item of the next epoch could overtake
  // the marker.
  bool barrier_ GUARDED_BY(mu_) = false;
  // Whether the last failed take_unit_locked() lacked output room (rather
  // than input); decides which wait the idle time counts as.
  bool blocked_on_output_ GUARDED_BY(mu_) = false;
  std::unordered_map<uint64_t, Clock::time_point> async_started_
      GUARDED_BY(mu_);
};

bool PipeRunner::wants_worker_locked() {
  if (state_ != State::kRunning || active_workers_ >= worker_limit()) {
    return false;
  }
  bool idle_generator = false;
  for (auto& g : generators_) idle_generator |= !g->busy;
  if (idle_generator) return true;
  Channel* in = input();
  if (in->entries.empty()) {
    return in->closed && !input_ended_ && active_workers_ == 0;
  }
  if (in->entries.front().epoch_end) return active_workers_ == 0;
  if (occupied_ >= concurrency_) return false;
  // One more worker only when more is queued than workers free to take it
  // (a worker inside a call is not free: it may be in there for long).
  int free_workers =
      active_workers_ - (op_kind_ == OpKind::kMap ? occupied_ : 0);
  return static_cast<int>(in->entries.size()) > free_workers;
}

bool PipeRunner::take_unit_locked(Unit* u, long* popped, Clock::time_point t) {
  blocked_on_output_ = true;
  bool taken = take_unit_inner_locked(u, popped, t);
  if (taken) blocked_on_output_ = false;
  return taken;
}

bool PipeRunner::take_unit_inner_locked(Unit* u, long* popped,
                                        Clock::time_point t) {
  if (state_ != State::kRunning || barrier_) return false;
  for (auto& g : generators_) {
    if (g->busy) continue;
    if (!reserve_output(1)) return false;
    g->busy = true;
    u->kind = Unit::kPull;
    u->gen = g.get();
    return true;
  }
  Channel* in = input();
  bool drained =
      occupied_ == 0 && generators_.empty() && !delivering_ && reorder_.empty();
  if (in->entries.empty()) {
    blocked_on_output_ = false;
    if (!in->closed || input_ended_ || !drained) return false;
    input_ended_ = true;
    if (!stateful_) return false;
    if (!reserve_output(1)) {
      input_ended_ = false;
      return false;
    }
    u->kind = Unit::kEnd;
    barrier_ = true;
    return true;
  }
  if (in->entries.front().epoch_end) {
    if (!drained || !reserve_output(stateful_ ? 2 : 1)) return false;
    pop_locked(in, t);
    ++*popped;
    u->kind = Unit::kEpoch;
    barrier_ = true;
    return true;
  }
  if (occupied_ >= concurrency_ || !reserve_output(1)) return false;
  u->input = std::move(pop_locked(in, t).item);
  ++*popped;
  ++stats_.items_in;
  ++occupied_;
  u->kind = Unit::kCall;
  if (in_order_) {
    u->seq = next_seq_++;
    reorder_.emplace_back();
  }
  if (op_kind_ == OpKind::kGenerator) {
    generators_.push_back(std::make_unique<Generator>());
    generators_.back()->busy = true;
    u->gen = generators_.back().get();
  } else if (op_kind_ == OpKind::kAsync) {
    if (!in_order_) u->seq = next_seq_++;
    async_started_.emplace(u->seq, t);
    pipeline_->async_started();
  }
  return true;
}

Outcome PipeRunner::execute(Unit& u, Clock::time_point* t_end) {
  Outcome o;
  o.valid = true;
  o.kind = u.kind;
  o.seq = u.seq;
  o.gen = u.gen;
  Clock::time_point t0 = now();
  Item result;
  ElementFailureScope element_failures(&o.element_failures);
  GilTimeScope gil(&o.gil);
  try {
    switch (u.kind) {
      case Unit::kCall:
        o.called = true;
        if (op_kind_ == OpKind::kMap) {
          result = static_cast<MapOp&>(*op_).call(std::move(u.input));
          break;
        }
        u.gen->gen = static_cast<GeneratorOp&>(*op_).start(std::move(u.input));
        if (!u.gen->gen)
          throw Internal("generator op " + name() + " started no generator");
        [[fallthrough]];
      case Unit::kPull:
        o.called = true;  // a pull that throws is a failed call
        o.called = u.gen->gen->next(&result);
        o.exhausted = !o.called;
        break;
      case Unit::kEpoch:
      case Unit::kEnd:
        if (stateful_) {
          o.called = true;
          result = op_->flush(u.kind == Unit::kEnd ? FlushReason::kEndOfStream
                                                   : FlushReason::kEpochEnd);
        }
        break;
      case Unit::kNone:
        break;
    }
  } catch (const abi::__forced_unwind&) {
    // Thread cancellation (the Python runtime ends threads this way when it
    // shuts down) must unwind the thread, not count as a failed call.
    throw;
  } catch (...) {
    o.error = std::current_exception();
    o.exhausted = u.gen != nullptr;
    result.reset();
  }
  Clock::time_point t1 = now();
  *t_end = t1;
  o.elapsed = t1 - t0;
  if (o.called && trace_sample()) trace_call(t0, t1, o.error != nullptr, false);
  o.deferred = o.elapsed < kDeferWakeBelow;
  if (in_order_ && u.kind == Unit::kCall) {
    if (!result) output_->unreserve(1);
    o.result = std::move(result);
  } else if (result) {
    emit(Entry{std::move(result), false}, o.deferred, t1);
    o.emitted = true;
  } else if (u.kind != Unit::kEpoch || stateful_) {
    output_->unreserve(1);
  }
  if (u.kind == Unit::kEpoch) emit(Entry{Item(), true}, /*defer=*/false, t1);
  return o;
}

void PipeRunner::complete_locked(Outcome& o, FailureLog::Line* line,
                                 bool* trip) {
  if (o.called) record_call_locked(o.elapsed, o.error != nullptr);
  record_gil_locked(o.gil);
  if (o.error) *trip = record_failure_locked(o.error, line);
  if (!o.element_failures.empty()) {
    *trip |= record_element_failures_locked(&o.element_failures, line);
  }
  if (o.emitted) ++stats_.items_out;
  // A stateful op (aggregate) that holds an item back is not skipping it.
  bool flush = o.kind == Unit::kEpoch || o.kind == Unit::kEnd;
  if (o.called && !flush && !stateful_ && !o.error && !o.emitted && !o.result) {
    ++stats_.items_skipped;
  }
  if (o.kind == Unit::kEpoch) ++stats_.epochs;
  if (o.kind == Unit::kEpoch || o.kind == Unit::kEnd) barrier_ = false;
  if (o.gen != nullptr) {
    o.gen->busy = false;
    if (o.exhausted) {
      for (auto it = generators_.begin(); it != generators_.end(); ++it) {
        if (it->get() == o.gen) {
          generators_.erase(it);
          break;
        }
      }
      --occupied_;
    }
  } else if (o.kind == Unit::kCall) {
    --occupied_;
    if (in_order_) {
      ReorderSlot& slot = reorder_[o.seq - emit_seq_];
      slot.done = true;
      slot.item = std::move(o.result);
    }
  }
}

void PipeRunner::collect_ordered_locked(std::vector<Entry>* out,
                                        bool* deliverer) {
  if (!in_order_) return;
  if (delivering_ && !*deliverer) return;
  while (!reorder_.empty() && reorder_.front().done) {
    if (reorder_.front().item) {
      out->push_back(Entry{std::move(reorder_.front().item), false});
      ++stats_.items_out;
    }
    reorder_.pop_front();
    ++emit_seq_;
  }
  *deliverer = !out->empty();
  delivering_ = *deliverer;
}

void PipeRunner::drop_generators_locked(
    std::vector<std::unique_ptr<ItemGenerator>>* out) {
  if (state_ == State::kRunning) return;
  for (auto it = generators_.begin(); it != generators_.end();) {
    if ((*it)->busy) {
      ++it;
      continue;
    }
    out->push_back(std::move((*it)->gen));
    it = generators_.erase(it);
    --occupied_;
  }
}

void PipeRunner::after_unlock(const FailureLog::Line& line, bool trip,
                              long popped, std::vector<Entry>* ordered,
                              bool defer, Clock::time_point t) {
  if (line.emit) log(LogLevel::kWarning, line.text);
  if (trip) cancel_upstream();
  if (popped > 0) release_popped(input(), popped);
  for (Entry& e : *ordered) emit(std::move(e), defer, t);
  ordered->clear();
}

void PipeRunner::run_worker() {
  Outcome done;
  std::vector<Entry> ordered;
  bool deliverer = false;
  bool cheap = true;            // the last call was cheap: defer wake-ups
  bool owe_kick = false;        // deferred deliveries need a kick at the end
  Clock::time_point t = now();  // refreshed by every call
  Clock::time_point deferred_since{};
  const Clock::time_point run_start = t;
  for (;;) {
    Unit u;
    FailureLog::Line line;
    bool trip = false;
    bool yield = false;
    bool exit = false;
    bool finish_now = false;
    long popped = 0;
    bool spawn = false;
    std::vector<std::unique_ptr<ItemGenerator>> dropped;
    {
      MutexLock lock(mu_);
      if (done.valid) {
        cheap = done.deferred;
        if (!owe_kick && done.deferred && (done.emitted || in_order_)) {
          owe_kick = true;
          deferred_since = t;
        }
        complete_locked(done, &line, &trip);
      }
      done = Outcome();
      collect_ordered_locked(&ordered, &deliverer);
      drop_generators_locked(&dropped);
      // Fairness: a worker that has run for a while hands its thread to the
      // tasks queued behind it (other stages' workers) and continues as a new
      // task at the back of the pool's queue. Without this, a stage with
      // long calls and a full input keeps every thread and starves the
      // cheap stages that feed it.
      // So does a worker on a thread the pool has made inactive
      // (autotune lowered its active threads): the thread parks, and an
      // active one takes the requeued worker.
      if (!deliverer && ((t - run_start >= kWorkerTimeSlice &&
                          pipeline_->pool().has_queued_tasks()) ||
                         (state_ == State::kRunning &&
                          pipeline_->pool().current_thread_inactive()))) {
        yield = true;
      }
      // A deliverer emits first and takes its next unit on the next turn,
      // once it has given up delivering_: were it to start a call that
      // blocks while still the deliverer, the results completed meanwhile
      // by other workers would wait behind that call.
      bool have_unit = !yield && !deliverer && take_unit_locked(&u, &popped, t);
      if (have_unit) {
        end_wait_locked();
        // More queued than workers to take it: bring in another worker now,
        // rather than waiting for the next delivery (which may never come).
        spawn = claim_worker_locked();
      } else if (yield) {
        // active_workers_ stays: the requeued task is this worker.
      } else if (ordered.empty()) {
        --active_workers_;
        exit = true;
        if (occupied_ == 0 && state_ == State::kRunning) {
          begin_wait_locked(blocked_on_output_);
        }
        finish_now = should_finish_locked();
      }
    }
    dropped.clear();
    if (spawn) submit_worker();
    after_unlock(line, trip, popped, &ordered, cheap, t);
    if (yield) {
      if (owe_kick) kick_downstream();
      submit_worker();
      return;
    }
    if (exit) {
      if (owe_kick && !finish_now) kick_downstream();
      if (finish_now) finish();
      return;
    }
    if (u.kind == Unit::kNone) continue;
    // Deferred results must not wait behind a call that turns out slow (or
    // never returns): once they are kDeferWakeMaxAge old, wake downstream
    // before starting the next call.
    if (owe_kick && t - deferred_since >= kDeferWakeMaxAge) {
      kick_downstream();
      owe_kick = false;
    }
    if (u.kind == Unit::kCall && op_kind_ == OpKind::kAsync) {
      start_async(u);
      // The next call's clock starts now, not before this start (which takes
      // the GIL for a Python op): a stale time made every call look longer,
      // up to more calls in flight than the stage's concurrency, and kept
      // the worker from ever yielding its thread.
      t = now();
      continue;
    }
    done = execute(u, &t);
  }
}

void PipeRunner::start_async(Unit& u) {
  Completion completion(this, u.seq, pipeline_->stop_token());
  std::exception_ptr late;
  GilTimes gil;
  {
    GilTimeScope scope(&gil);
    try {
      static_cast<AsyncOp&>(*op_).start(std::move(u.input),
                                        std::move(completion));
    } catch (const abi::__forced_unwind&) {
      // Thread cancellation: see execute().
      throw;
    } catch (...) {
      if (completion.pending()) {
        completion.fail(std::current_exception());
      } else {
        late = std::current_exception();
      }
    }
  }
  // An op that completed its call (or moved the Completion away) and then
  // threw: the call's outcome stands, and the error, which no call can
  // carry any more, is logged rather than dropped.
  bool first_late = false;
  if (gil.acquisitions > 0 || late) {
    MutexLock lock(mu_);
    if (gil.acquisitions > 0) record_gil_locked(gil);
    if (late) first_late = late_errors_++ == 0;
  }
  if (first_late) {
    log(LogLevel::kWarning,
        "stage " + name() +
            ": the async op threw after completing its call (or handing it "
            "on); the call's result stands, and later such errors of this "
            "stage are not logged: " +
            describe(late));
  }
}

void PipeRunner::complete(uint64_t token, Item result,
                          std::exception_ptr error) noexcept {
  Outcome o;
  o.valid = true;
  o.kind = Unit::kCall;
  o.seq = token;
  o.called = true;
  o.error = std::move(error);
  if (o.error) result.reset();
  if (in_order_) {
    if (!result) output_->unreserve(1);
    o.result = std::move(result);
  } else if (result) {
    emit(Entry{std::move(result), false}, /*defer=*/false, now());
    o.emitted = true;
  } else {
    output_->unreserve(1);
  }
  std::vector<Entry> ordered;
  bool deliverer = false;
  bool first = true;
  bool launch = false;
  bool finish_now = false;
  Clock::time_point t = now();
  for (;;) {
    FailureLog::Line line;
    bool trip = false;
    {
      MutexLock lock(mu_);
      if (first) {
        auto it = async_started_.find(token);
        if (it != async_started_.end()) {
          o.elapsed = t - it->second;
          if (trace_sample())
            trace_call(it->second, t, o.error != nullptr, true);
          async_started_.erase(it);
        }
        complete_locked(o, &line, &trip);
        first = false;
      }
      collect_ordered_locked(&ordered, &deliverer);
      if (ordered.empty()) {
        launch = claim_worker_locked();
        if (!launch) finish_now = should_finish_locked();
      }
    }
    bool more = !ordered.empty();
    after_unlock(line, trip, 0, &ordered, /*defer=*/false, t);
    if (!more) break;
  }
  if (launch) submit_worker();
  if (finish_now) finish();
  pipeline_->async_finished();
}

}  // namespace

std::unique_ptr<StageRunner> make_pipe_runner(PipelineImpl* pipeline, int index,
                                              const StageSpec& spec) {
  return std::make_unique<PipeRunner>(pipeline, index, spec);
}

}  // namespace feedline::detail
