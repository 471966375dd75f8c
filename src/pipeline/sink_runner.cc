// SPDX-License-Identifier: Apache-2.0

#include "pipeline/sink_runner.h"

#include <utility>

namespace feedline::detail {

void SinkRunner::start(Clock::time_point t) {
  MutexLock lock(mu_);
  inputs_[0]->start_clock(t);
}

void SinkRunner::deliver(Channel* channel, Entry e, bool defer,
                         Clock::time_point t) {
  bool wake;
  {
    MutexLock lock(mu_);
    channel->push(std::move(e), t);
    wake = !defer || channel->half_full();
  }
  if (wake) cv_.notify_one();
}

bool SinkRunner::wants_worker_locked() { return false; }

void SinkRunner::close_input(Channel* channel) {
  {
    MutexLock lock(mu_);
    channel->closed = true;
  }
  cv_.notify_all();  // the consumer may be waiting for this end
}

void SinkRunner::wake_for_stop() {
  {
    MutexLock lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

NextStatus SinkRunner::next(Item* out,
                            std::optional<Pipeline::Deadline> deadline) {
  Channel* in = inputs_[0].get();
  Entry e;
  {
    MutexLock lock(mu_);
    auto ready = [&]() REQUIRES(mu_) {
      return !in->entries.empty() || in->closed || stopped_;
    };
    if (!ready()) {
      Clock::time_point t0 = now();
      auto pred = [&]() NO_THREAD_SAFETY_ANALYSIS { return ready(); };
      if (deadline) {
        bool got = cv_.wait_until(lock.native(), *deadline, pred);
        stats_.wait_input += now() - t0;
        if (!got) return NextStatus::kTimeout;
      } else {
        cv_.wait(lock.native(), pred);
        stats_.wait_input += now() - t0;
      }
    }
    if (stopped_) return NextStatus::kEnd;
    if (in->entries.empty()) {
      input_ended_ = true;
      if (should_finish_locked()) stats_.finished = true;
      return NextStatus::kEnd;
    }
    e = in->pop(now());
    if (e.epoch_end) {
      ++stats_.epochs;
    } else {
      ++stats_.items_in;
      ++stats_.items_out;
    }
  }
  release_popped(in, 1);
  if (e.epoch_end) return NextStatus::kEpochEnd;
  *out = std::move(e.item);
  return NextStatus::kItem;
}

}  // namespace feedline::detail
