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

#include <cxxabi.h>

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
  GilTimes gil;  // of the last pull
  for (;;) {
    bool exit = false;
    bool finish_now = false;
    {
      MutexLock lock(mu_);
      record_gil_locked(gil);
      gil = GilTimes();
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
    GilTimeScope gil_scope(&gil);
    try {
      if (!pass_) pass_ = factory_();
      if (!pass_) throw Internal("source factory returned no source");
      if (pass_->next(&item)) {
        last = item ? Pulled::kItem : Pulled::kSkip;
      } else {
        pass_.reset();
        last = continuous_ ? Pulled::kEpoch : Pulled::kEnd;
      }
    } catch (const abi::__forced_unwind&) {
      // Thread cancellation: see PipeRunner::execute().
      throw;
    } catch (...) {
      error = std::current_exception();
      last = Pulled::kError;
      item.reset();
    }
    Clock::time_point t1 = now();
    elapsed = t1 - t0;
    if (last == Pulled::kItem || last == Pulled::kSkip ||
        last == Pulled::kError) {
      if (trace_sample()) trace_call(t0, t1, last == Pulled::kError, false);
    }
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

}  // namespace

std::unique_ptr<StageRunner> make_source_runner(PipelineImpl* pipeline,
                                                int index,
                                                SourceFactory factory,
                                                const SourceOptions& options) {
  return std::make_unique<SourceRunner>(pipeline, index, std::move(factory),
                                        options);
}

}  // namespace feedline::detail
