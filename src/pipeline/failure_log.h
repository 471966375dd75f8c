// SPDX-License-Identifier: Apache-2.0
//
// FailureLog: rate-limited reporting of one stage's failed calls.
//
// The first `burst` failures are logged in full. After that, failures are
// counted and at most one summary line per `interval` says how many were
// suppressed and shows the latest message; a last summary is written when the
// stage ends. A million bad items therefore cost a handful of log lines. The
// most recent messages are kept for the failure report.
//
// Thread safety: none; the owning stage calls it under its mutex and writes
// the returned lines after releasing it.

#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "feedline/base/clock.h"

namespace feedline::detail {

class FailureLog {
 public:
  static constexpr std::size_t kKeptMessages = 8;

  struct Line {
    bool emit = false;
    std::string text;
  };

  FailureLog() = default;
  FailureLog(std::string stage, int burst, std::chrono::nanoseconds interval)
      : stage_(std::move(stage)), burst_(burst), interval_(interval) {}

  // Records one failure with `message`; sets `*line` when a line is due.
  void record(const std::string& message, Clock::time_point now, Line* line);

  // Sets `*line` to the summary of failures not yet reported, if any.
  void flush(Line* line);

  const std::deque<std::string>& recent() const { return recent_; }

 private:
  std::string stage_;
  int burst_ = 5;
  std::chrono::nanoseconds interval_{std::chrono::seconds(10)};
  uint64_t total_ = 0;
  uint64_t suppressed_ = 0;
  Clock::time_point last_summary_{};
  std::deque<std::string> recent_;
};

}  // namespace feedline::detail
