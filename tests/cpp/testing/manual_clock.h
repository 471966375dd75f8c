// SPDX-License-Identifier: Apache-2.0
//
// ManualClock: a Clock that moves only when a test advances it, so that
// durations in statistics are exact and no test has to sleep.
//
// Thread safety: now() and advance() may be called from any thread.

#pragma once

#include <atomic>
#include <chrono>

#include "feedline/base/clock.h"

namespace feedline::testing {

class ManualClock final : public Clock {
 public:
  time_point now() const override {
    return time_point(duration(ticks_.load(std::memory_order_acquire)));
  }
  void advance(std::chrono::nanoseconds d) {
    ticks_.fetch_add(std::chrono::duration_cast<duration>(d).count(),
                     std::memory_order_acq_rel);
  }

 private:
  std::atomic<duration::rep> ticks_{1};
};

}  // namespace feedline::testing
