// SPDX-License-Identifier: Apache-2.0
//
// The typed C++ pipeline builder. It reads like the Python one:
//
//   auto pipeline = feedline::PipelineBuilder()
//       .add_source(std::views::iota(0, 1000))
//       .pipe([](int x) { return x * 2; }, {.concurrency = 4})
//       .aggregate(32)
//       .add_sink(3)
//       .build(/*num_threads=*/4);
//   for (std::vector<int>& batch : pipeline) { ... }
//
// Each step returns a TypedBuilder<T> whose T is the item type at that point,
// so a stage that cannot take the previous stage's output fails to compile.
// Under the hood every step appends to an untyped PipelineSpec (spec.h).
//
// Thread safety: builders are plain values; build() once per pipeline.

#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/detail/typed_ops.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/spec.h"

namespace feedline {

template <typename T>
class TypedPipeline;

// Returns a map op that applies `f` to items of type T: U f(T), or
// std::optional<U> f(T) where an empty optional skips the item. The op
// declares T and U as its input and output types, so build_pipeline() can
// check it against its neighbours. This is the one way to turn a C++
// callable into an op; the typed builder's pipe() uses it too.
template <typename T, typename F>
OpPtr make_map_op(F f) {
  return std::make_shared<detail::TypedMapOp<T, F>>(std::move(f));
}

template <typename T>
class TypedBuilder {
 public:
  explicit TypedBuilder(PipelineSpec spec) : spec_(std::move(spec)) {}

  // Applies `f` to each item: U f(T) or std::optional<U> f(T), where an empty
  // optional skips the item.
  template <typename F, typename U = typename detail::MapResult<
                            std::decay_t<std::invoke_result_t<F&, T>>>::type>
  TypedBuilder<U> pipe(F f, PipeOptions options = {}) && {
    return std::move(*this).template append<U>(StageKind::kPipe,
                                               make_map_op<T>(std::move(f)),
                                               std::move(options), "pipe");
  }

  // Runs `op` (a factory's op, e.g. from feedline::ops), which takes T and
  // produces U: pipe<Buffer>(ops::decode_batch(options)).
  // Throws: InvalidArgument when the op declares other types.
  template <typename U>
  TypedBuilder<U> pipe(OpPtr op, PipeOptions options = {}) && {
    check_op_types(*op, typeid(T), typeid(U));
    return std::move(*this).template append<U>(StageKind::kPipe, std::move(op),
                                               std::move(options), "pipe");
  }

  // Applies `f`, which returns a range of results (0..n per item); results
  // are emitted one by one as downstream has room.
  template <typename F, typename C = std::decay_t<std::invoke_result_t<F&, T>>,
            typename U =
                typename detail::MapResult<std::ranges::range_value_t<C>>::type>
  TypedBuilder<U> flat_map(F f, PipeOptions options = {}) && {
    return std::move(*this).template append<U>(
        StageKind::kPipe,
        std::make_shared<detail::TypedFlatMapOp<T, F>>(std::move(f)),
        std::move(options), "flat_map");
  }

  // Applies an asynchronous `f(T, Completion)` that emits a U later. U must be
  // named: pipe_async<U>(f).
  template <typename U, typename F>
  TypedBuilder<U> pipe_async(F f, PipeOptions options = {}) && {
    return std::move(*this).template append<U>(
        StageKind::kPipe,
        std::make_shared<detail::TypedAsyncOp<T, F>>(std::move(f)),
        std::move(options), "pipe_async");
  }

  // Batches `n` items into a std::vector<T>.
  TypedBuilder<std::vector<T>> aggregate(std::size_t n, bool drop_last = false,
                                         std::string name = "aggregate") && {
    if (n < 1) throw_invalid_batch_size(n);
    PipeOptions options;
    options.name = std::move(name);
    return std::move(*this).template append<std::vector<T>>(
        StageKind::kAggregate,
        std::make_shared<detail::TypedAggregateOp<T>>(n, drop_last),
        std::move(options), "aggregate");
  }

  // Splits each std::vector batch back into items.
  template <typename X = T, typename U = typename X::value_type>
  TypedBuilder<U> disaggregate(std::string name = "disaggregate") && {
    static_assert(std::is_same_v<X, std::vector<U>>,
                  "disaggregate() needs std::vector items");
    PipeOptions options;
    options.name = std::move(name);
    return std::move(*this).template append<U>(
        StageKind::kDisaggregate,
        std::make_shared<detail::TypedDisaggregateOp<U>>(), std::move(options),
        "disaggregate");
  }

  // Ends the pipeline in a consumer buffer of `buffer_size` items.
  TypedBuilder<T> add_sink(std::size_t buffer_size = 3) && {
    spec_.sink_capacity = buffer_size;
    return std::move(*this);
  }

