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

const char* error_class(const std::exception& e) {
  if (dynamic_cast<const PipelineFailure*>(&e)) return "PipelineFailure";
  if (dynamic_cast<const TooManyFailures*>(&e)) return "TooManyFailures";
  if (dynamic_cast<const Timeout*>(&e)) return "Timeout";
  if (dynamic_cast<const Cancelled*>(&e)) return "Cancelled";
  if (dynamic_cast<const Internal*>(&e)) return "Internal";
  if (dynamic_cast<const UnsupportedFormat*>(&e)) return "UnsupportedFormat";
  if (dynamic_cast<const DecodeError*>(&e)) return "DecodeError";
  if (dynamic_cast<const FormatError*>(&e)) return "FormatError";
  if (dynamic_cast<const IoError*>(&e)) return "IoError";
  if (dynamic_cast<const Error*>(&e)) return "Error";
  return nullptr;
}

void for_each_cause(const std::exception_ptr& error,
                    const std::function<void(const std::exception_ptr&)>& fn) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const PipelineFailure& e) {
    for (const StageError& stage : e.errors()) for_each_cause(stage.error, fn);
  } catch (const TooManyFailures& e) {
    for_each_cause(e.last_error(), fn);
  } catch (...) {
    fn(error);
  }
}

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
