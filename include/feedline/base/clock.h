// SPDX-License-Identifier: Apache-2.0
//
// Clock: the injectable source of time for statistics and rate limiting.
//
// Production code uses SteadyClock. Tests use ManualClock (tests/cpp/testing)
// so that durations in statistics are exact and no test sleeps.
//
// Thread safety: now() may be called from any thread concurrently.

#pragma once

#include <algorithm>
#include <chrono>

namespace feedline {

class Clock {
 public:
  // The names std::chrono's Clock requirement gives these types.
  using time_point =  // NOLINT(readability-identifier-naming)
      std::chrono::steady_clock::time_point;
  using duration =  // NOLINT(readability-identifier-naming)
      std::chrono::steady_clock::duration;

  virtual ~Clock() = default;

  // Returns the current time. Monotonic: never goes backwards.
  virtual time_point now() const = 0;

  // Returns the process-wide steady clock.
  static const Clock& steady();
};

class SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
};

// The steady-clock time `timeout` from now. Negative timeouts count as 0 and
// anything past a century as a century, so the sum never overflows and
// "forever" can be a huge timeout.
inline std::chrono::steady_clock::time_point deadline_after(
    std::chrono::nanoseconds timeout) {
  constexpr std::chrono::nanoseconds kCentury = std::chrono::hours(24 * 36525);
  return std::chrono::steady_clock::now() +
         std::clamp(timeout, std::chrono::nanoseconds::zero(), kCentury);
}

}  // namespace feedline
