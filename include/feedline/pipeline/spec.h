// SPDX-License-Identifier: Apache-2.0
//
// PipelineSpec: the untyped description of a pipeline, and build().
//
// A spec is a list of stages after a head, where the head is either a source
// or a merge of several sub-pipelines (each a spec without a sink). The typed
// C++ builder (builder.h) and the Python builder both produce a spec; build()
// turns it into a Pipeline. Specs are plain values and ops are shared, not
// copied. A source factory is called on a pool thread when the source is first
// pulled (and again at each epoch of a continuous source), not at build time.

#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "feedline/pipeline/item.h"
#include "feedline/pipeline/op.h"
#include "feedline/pipeline/stage_options.h"

namespace feedline {

class Pipeline;

// One pass over a source's items. Pulled by one thread at a time.
class ItemSource {
 public:
  virtual ~ItemSource() = default;

  // Stores the next item in `*out` and returns true, or returns false at the
  // end of the pass. An empty item is skipped.
  // Throws: anything; it fails the source stage (and so the pipeline).
  virtual bool next(Item* out) = 0;
};

// Opens a new pass. Called once, or once per epoch for continuous sources.
using SourceFactory = std::function<std::unique_ptr<ItemSource>()>;

enum class StageKind {
  kSource,
  kPipe,
  kAggregate,
  kDisaggregate,
  kMerge,
  kSink
};

// Returns "source", "pipe", "aggregate", "disaggregate", "merge" or "sink".
const char* to_string(StageKind kind);

struct StageSpec {
  StageKind kind = StageKind::kPipe;
  OpPtr op;
  PipeOptions options;
};

struct PipelineSpec {
  // The head: a source, or else the sub-pipelines to merge.
  SourceFactory source;
  SourceOptions source_options;
  // The item type the source yields; null: not known in advance. A merge
  // yields the type all of its inputs end with, if they agree.
  const std::type_info* source_type = nullptr;
  std::vector<PipelineSpec> merge_inputs;
  std::string merge_name = "merge";

  std::vector<StageSpec> stages;

  // Capacity of the consumer's buffer; required for a pipeline that is built
  // (sub-pipelines of a merge have none).
  std::optional<std::size_t> sink_capacity;
};

// Returns an op that collects `n` items into an ItemBatch, emitting the last
// partial batch at epoch ends and at end of stream unless `drop_last`.
// Throws: InvalidArgument if n < 1.
OpPtr make_aggregate_op(std::size_t n, bool drop_last);

// Returns an op that splits an ItemBatch into its items. Items of any other
// type go to `other`, which returns their items (the Python bindings split
// Python lists there); without it the op takes ItemBatch only.
using Splitter = std::function<std::unique_ptr<ItemGenerator>(Item)>;
OpPtr make_disaggregate_op(Splitter other = nullptr);

// Validates `spec` and builds a pipeline that has not started yet.
// Where a stage's item type is known (the source's source_type, an op's
// output_type()), the next stage's op must accept it (Op::accepts()).
// Throws: InvalidArgument naming the offending stage when the spec is
// malformed (no head, no sink, concurrency < 1, input order with a generator,
// mixed continuous sources, ...), and naming both stages and both types when
// a stage cannot take what the stage before it produces.
Pipeline build_pipeline(PipelineSpec spec, BuildOptions options);

}  // namespace feedline
