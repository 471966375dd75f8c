// SPDX-License-Identifier: Apache-2.0

#include "feedline/base/log.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "feedline/base/clock.h"
#include "feedline/base/mutex.h"

namespace feedline {
namespace {

Mutex& sink_mutex() {
  static Mutex mu;
  return mu;
}

std::shared_ptr<LogSink>& sink_slot() {
  static std::shared_ptr<LogSink> sink;
  return sink;
}

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

}  // namespace

const Clock& Clock::steady() {
  static const SteadyClock kClock;
  return kClock;
}

void set_log_sink(LogSink sink) {
  MutexLock lock(sink_mutex());
  sink_slot() = sink ? std::make_shared<LogSink>(std::move(sink)) : nullptr;
}

void set_log_level(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

void log(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::shared_ptr<LogSink> sink;
  {
    MutexLock lock(sink_mutex());
    sink = sink_slot();
  }
  if (sink) {
    (*sink)(level, message);
    return;
  }
  std::string line = "[feedline] " + std::string(to_string(level)) + ": " +
                     std::string(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace feedline
