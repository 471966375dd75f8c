// SPDX-License-Identifier: Apache-2.0

#include "pipeline/sink_runner.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "feedline/concurrency/spin_wait.h"
#include "pipeline/pipeline_impl.h"

namespace feedline::detail {
namespace {

constexpr std::chrono::microseconds kStarvedKickFirst{1000};
constexpr std::chrono::microseconds kStarvedKickMax{64000};

}  // namespace

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
    events_.fetch_add(1, std::memory_order_release);
    // consumer_waiting_ only changes under mu_, so this read is exact.
    wake = consumer_waiting_.load(std::memory_order_relaxed) &&
           (!defer || channel->half_full());
  }
  if (wake) cv_.notify_one();
}

void SinkRunner::kick() {
  // The deliveries being kicked were made under mu_: a consumer that checked
  // for entries after them saw them, and one that was already waiting set
  // consumer_waiting_ before them, so this read sees it.
  if (consumer_waiting_.load(std::memory_order_relaxed)) cv_.notify_one();
}

bool SinkRunner::wants_worker_locked() { return false; }

void SinkRunner::close_input(Channel* channel) {
  {
    MutexLock lock(mu_);
    channel->closed = true;
    events_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();  // the consumer may be waiting for this end
}

void SinkRunner::wake_for_stop() {
  {
    MutexLock lock(mu_);
    stopped_.store(true, std::memory_order_relaxed);
    events_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
}

StageStats SinkRunner::snapshot(Clock::time_point t) {
  StageStats s = StageRunner::snapshot(t);
  s.items_in += handed_items_.load(std::memory_order_relaxed);
  s.items_out += handed_items_.load(std::memory_order_relaxed);
  s.epochs += handed_epochs_.load(std::memory_order_relaxed);
  s.gil_acquisitions +=
      consumer_gil_acquisitions_.load(std::memory_order_relaxed);
  s.gil_wait += std::chrono::nanoseconds(
      consumer_gil_wait_ns_.load(std::memory_order_relaxed));
  return s;
}

void SinkRunner::record_consumer_gil_wait(std::chrono::nanoseconds wait) {
  consumer_gil_acquisitions_.fetch_add(1, std::memory_order_relaxed);
  consumer_gil_wait_ns_.fetch_add(std::max<int64_t>(wait.count(), 0),
                                  std::memory_order_relaxed);
}

NextStatus SinkRunner::take_run(std::optional<Pipeline::Deadline> deadline) {
  Channel* in = inputs_[0].get();
  auto ready = [&]() REQUIRES(mu_) {
    return !in->entries.empty() || in->closed ||
           stopped_.load(std::memory_order_relaxed);
  };
  // Nothing ready: poll for a delivery for a moment before sleeping, so that
  // a producer that is about to deliver need not wake this thread.
  std::optional<Clock::time_point> t0;
  uint64_t seen = 0;
  {
    MutexLock lock(mu_);
    if (!ready()) {
      t0 = now();
      seen = events_.load(std::memory_order_relaxed);
    }
  }
  if (t0) {
    spin_wait([&] { return events_.load(std::memory_order_acquire) != seen; });
  }
  MutexLock lock(mu_);
  if (!ready()) {
    if (!t0) t0 = now();
    auto pred = [&]() NO_THREAD_SAFETY_ANALYSIS { return ready(); };
    consumer_waiting_.store(true, std::memory_order_seq_cst);
    bool got = true;
    // A stage of cheap calls defers waking its downstream and wakes it
    // before its next call only once the entries are old (pipe_runner.cc);
    // if that call never returns, the wake-up never comes. So a starving
    // consumer wakes every stage now and then, backing off from 1 ms to
    // 64 ms: a wake-up of a stage with no work does nothing.
    auto slice = kStarvedKickFirst;
    for (;;) {
      auto until = std::chrono::steady_clock::now() + slice;
      const bool last = deadline && *deadline <= until;
      if (last) until = *deadline;
      if (cv_.wait_until(lock.native(), until, pred)) break;
      if (last) {
        got = false;
        break;
      }
      lock.unlock();
      pipeline_->kick_all();
      lock.lock();
      slice = std::min(slice * 2, kStarvedKickMax);
    }
    consumer_waiting_.store(false, std::memory_order_relaxed);
    stats_.wait_input += now() - *t0;
    if (!got) return NextStatus::kTimeout;
  } else if (t0) {
    stats_.wait_input += now() - *t0;
  }
  if (stopped_.load(std::memory_order_relaxed)) return NextStatus::kEnd;
  if (in->entries.empty()) {
    if (!input_ended_) pipeline_->note_drained(now());
    input_ended_ = true;
    if (should_finish_locked()) stats_.finished = true;
    return NextStatus::kEnd;
  }
  in->take_all(now(), &taken_);
  return NextStatus::kItem;
}

NextStatus SinkRunner::next(Item* out,
                            std::optional<Pipeline::Deadline> deadline) {
  if (stopped_.load(std::memory_order_acquire)) return NextStatus::kEnd;
  if (taken_.empty()) {
    NextStatus status = take_run(deadline);
    if (status != NextStatus::kItem) return status;
  }
  Channel* in = inputs_[0].get();
  Entry e = std::move(taken_.front());
  taken_.pop_front();
  in->hand_out();
  if (e.epoch_end) {
    handed_epochs_.fetch_add(1, std::memory_order_relaxed);
  } else {
    handed_items_.fetch_add(1, std::memory_order_relaxed);
  }
  release_popped(in, 1);
  if (e.epoch_end) return NextStatus::kEpochEnd;
  *out = std::move(e.item);
  return NextStatus::kItem;
}

}  // namespace feedline::detail
