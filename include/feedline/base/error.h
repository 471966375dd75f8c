// SPDX-License-Identifier: Apache-2.0
//
// The one exception hierarchy of feedline.
//
// Each class derives from the closest standard exception so that callers that
// only know the standard library can still catch it, and so that the Python
// bindings map it to the matching built-in (ValueError, IndexError) or to the
// `feedline.<Name>` class registered for it. Messages say what was expected,
// what was found and where, e.g. "concurrency must be >= 1 (got 0)".

#pragma once

#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace feedline {

// An argument outside its documented domain. Python: ValueError.
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An index or key outside the valid range. Python: IndexError.
class OutOfRange : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

// The base of every feedline runtime error. Python: feedline.Error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reading or writing bytes failed (missing file, short read).
class IoError : public Error {
 public:
  using Error::Error;
};

// Bytes do not follow the format they claim (bad header, overrunning size).
class FormatError : public Error {
 public:
  using Error::Error;
};

// A codec rejected its input.
class DecodeError : public Error {
 public:
  using Error::Error;
};

// The input is in a format this decoder does not handle (another decoder may:
// the image decoder reads JPEG and PNG, FFmpeg many more).
class UnsupportedFormat : public DecodeError {
 public:
  using DecodeError::DecodeError;
};

// The operation was abandoned because a stop was requested.
class Cancelled : public Error {
 public:
  using Error::Error;
};

// A broken internal invariant: a bug in feedline, never a user error.
class Internal : public Error {
 public:
  using Error::Error;
};

// A bounded wait ran out before the awaited event happened.
class Timeout : public Error {
 public:
  using Error::Error;
};

// A pipeline stage failed more often than its `max_failures` budget allows.
// Carries the error of the call that exceeded the budget, so that callers
// (and the Python layer, as __cause__) can see the original exception.
class TooManyFailures : public Error {
 public:
  explicit TooManyFailures(const std::string& what,
                           std::exception_ptr last_error = nullptr)
      : Error(what), last_error_(std::move(last_error)) {}
  // The failure that exceeded the budget; may be null.
  const std::exception_ptr& last_error() const { return last_error_; }

 private:
  std::exception_ptr last_error_;
};

// One stage's reason for failing a pipeline.
struct StageError {
  std::string stage;         // the stage's display name, e.g. "2:decode[4]"
  std::exception_ptr error;  // the exception that failed the stage
  std::string message;       // error's what(), captured when it happened
};

// A pipeline ended because one or more of its stages failed. Carries each
// failed stage's cause, ordered by stage position (source first).
class PipelineFailure : public Error {
 public:
  explicit PipelineFailure(std::vector<StageError> errors);

  const std::vector<StageError>& errors() const { return errors_; }

 private:
  std::vector<StageError> errors_;
};

// The name of the most derived class of this file that `e` is an instance
// of ("DecodeError", "Timeout", "Error", ...); the Python bindings raise
// `feedline.<name>` for it. Null for InvalidArgument, OutOfRange and
// exceptions of no class here.
const char* error_class(const std::exception& e);

// Calls `fn` with each error `error` is made of: the causes of a
// PipelineFailure's stages and the last error of a TooManyFailures, in turn
// (depth first); any other error itself. Null errors are skipped.
void for_each_cause(const std::exception_ptr& error,
                    const std::function<void(const std::exception_ptr&)>& fn);

// Returns the message of the exception held by `error`, or a description of
// it when it is not a std::exception. Requires: `error` is not null.
std::string describe(const std::exception_ptr& error);

}  // namespace feedline
