// SPDX-License-Identifier: Apache-2.0

#include "pipeline/sink_runner.h"

#include <string>
#include <utility>

#include "feedline/base/error.h"

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
                            std::optional<std::chrono::nanoseconds> timeout) {
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
      if (timeout) {
        bool got = cv_.wait_for(lock.native(), *timeout, pred);
        stats_.wait_input += now() - t0;
        if (!got) {
          throw Timeout(
              "the next item is not available after " +
              std::to_string(std::chrono::duration<double>(*timeout).count()) +
              " s");
        }
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
