// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the pipeline tests: draining a pipeline, counting the
// process's threads, a log sink that records lines.

#pragma once

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include <dirent.h>

#include "feedline/base/log.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/pipeline.h"

namespace feedline::testing {

// Reads every item of one epoch (or of the whole pipeline) as T.
template <typename T>
std::vector<T> drain(Pipeline& p, NextStatus* last = nullptr) {
  std::vector<T> out;
  Item item;
  NextStatus s;
  while ((s = p.next(&item)) == NextStatus::kItem)
    out.push_back(item.take_as<T>());
  if (last != nullptr) *last = s;
  return out;
}

template <typename T>
std::vector<T> drain(TypedPipeline<T>& p, NextStatus* last = nullptr) {
  return drain<T>(p.untyped(), last);
}

template <typename T>
std::vector<T> sorted(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v;
}

inline std::vector<int> iota(int n, int from = 0) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = from + i;
  return v;
}

// The number of threads of this process, from /proc/self/task.
inline int count_threads() {
  int n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

// Captures feedline's log lines for the lifetime of the object.
class LogCapture {
 public:
  LogCapture() {
    set_log_sink([this](LogLevel, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { set_log_sink(nullptr); }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace feedline::testing
