// SPDX-License-Identifier: Apache-2.0

#include "feedline/base/error.h"

#include <string>
#include <utility>

#include "feedline/base/check.h"

namespace feedline {
namespace {

std::string join_errors(const std::vector<StageError>& errors) {
  std::string what = "pipeline stages failed:";
  for (const StageError& e : errors) what += " [" + e.stage + "] " + e.message;
  return what;
}

}  // namespace

PipelineFailure::PipelineFailure(std::vector<StageError> errors)
    : Error(join_errors(errors)), errors_(std::move(errors)) {}

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

namespace detail {

void check_failed(std::string_view condition, std::string_view message,
                  const char* file, int line) {
  throw Internal(std::string("internal check failed: ") +
                 std::string(condition) + " (" + std::string(message) +
                 ") at " + file + ":" + std::to_string(line));
}

}  // namespace detail
}  // namespace feedline