  TypedPipeline<T> build(int num_threads) && {
    BuildOptions options;
    options.num_threads = num_threads;
    return std::move(*this).build(std::move(options));
  }
  TypedPipeline<T> build(BuildOptions options) && {
    if (!spec_.sink_capacity) spec_.sink_capacity = 3;
    return TypedPipeline<T>(
        build_pipeline(std::move(spec_), std::move(options)));
  }

  const PipelineSpec& spec() const& { return spec_; }
  PipelineSpec spec() && { return std::move(spec_); }

 private:
  template <typename U>
  TypedBuilder<U> append(StageKind kind, OpPtr op, PipeOptions options,
                         const char* default_name) && {
    if (options.name.empty()) options.name = default_name;
    spec_.stages.push_back(StageSpec{kind, std::move(op), std::move(options)});
    return TypedBuilder<U>(std::move(spec_));
  }
  [[noreturn]] static void throw_invalid_batch_size(std::size_t n);
  static void check_op_types(const Op& op, const std::type_info& in,
                             const std::type_info& out) {
    const std::type_info* produces = op.output_type();
    if (op.accepts(in) && (produces == nullptr || *produces == out)) return;
    throw InvalidArgument(
        "pipe: the op takes " +
        (op.input_type() ? type_name(*op.input_type()) : "any item") +
        " and produces " + (produces ? type_name(*produces) : "any item") +
        ", not " + type_name(in) + " -> " + type_name(out));
  }

  PipelineSpec spec_;
};

// The entry point: a source, or a merge of typed sub-pipelines.
class PipelineBuilder {
 public:
  // Reads the items of `range` (a container or a multi-pass view, copied in;
  // elements are copied out, so a continuous source can re-read them).
  template <std::ranges::forward_range R>
  auto add_source(R range, SourceOptions options = {}) {
    using T = std::ranges::range_value_t<R>;
    auto shared = std::make_shared<R>(std::move(range));
    PipelineSpec spec;
    spec.source = [shared]() -> std::unique_ptr<ItemSource> {
      return std::make_unique<detail::RangeSource<R>>(shared);
    };
    spec.source_options = std::move(options);
    spec.source_type = &typeid(T);
    return TypedBuilder<T>(std::move(spec));
  }

  // Reads items that `factory` yields, one ItemSource per pass.
  template <typename T>
  TypedBuilder<T> add_source(SourceFactory factory,
                             SourceOptions options = {}) {
    PipelineSpec spec;
    spec.source = std::move(factory);
    spec.source_options = std::move(options);
    spec.source_type = &typeid(T);
    return TypedBuilder<T>(std::move(spec));
  }

  // Interleaves the items of several sub-pipelines (without sinks) in
  // arrival order; epoch markers are a barrier across all of them.
  template <typename T>
  static TypedBuilder<T> merge(std::vector<TypedBuilder<T>> inputs,
                               std::string name = "merge") {
    PipelineSpec spec;
    spec.merge_name = std::move(name);
    for (auto& input : inputs)
      spec.merge_inputs.push_back(std::move(input).spec());
    return TypedBuilder<T>(std::move(spec));
  }
};

// A Pipeline whose items are all T. Iterating reads one epoch (all of a
// non-continuous pipeline); iterate again for the next epoch.
template <typename T>
class TypedPipeline {
 public:
  explicit TypedPipeline(Pipeline pipeline) : pipeline_(std::move(pipeline)) {}

  // Returns the next item, or nullopt at an epoch end or the end.
  // Throws: as Pipeline::next().
  std::optional<T> next() {
    Item item;
    if (pipeline_.next(&item) != NextStatus::kItem) return std::nullopt;
    return item.take_as<T>();
  }

  class Iterator {
   public:
    // The names std::input_iterator requires.
    // NOLINTNEXTLINE(readability-identifier-naming)
    using value_type = T;
    // NOLINTNEXTLINE(readability-identifier-naming)
    using difference_type = std::ptrdiff_t;
    explicit Iterator(TypedPipeline* owner) : owner_(owner) { advance(); }
    Iterator() = default;
    T& operator*() { return *current_; }
    Iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    bool operator==(std::default_sentinel_t) const { return !current_; }

   private:
    void advance() { current_ = owner_->next(); }
    TypedPipeline* owner_ = nullptr;
    std::optional<T> current_;
  };

  Iterator begin() { return Iterator(this); }
  std::default_sentinel_t end() { return {}; }

  Pipeline& untyped() { return pipeline_; }
  PipelineStats stats() const { return pipeline_.stats(); }
  Trace trace() const { return pipeline_.trace(); }
  void stop() noexcept { pipeline_.stop(); }

 private:
  Pipeline pipeline_;
};

template <typename T>
void TypedBuilder<T>::throw_invalid_batch_size(std::size_t n) {
  throw InvalidArgument("aggregate: batch size must be >= 1 (got " +
                        std::to_string(n) + ")");
}

}  // namespace feedline
