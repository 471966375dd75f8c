// SPDX-License-Identifier: Apache-2.0
//
// SinkRunner: the consumer's buffer at the end of a pipeline.
//
// It runs no workers: upstream delivers into its channel, and the consumer
// thread pops in next(), blocking on a condition variable, the one wait in the
// engine. Its wait_input is the time the consumer spent waiting for data (the
// pipeline was too slow); its queue's time_full is the time the pipeline
// waited for the consumer.
//
// Hand-off in runs: next() takes every ready entry in one lock into a buffer
// of the consumer's own and hands them out from there without the lock. A
// taken entry keeps its channel slot until it is handed out, so the sink still
// holds at most buffer_size (+ the last stage's concurrency) items and its
// stats read as if each entry were popped on its own. Producers wake the
// consumer only while it waits, and a producer of cheap items only once half
// the channel is full or its run ends (see StageRunner::deliver()).

#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <optional>

#include "feedline/pipeline/pipeline.h"
#include "pipeline/stage_runner.h"

namespace feedline::detail {

class SinkRunner final : public StageRunner {
 public:
  SinkRunner(PipelineImpl* pipeline, int index)
      : StageRunner(pipeline, index, StageKind::kSink, "sink", 1) {}

  void deliver(Channel* channel, Entry e, bool defer,
               Clock::time_point t) override;
  void close_input(Channel* channel) override;
  void kick() override;
  void start(Clock::time_point now) override;
  StageStats snapshot(Clock::time_point now) override;

  // Blocks for the next entry, or until `deadline`. Returns kEnd once the
  // input is closed and drained or the pipeline is stopped, kTimeout when
  // the deadline passes first.
  // Requires: one consumer at a time.
  NextStatus next(Item* out, std::optional<Pipeline::Deadline> deadline);

  // Wakes the consumer and makes next() return kEnd.
  void wake_for_stop();

  // Counts one GIL acquisition of the consumer and its wait (see
  // Pipeline::report_consumer_gil_wait). Lock-free.
  void record_consumer_gil_wait(std::chrono::nanoseconds wait);

 protected:
  bool wants_worker_locked() override REQUIRES(mu_);
  bool idle_locked() override REQUIRES(mu_) { return true; }
  void run_worker() override {}

 private:
  // Waits until entries are ready, the input ended or the pipeline stopped,
  // then takes the ready entries into taken_. Returns kItem if it took any.
  NextStatus take_run(std::optional<Pipeline::Deadline> deadline);

  std::condition_variable cv_;
  // Set under mu_ (so that a waiting consumer cannot miss it), read anywhere.
  std::atomic<bool> stopped_{false};
  // Counts deliveries, the end of input and the stop (changed under mu_):
  // the consumer polls it before it sleeps.
  std::atomic<uint64_t> events_{0};
  // True while the consumer waits on cv_; producers notify only then.
  std::atomic<bool> consumer_waiting_{false};

  // The consumer's own: entries taken from the channel, not handed out yet.
  std::deque<Entry> taken_;

  // Handed out so far (the sink's items_in/items_out, and its epochs).
  std::atomic<uint64_t> handed_items_{0};
  std::atomic<uint64_t> handed_epochs_{0};
  // The consumer's GIL figures (the sink's gil_acquisitions and gil_wait).
  std::atomic<uint64_t> consumer_gil_acquisitions_{0};
  std::atomic<int64_t> consumer_gil_wait_ns_{0};
};

}  // namespace feedline::detail
