// SPDX-License-Identifier: Apache-2.0
//
// FEEDLINE_CHECK: invariant checks that stay on in release builds.
//
// A failed check is a bug in feedline, not a user error. It throws
// feedline::Internal naming the file, line and condition, so that Python sees
// a traceback instead of a crashed process.

#pragma once

#include <string_view>

namespace feedline::detail {

// Throws Internal describing the failed `condition` at `file`:`line`.
// (Not std::source_location: clang 14 cannot compile libstdc++ 12's.)
[[noreturn]] void check_failed(std::string_view condition,
                               std::string_view message, const char* file,
                               int line);

}  // namespace feedline::detail

#define FEEDLINE_CHECK(cond, msg)                                         \
  do {                                                                    \
    if (!(cond)) [[unlikely]] {                                           \
      ::feedline::detail::check_failed(#cond, (msg), __FILE__, __LINE__); \
    }                                                                     \
  } while (false)
