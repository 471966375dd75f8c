// SPDX-License-Identifier: Apache-2.0
//
// The built-in untyped ops (aggregate, disaggregate), Completion, and
// FailureBudget.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/pipeline/op.h"
#include "feedline/pipeline/spec.h"
#include "feedline/pipeline/stage_options.h"
#include "pipeline/stage_runner.h"

namespace feedline {

namespace detail {
namespace {
thread_local std::vector<std::exception_ptr>* t_element_failures = nullptr;
thread_local GilTimes* t_gil_times = nullptr;
}  // namespace

GilTimeScope::GilTimeScope(GilTimes* sink)
    : saved_(std::exchange(t_gil_times, sink)) {}

GilTimeScope::~GilTimeScope() { t_gil_times = saved_; }

ElementFailureScope::ElementFailureScope(std::vector<std::exception_ptr>* sink)
    : saved_(std::exchange(t_element_failures, sink)) {}

ElementFailureScope::~ElementFailureScope() { t_element_failures = saved_; }
}  // namespace detail

bool report_element_failure(std::exception_ptr error) {
  if (detail::t_element_failures == nullptr || !error) return false;
  detail::t_element_failures->push_back(std::move(error));
  return true;
}

bool report_gil_time(std::chrono::nanoseconds wait,
                     std::chrono::nanoseconds held) {
  detail::GilTimes* times = detail::t_gil_times;
  if (times == nullptr) return false;
  ++times->acquisitions;
  times->wait += std::max(wait, std::chrono::nanoseconds(0));
  times->held += std::max(held, std::chrono::nanoseconds(0));
  return true;
}

namespace {

class AggregateOp final : public MapOp {
 public:
  AggregateOp(std::size_t n, bool drop_last) : n_(n), drop_last_(drop_last) {}
  bool stateful() const override { return true; }
  const std::type_info* output_type() const override {
    return &typeid(ItemBatch);
  }
  Item call(Item input) override {
    batch_.push_back(std::move(input));
    if (batch_.size() < n_) return Item();
    return Item(std::exchange(batch_, ItemBatch()));
  }
  Item flush(FlushReason) override {
    ItemBatch partial = std::exchange(batch_, ItemBatch());
    if (partial.empty() || drop_last_) return Item();
    return Item(std::move(partial));
  }

 private:
  const std::size_t n_;
  const bool drop_last_;
  ItemBatch batch_;
};

class BatchGenerator final : public ItemGenerator {
 public:
  explicit BatchGenerator(ItemBatch batch) : batch_(std::move(batch)) {}
  bool next(Item* out) override {
    if (next_ == batch_.size()) return false;
    *out = std::move(batch_[next_++]);
    return true;
  }

 private:
  ItemBatch batch_;
  std::size_t next_ = 0;
};

class DisaggregateOp final : public GeneratorOp {
 public:
  explicit DisaggregateOp(Splitter other) : other_(std::move(other)) {}
  const std::type_info* input_type() const override {
    return other_ ? nullptr : &typeid(ItemBatch);
  }
  std::unique_ptr<ItemGenerator> start(Item input) override {
    if (other_ && !input.holds<ItemBatch>()) return other_(std::move(input));
    return std::make_unique<BatchGenerator>(input.take_as<ItemBatch>());
  }

 private:
  const Splitter other_;
};

}  // namespace

const char* op_kind_name(OpKind kind) {
  constexpr const char* kNames[] = {"map", "generator", "async"};
  return kNames[static_cast<int>(kind)];
}

std::string op_signature(const Op& op) {
  std::string in = op.input_type() ? type_name(*op.input_type()) : "any";
  return in + " -> " + (op.output_type() ? type_name(*op.output_type()) : in);
}

OpPtr make_aggregate_op(std::size_t n, bool drop_last) {
  if (n < 1) {
    throw InvalidArgument("aggregate: batch size must be >= 1 (got " +
                          std::to_string(n) + ")");
  }
  return std::make_shared<AggregateOp>(n, drop_last);
}

OpPtr make_disaggregate_op(Splitter other) {
  return std::make_shared<DisaggregateOp>(std::move(other));
}

Completion::Completion(Completion&& other) noexcept
    : target_(std::exchange(other.target_, nullptr)),
      token_(other.token_),
      stop_(std::move(other.stop_)) {}

Completion& Completion::operator=(Completion&& other) noexcept {
  if (this != &other) {
    if (target_ != nullptr) {
      fail(std::make_exception_ptr(
          Internal("async op overwrote a pending completion")));
    }
    target_ = std::exchange(other.target_, nullptr);
    token_ = other.token_;
    stop_ = std::move(other.stop_);
  }
  return *this;
}

Completion::~Completion() {
  if (target_ != nullptr) {
    fail(std::make_exception_ptr(Internal(
        "async op finished without completing its call (it dropped its "
        "Completion)")));
  }
}

void Completion::emit(Item result) {
  if (target_ == nullptr) return;
  std::exchange(target_, nullptr)->complete(token_, std::move(result), nullptr);
}

void Completion::fail(std::exception_ptr error) {
  if (target_ == nullptr) return;
  std::exchange(target_, nullptr)->complete(token_, Item(), std::move(error));
}

FailureBudget FailureBudget::max_count(uint64_t n) {
  FailureBudget b;
  b.kind = Kind::kCount;
  b.count = n;
  return b;
}

FailureBudget FailureBudget::max_rate(uint64_t numerator, uint64_t denominator,
                                      uint64_t probation_calls) {
  if (denominator == 0 || numerator == 0 || numerator > denominator) {
    throw InvalidArgument("max_failures rate must be in (0, 1] (got " +
                          std::to_string(numerator) + "/" +
                          std::to_string(denominator) + ")");
  }
  FailureBudget b;
  b.kind = Kind::kRate;
  b.numerator = numerator;
  b.denominator = denominator;
  b.probation_calls = probation_calls;
  return b;
}

bool FailureBudget::exceeded(uint64_t failures, uint64_t calls) const {
  switch (kind) {
    case Kind::kUnlimited:
      return false;
    case Kind::kCount:
      return failures > count;
    case Kind::kRate:
      // In long double, so that failures * denominator cannot overflow.
      return calls >= probation_calls &&
             static_cast<long double>(failures) *
                     static_cast<long double>(denominator) >
                 static_cast<long double>(numerator) *
                     static_cast<long double>(calls);
  }
  return false;
}

std::string FailureBudget::to_string() const {
  switch (kind) {
    case Kind::kUnlimited:
      return "unlimited";
    case Kind::kCount:
      return std::to_string(count);
    case Kind::kRate: {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.1f%% after %llu calls",
                    100.0 * static_cast<double>(numerator) /
                        static_cast<double>(denominator),
                    static_cast<unsigned long long>(probation_calls));
      return buf;
    }
  }
  return "?";
}

}  // namespace feedline
