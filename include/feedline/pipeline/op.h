// SPDX-License-Identifier: Apache-2.0
//
// The native op protocol: what a pipe stage calls for each item.
//
// Three kinds of op exist, all working on type-erased Items:
//   - MapOp: one call per input, one result or none (an empty Item skips).
//   - GeneratorOp: one generator per input, pulled for 0..n results; each
//     pull is one call (one unit of concurrency, stats and failure counting).
//   - AsyncOp: starts work and returns at once; the result arrives later
//     through a Completion, from any thread. This is how coroutines, I/O
//     engines and the Python asyncio bridge plug into the engine.
// An op may be stateful (aggregate is): the stage then runs it with
// concurrency 1 and calls flush() at every epoch end and at end of stream.
//
// Ops are created once per stage and shared by all of its concurrent calls;
// a stateless op's call() must be safe to run concurrently with itself.
//
// An op may declare the item types it takes and produces (input_type(),
// output_type()); build_pipeline() then checks that adjacent stages fit and
// names both stages when they do not. Ops built from typed callables
// (builder.h, make_map_op()) and every op of feedline::ops declare theirs.

#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <stop_token>
#include <string>
#include <typeinfo>

#include "feedline/pipeline/item.h"

namespace feedline {

enum class OpKind { kMap, kGenerator, kAsync };

// "map", "generator" or "async".
const char* op_kind_name(OpKind kind);

// Why flush() is called.
enum class FlushReason { kEpochEnd, kEndOfStream };

// Element failures. An op that handles many elements in one call (a batch
// op) and leaves some of them out of its result reports each one here, from
// the thread running the call: an element left out is a failure, counted in
// the stage's StageStats::failures, logged through its failure log and held
// against its failure budget like a failed call (the call itself, if it
// returns, still succeeds). Returns false when this thread is not running a
// call of a pipeline stage (the op was called directly, or from a thread of
// its own); the op then reports the failure its own way.
bool report_element_failure(std::exception_ptr error);

// Time on Python's global interpreter lock. An op that calls into Python
// reports, from the thread running the call, each time it took the GIL: how
// long it waited for it (wall time) and the CPU time its thread used while
// holding it. They add up in the stage's StageStats::gil_* counters, which
// tell a GIL-bound pipeline from one short of threads. Returns false when
// this thread is not running a call of a pipeline stage.
bool report_gil_time(std::chrono::nanoseconds wait,
                     std::chrono::nanoseconds held);

class Op {
 public:
  virtual ~Op() = default;
  virtual OpKind kind() const = 0;

  // True for ops that keep state between calls. Such an op runs with
  // concurrency 1 and is flushed at epoch ends and at end of stream.
  virtual bool stateful() const { return false; }

  // Returns what a stateful op still holds (an empty Item when nothing).
  virtual Item flush(FlushReason /*reason*/) { return Item(); }

  // The item type the op takes; null: any item.
  virtual const std::type_info* input_type() const { return nullptr; }

  // The item type the op produces; null: not known in advance.
  virtual const std::type_info* output_type() const { return nullptr; }

  // Returns true if the op can take items of type `type`. By default: when
  // input_type() is null or equal to `type`. Adapters that convert their
  // input (the Python bindings' do) widen this.
  virtual bool accepts(const std::type_info& type) const {
    const std::type_info* in = input_type();
    return in == nullptr || *in == type;
  }
};

// The types `op` declares, as "<input> -> <output>" in type_name()s: "any"
// for an op that takes any item; an op that declares no output gives what it
// was given.
std::string op_signature(const Op& op);

class MapOp : public Op {
 public:
  OpKind kind() const final { return OpKind::kMap; }

  // Returns the result for `input`; an empty Item skips it.
  // Throws: anything; the stage counts a failure and drops the item.
  virtual Item call(Item input) = 0;
};

// The pull side of a generator op. One generator is pulled by one thread at a
// time, never concurrently.
class ItemGenerator {
 public:
  virtual ~ItemGenerator() = default;

  // Stores the next result in `*out` (left empty to skip one) and returns
  // true, or returns false once exhausted.
  // Throws: anything; the stage counts a failure and drops the generator.
  virtual bool next(Item* out) = 0;
};

class GeneratorOp : public Op {
 public:
  OpKind kind() const final { return OpKind::kGenerator; }

  // Returns the generator of results for `input`.
  virtual std::unique_ptr<ItemGenerator> start(Item input) = 0;
};

namespace detail {

// Internal; not part of the public API. Where a Completion reports to.
class CompletionTarget {
 public:
  virtual void complete(uint64_t token, Item result,
                        std::exception_ptr error) noexcept = 0;

 protected:
  ~CompletionTarget() = default;
};

}  // namespace detail

// The one-shot callback that finishes an async call. Exactly one of emit(),
// skip() or fail() should be called, once, from any thread. A Completion
// destroyed without any of them reports a failure ("completion dropped"), so
// a lost callback can never hang a pipeline.
class Completion {
 public:
  Completion(detail::CompletionTarget* target, uint64_t token,
             std::stop_token stop) noexcept
      : target_(target), token_(token), stop_(std::move(stop)) {}
  Completion(Completion&& other) noexcept;
  Completion& operator=(Completion&& other) noexcept;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion();

  // Delivers `result` (an empty Item skips the input).
  void emit(Item result);
  void skip() { emit(Item()); }
  // Reports the call as failed with `error`.
  void fail(std::exception_ptr error);

  // Whether the call is still to be finished by this object (not yet
  // emitted, skipped or failed, and not moved from).
  bool pending() const { return target_ != nullptr; }

  // Requested when the pipeline stops; long-running work should give up.
  const std::stop_token& stop_token() const { return stop_; }

 private:
  detail::CompletionTarget* target_;
  uint64_t token_;
  std::stop_token stop_;
};

class AsyncOp : public Op {
 public:
  OpKind kind() const final { return OpKind::kAsync; }

  // Starts the call and returns. Move `done` away to finish later, or call it
  // before returning.
  // Throws: anything, to fail the call synchronously (if `done` was not
  // moved away, the exception becomes the call's error; if it was, or was
  // already called, the call's outcome stands and the stage logs the
  // exception once).
  virtual void start(Item input, Completion&& done) = 0;
};

using OpPtr = std::shared_ptr<Op>;

}  // namespace feedline
