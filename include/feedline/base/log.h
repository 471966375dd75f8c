// SPDX-License-Identifier: Apache-2.0
//
// A minimal process-wide log sink.
//
// feedline logs rarely: failure reports (rate-limited), periodic statistics
// and warnings. The default sink writes one line per message to stderr; the
// Python layer can install one that forwards to `logging`.
//
// Thread safety: log() and set_log_sink() may be called from any thread. The
// sink is called with no feedline lock held; it must not call back into the
// pipeline that logged.

#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace feedline {

enum class LogLevel { kDebug = 10, kInfo = 20, kWarning = 30, kError = 40 };

using LogSink = std::function<void(LogLevel, std::string_view message)>;

// Installs `sink` for all later messages; an empty function restores stderr.
void set_log_sink(LogSink sink);

// Messages below `level` are dropped before reaching the sink.
// Default: LogLevel::kInfo.
void set_log_level(LogLevel level);

// Sends `message` to the sink if `level` passes the threshold.
void log(LogLevel level, std::string_view message);

// Returns "DEBUG", "INFO", "WARNING" or "ERROR".
std::string_view to_string(LogLevel level);

}  // namespace feedline
