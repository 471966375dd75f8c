// SPDX-License-Identifier: Apache-2.0
//
// TraceBuffer: the sampled calls of a pipeline (trace.h), a ring of the
// latest `capacity` events under a leaf mutex. Runners decide which calls
// to sample (one in `every` per stage) without a lock.

#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "feedline/base/clock.h"
#include "feedline/base/mutex.h"
#include "feedline/pipeline/trace.h"

namespace feedline::detail {

class TraceBuffer {
 public:
  TraceBuffer(int every, std::size_t capacity)
      : every_(every), capacity_(capacity < 1 ? 1 : capacity) {}

  int every() const { return every_; }
  // The time events count from; set by start() before any call runs.
  void set_origin(Clock::time_point t) {
    origin_ns_.store(t.time_since_epoch().count(), std::memory_order_release);
  }
  // Records a call of `stage` from `t0` to `t1`, run on this thread (or,
  // for an async call, started and finished anywhere).
  void record(int stage, Clock::time_point t0, Clock::time_point t1,
              bool failed, bool async);
  Trace snapshot() const;

 private:
  const int every_;
  const std::size_t capacity_;
  std::atomic<int64_t> origin_ns_{0};
  mutable Mutex mu_;  // a leaf
  std::vector<TraceEvent> ring_ GUARDED_BY(mu_);
  std::size_t next_ GUARDED_BY(mu_) = 0;  // where the next event goes
  uint64_t recorded_ GUARDED_BY(mu_) = 0;
};

}  // namespace feedline::detail
