// SPDX-License-Identifier: Apache-2.0

#include "pipeline/failure_log.h"

#include <string>

namespace feedline::detail {

void FailureLog::record(const std::string& message, Clock::time_point now,
                        Line* line) {
  ++total_;
  recent_.push_back(message);
  if (recent_.size() > kKeptMessages) recent_.pop_front();
  if (total_ <= static_cast<uint64_t>(burst_)) {
    line->emit = true;
    line->text = "stage " + stage_ + ": call failed (" +
                 std::to_string(total_) + "): " + message;
    if (total_ == static_cast<uint64_t>(burst_)) {
      line->text += " [further failures of this stage are summarised]";
      last_summary_ = now;
    }
    return;
  }
  ++suppressed_;
  if (now - last_summary_ >= interval_) {
    flush(line);
    last_summary_ = now;
  }
}

void FailureLog::flush(Line* line) {
  if (suppressed_ == 0) return;
  line->emit = true;
  line->text = "stage " + stage_ + ": " + std::to_string(suppressed_) +
               " more failures (" + std::to_string(total_) +
               " in total); latest: " + recent_.back();
  suppressed_ = 0;
}

}  // namespace feedline::detail
