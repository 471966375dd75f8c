// SPDX-License-Identifier: Apache-2.0
//
// MergeRunner: interleaves several sub-pipelines into one stream.
//
// One worker at a time moves entries from the inputs (round-robin over the
// inputs that have an item at their head) to the output. Epoch markers are a
// barrier: a marker is forwarded once every input that is still open has one
// at its head, and one marker is taken from each. The output closes once
// every input is closed and drained.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/pipeline_impl.h"
#include "pipeline/stage_runner.h"

namespace feedline::detail {
namespace {

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
  bool take_locked(Entry* e, std::vector<Channel*>* popped, Clock::time_point t)
      REQUIRES(mu_);

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

std::unique_ptr<StageRunner> make_merge_runner(PipelineImpl* pipeline,
                                               int index, std::string name) {
  return std::make_unique<MergeRunner>(pipeline, index, std::move(name));
}

}  // namespace feedline::detail
