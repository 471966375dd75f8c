// SPDX-License-Identifier: Apache-2.0
//
// SinkRunner: the consumer's buffer at the end of a pipeline.
//
// It runs no workers: upstream delivers into its channel, and the consumer
// thread pops in next(), blocking on a condition variable, the one wait in the
// engine. Its wait_input is the time the consumer spent waiting for data (the
// pipeline was too slow); its queue's time_full is the time the pipeline
// waited for the consumer.

#pragma once

#include <chrono>
#include <condition_variable>
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
  void kick() override { cv_.notify_one(); }
  void start(Clock::time_point now) override;

  // Blocks for the next entry, or until `deadline`. Returns kEnd once the
  // input is closed and drained or the pipeline is stopped, kTimeout when
  // the deadline passes first.
  NextStatus next(Item* out, std::optional<Pipeline::Deadline> deadline);

  // Wakes the consumer and makes next() return kEnd.
  void wake_for_stop();

 protected:
  bool wants_worker_locked() override REQUIRES(mu_);
  bool idle_locked() override REQUIRES(mu_) { return true; }
  void run_worker() override {}

 private:
  std::condition_variable cv_;
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace feedline::detail
