// SPDX-License-Identifier: Apache-2.0
//
// SourceRunner: pulls a source's items, one at a time, on the pool.
//
// At most one worker runs, so the ItemSource is never pulled concurrently.
// Each pull first reserves an output slot; when none is free the worker ends
// and on_room() starts the next one. In continuous mode an exhausted pass is
// followed by an epoch marker and a fresh pass from the factory.

#include <memory>
#include <utility>

#include "feedline/base/error.h"
#include "pipeline/pipeline_impl.h"
#include "pipeline/stage_runner.h"

namespace feedline::detail {
namespace {

class SourceRunner final : public StageRunner {
 public:
  SourceRunner(PipelineImpl* pipeline, int index, SourceFactory factory,
               const SourceOptions& options)
      : StageRunner(pipeline, index, StageKind::kSource, options.name, 1),
        factory_(std::move(factory)),
        continuous_(options.continuous) {}

  void start(Clock::time_point t) override {
    bool launch = false;
    {
      MutexLock lock(mu_);
      launch = claim_worker_locked();
    }
    (void)t;
    if (launch) submit_worker();
  }

 protected:
  bool wants_worker_locked() override REQUIRES(mu_) {
    return state_ == State::kRunning && active_workers_ == 0 && !input_ended_;
  }
  bool idle_locked() override REQUIRES(mu_) { return true; }
  void run_worker() override;

 private:
  enum class Pulled { kNone, kItem, kSkip, kEpoch, kEnd, kError };

  const SourceFactory factory_;
  const bool continuous_;
  std::unique_ptr<ItemSource> pass_;  // used by the single worker only
};

void SourceRunner::run_worker() {
  Pulled last = Pulled::kNone;
  bool owe_kick = false;
  Clock::duration elapsed{};
  std::exception_ptr error;
  for (;;) {
    bool exit = false;
    bool finish_now = false;
    {
      MutexLock lock(mu_);
      switch (last) {
        case Pulled::kItem:
          ++stats_.items_out;
          [[fallthrough]];
        case Pulled::kSkip:
          record_call_locked(elapsed);
          if (last == Pulled::kSkip) ++stats_.items_skipped;
          break;
        case Pulled::kEpoch:
          ++stats_.epochs;
          break;
        case Pulled::kEnd:
          input_ended_ = true;
          break;
        case Pulled::kError:
          fail_locked(error);
          break;
        case Pulled::kNone:
          break;
      }
      if (state_ != State::kRunning || input_ended_) {
        exit = true;
      } else if (!reserve_output(1)) {
        begin_wait_locked(/*on_output=*/true);
        exit = true;
      } else {
        end_wait_locked();
      }
      if (exit) {
        --active_workers_;
        finish_now = should_finish_locked();
      }
    }
    if (exit) {
      if (owe_kick && !finish_now) kick_downstream();
      if (finish_now) {
        pass_.reset();
        finish();
      }
      return;
    }
    Item item;
    Clock::time_point t0 = now();
    try {
      if (!pass_) pass_ = factory_();
      if (!pass_) throw Internal("source factory returned no source");
      if (pass_->next(&item)) {
        last = item ? Pulled::kItem : Pulled::kSkip;
      } else {
        pass_.reset();
        last = continuous_ ? Pulled::kEpoch : Pulled::kEnd;
      }
    } catch (...) {
      error = std::current_exception();
      last = Pulled::kError;
      item.reset();
    }
    Clock::time_point t1 = now();
    elapsed = t1 - t0;
    if (last == Pulled::kItem) {
      // No deferral here: the next pull may block (a source over a stream
      // waits for data), and an item must not wait behind it.
      emit(Entry{std::move(item), false}, /*defer=*/false, t1);
    } else if (last == Pulled::kEpoch) {
      emit(Entry{Item(), true}, /*defer=*/false, t1);
    } else {
      output_->unreserve(1);
    }
  }
}

class MergeRunner final : public StageRunner {
 public:
  MergeRunner(PipelineImpl* pipeline, int index, std::string name)
      : StageRunner(pipeline, index, StageKind::kMerge, std::move(name), 1) {}

 protected:
  bool wants_worker_locked() override REQUIRES(mu_) {
    return state_ == State::kRunning && active_workers_ == 0;
  }
  bool idle_locked() override REQUIRES(mu_) { return true; }
  void run_worker() override;

 private:
  // Takes the next entry to forward; fills `popped` with the slots to give
  // back per input.
  bool take_locked(Entry* e, std::vector<Channel*>* popped,
                   Clock::time_point t) REQUIRES(mu_);

  std::size_t next_input_ GUARDED_BY(mu_) = 0;  // round-robin start
};

bool MergeRunner::take_locked(Entry* e, std::vector<Channel*>* popped,
                              Clock::time_point t) {
  if (state_ != State::kRunning) return false;
  // Epoch barrier: forward one marker once every live input has one first.
  bool any_marker = false;
  bool all_markers = true;
  bool all_done = true;
  for (auto& in : inputs_) {
    if (in->entries.empty()) {
      if (!in->closed) all_markers = all_done = false;
      continue;
    }
    all_done = false;
    if (in->entries.front().epoch_end) {
      any_marker = true;
    } else {
      all_markers = false;
    }
  }
  if (all_done) {
    input_ended_ = true;
    return false;
  }
  if (any_marker && all_markers) {
    if (!reserve_output(1)) return false;
    for (auto& in : inputs_) {
      if (in->entries.empty()) continue;
      pop_locked(in.get(), t);
      popped->push_back(in.get());
    }
    e->epoch_end = true;
    ++stats_.epochs;
    return true;
  }
  for (std::size_t k = 0; k < inputs_.size(); ++k) {
    Channel* in = inputs_[(next_input_ + k) % inputs_.size()].get();
    if (in->entries.empty() || in->entries.front().epoch_end) continue;
    if (!reserve_output(1)) return false;
    *e = pop_locked(in, t);
    popped->push_back(in);
    next_input_ = (next_input_ + k + 1) % inputs_.size();
    ++stats_.items_in;
    ++stats_.items_out;
    return true;
  }
  return false;
}

void MergeRunner::run_worker() {
  bool owe_kick = false;
  for (;;) {
    Entry e;
    std::vector<Channel*> popped;
    bool have = false;
    bool finish_now = false;
    Clock::time_point t = now();
    {
      MutexLock lock(mu_);
      have = take_locked(&e, &popped, t);
      if (have) {
        end_wait_locked();
      } else {
        --active_workers_;
        begin_wait_locked(/*on_output=*/false);
        finish_now = should_finish_locked();
      }
    }
    for (Channel* in : popped) release_popped(in, 1);
    if (!have) {
      if (owe_kick && !finish_now) kick_downstream();
      if (finish_now) finish();
      return;
    }
    owe_kick = true;
    emit(std::move(e), /*defer=*/true, t);
  }
}

}  // namespace

std::unique_ptr<StageRunner> make_source_runner(PipelineImpl* pipeline,
                                                int index, SourceFactory factory,
                                                const SourceOptions& options) {
  return std::make_unique<SourceRunner>(pipeline, index, std::move(factory),
                                        options);
}

std::unique_ptr<StageRunner> make_merge_runner(PipelineImpl* pipeline,
                                               int index, std::string name) {
  return std::make_unique<MergeRunner>(pipeline, index, std::move(name));
}

}  // namespace feedline::detail
