// SPDX-License-Identifier: Apache-2.0
//
// Internal; not part of the public API. Adapters from typed C++ callables to
// the untyped op protocol of op.h, used by builder.h.

#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "feedline/pipeline/op.h"
#include "feedline/pipeline/spec.h"

namespace feedline::detail {

template <typename X>
struct IsOptional : std::false_type {};
template <typename X>
struct IsOptional<std::optional<X>> : std::true_type {};

// The item type a map callable produces: U for U(T) and std::optional<U>(T).
template <typename R>
struct MapResult {
  using type = R;  // NOLINT(readability-identifier-naming): a trait's name
};
template <typename X>
struct MapResult<std::optional<X>> {
  using type = X;  // NOLINT(readability-identifier-naming): a trait's name
};

template <typename R>
Item to_item(R&& result) {
  using V = std::decay_t<R>;
  if constexpr (IsOptional<V>::value) {
    if (!result.has_value()) return Item();
    return Item(std::move(*result));
  } else {
    return Item(std::forward<R>(result));
  }
}

template <typename T, typename F>
class TypedMapOp final : public MapOp {
 public:
  using Output =
      typename MapResult<std::decay_t<std::invoke_result_t<F&, T>>>::type;
  explicit TypedMapOp(F f) : f_(std::move(f)) {}
  Item call(Item input) override { return to_item(f_(input.take_as<T>())); }
  const std::type_info* input_type() const override { return &typeid(T); }
  const std::type_info* output_type() const override { return &typeid(Output); }

 private:
  F f_;
};

// Pulls the elements of a container that a flat_map callable returned.
template <typename C>
class ContainerGenerator final : public ItemGenerator {
 public:
  explicit ContainerGenerator(C c)
      : container_(std::move(c)), it_(std::ranges::begin(container_)) {}
  bool next(Item* out) override {
    if (it_ == std::ranges::end(container_)) return false;
    *out = to_item(std::move(*it_));
    ++it_;
    return true;
  }

 private:
  C container_;
  std::ranges::iterator_t<C> it_;
};

template <typename T, typename F>
class TypedFlatMapOp final : public GeneratorOp {
 public:
  explicit TypedFlatMapOp(F f) : f_(std::move(f)) {}
  const std::type_info* input_type() const override { return &typeid(T); }
  const std::type_info* output_type() const override {
    using C = std::decay_t<std::invoke_result_t<F&, T>>;
    return &typeid(typename MapResult<std::ranges::range_value_t<C>>::type);
  }
  std::unique_ptr<ItemGenerator> start(Item input) override {
    using C = std::decay_t<std::invoke_result_t<F&, T>>;
    return std::make_unique<ContainerGenerator<C>>(f_(input.take_as<T>()));
  }

 private:
  F f_;
};

template <typename T, typename F>
class TypedAsyncOp final : public AsyncOp {
 public:
  explicit TypedAsyncOp(F f) : f_(std::move(f)) {}
  const std::type_info* input_type() const override { return &typeid(T); }
  void start(Item input, Completion&& done) override {
    f_(input.take_as<T>(), std::move(done));
  }

 private:
  F f_;
};

// Collects n items of type T into a std::vector<T>.
template <typename T>
class TypedAggregateOp final : public MapOp {
 public:
  TypedAggregateOp(std::size_t n, bool drop_last)
      : n_(n), drop_last_(drop_last) {
    batch_.reserve(n);
  }
  bool stateful() const override { return true; }
  const std::type_info* input_type() const override { return &typeid(T); }
  const std::type_info* output_type() const override {
    return &typeid(std::vector<T>);
  }
  Item call(Item input) override {
    batch_.push_back(input.take_as<T>());
    if (batch_.size() < n_) return Item();
    return take();
  }
  Item flush(FlushReason) override {
    if (batch_.empty() || drop_last_) {
      batch_.clear();
      return Item();
    }
    return take();
  }

 private:
  Item take() {
    std::vector<T> full = std::move(batch_);
    batch_ = std::vector<T>();
    batch_.reserve(n_);
    return Item(std::move(full));
  }
  const std::size_t n_;
  const bool drop_last_;
  std::vector<T> batch_;
};

template <typename T>
class TypedDisaggregateOp final : public GeneratorOp {
 public:
  const std::type_info* input_type() const override {
    return &typeid(std::vector<T>);
  }
  const std::type_info* output_type() const override { return &typeid(T); }
  std::unique_ptr<ItemGenerator> start(Item input) override {
    return std::make_unique<ContainerGenerator<std::vector<T>>>(
        input.take_as<std::vector<T>>());
  }
};

// One pass over a shared, multi-pass range (a container or a view).
template <typename R>
class RangeSource final : public ItemSource {
 public:
  explicit RangeSource(std::shared_ptr<R> range)
      : range_(std::move(range)), it_(std::ranges::begin(*range_)) {}
  bool next(Item* out) override {
    if (it_ == std::ranges::end(*range_)) return false;
    *out = Item(*it_);
    ++it_;
    return true;
  }

 private:
  std::shared_ptr<R> range_;
  std::ranges::iterator_t<R> it_;
};

}  // namespace feedline::detail
