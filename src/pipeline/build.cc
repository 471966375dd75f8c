// SPDX-License-Identifier: Apache-2.0
//
// build_pipeline(): validates a PipelineSpec and wires its runners.

#include <algorithm>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/spec.h"
#include "pipeline/pipeline_impl.h"
#include "pipeline/sink_runner.h"

namespace feedline {

const char* to_string(StageKind kind) {
  switch (kind) {
    case StageKind::kSource:
      return "source";
    case StageKind::kPipe:
      return "pipe";
    case StageKind::kAggregate:
      return "aggregate";
    case StageKind::kDisaggregate:
      return "disaggregate";
    case StageKind::kMerge:
      return "merge";
    case StageKind::kSink:
      return "sink";
  }
  return "unknown";
}

namespace {

using detail::PipelineImpl;
using detail::StageRunner;

// A stage's output channel has room for `capacity` queued results plus one
// per call it may have in flight (each call reserves its slot up front).
std::size_t slots_for(std::size_t capacity, int concurrency) {
  return (capacity == 0 ? kDefaultQueueCapacity : capacity) +
         static_cast<std::size_t>(concurrency);
}

void validate_stage(const StageSpec& stage, const std::string& where) {
  if (!stage.op) throw InvalidArgument(where + ": the stage has no op");
  const PipeOptions& o = stage.options;
  if (o.concurrency < 1) {
    throw InvalidArgument(where + ": concurrency must be >= 1 (got " +
                          std::to_string(o.concurrency) + ")");
  }
  if (stage.op->stateful() && o.concurrency != 1) {
    throw InvalidArgument(where + ": a stateful op (" + to_string(stage.kind) +
                          ") runs with concurrency 1 (got " +
                          std::to_string(o.concurrency) + ")");
  }
  if (stage.op->kind() == OpKind::kGenerator &&
      o.output_order == OutputOrder::kInput && o.concurrency > 1) {
    throw InvalidArgument(
        where +
        ": output_order=input is not supported for generator ops "
        "with concurrency > 1");
  }
}

struct Chain {
  StageRunner* tail = nullptr;
  std::size_t tail_slots = 0;
  int tail_concurrency = 1;
  std::vector<bool> continuous;  // one flag per source
  // What the tail stage produces (null: not known) and its name.
  const std::type_info* produced = nullptr;
  std::string producer;
};

// Throws if `stage` cannot take what the chain's tail produces. Unknown types
// (either side) pass: the stage then checks each item as it comes.
void check_fit(const Chain& chain, const StageSpec& stage,
               const std::string& path) {
  if (chain.produced == nullptr || stage.op->accepts(*chain.produced)) return;
  const std::type_info* takes = stage.op->input_type();
  throw InvalidArgument(path + ": stage '" + stage.options.name + "' (takes " +
                        (takes != nullptr ? type_name(*takes) : "other items") +
                        ") cannot follow stage '" + chain.producer +
                        "' (produces " + type_name(*chain.produced) + ")");
}

// The type every input of a merge ends with, or null if they differ or one
// is not known.
const std::type_info* common_type(const std::vector<Chain>& inputs) {
  const std::type_info* type = inputs.front().produced;
  for (const Chain& in : inputs) {
    if (type == nullptr || in.produced == nullptr || *in.produced != *type)
      return nullptr;
  }
  return type;
}

Chain build_chain(PipelineImpl* impl, PipelineSpec& spec,
                  const std::string& path) {
  Chain chain;
  bool has_source = static_cast<bool>(spec.source);
  if (has_source == !spec.merge_inputs.empty()) {
    throw InvalidArgument(path + (has_source
                                      ? ": a pipeline has either a source or "
                                        "merged inputs, not both"
                                      : ": the pipeline has no source"));
  }
  if (has_source) {
    chain.tail = impl->add_runner(detail::make_source_runner(
        impl, impl->next_index(), std::move(spec.source), spec.source_options));
    chain.tail_slots = slots_for(spec.source_options.output_capacity, 1);
    chain.continuous.push_back(spec.source_options.continuous);
    chain.produced = spec.source_type;
    chain.producer = spec.source_options.name;
  } else {
    std::vector<Chain> inputs;
    for (std::size_t i = 0; i < spec.merge_inputs.size(); ++i) {
      PipelineSpec& sub = spec.merge_inputs[i];
      std::string sub_path = path + ".merge[" + std::to_string(i) + "]";
      if (sub.sink_capacity) {
        throw InvalidArgument(sub_path +
                              ": a merged pipeline must not have a sink");
      }
      inputs.push_back(build_chain(impl, sub, sub_path));
    }
    StageRunner* merge = impl->add_runner(
        detail::make_merge_runner(impl, impl->next_index(), spec.merge_name));
    for (Chain& in : inputs) {
      merge->add_input(in.tail_slots, in.tail);
      chain.continuous.insert(chain.continuous.end(), in.continuous.begin(),
                              in.continuous.end());
    }
    chain.tail = merge;
    chain.tail_slots = slots_for(0, 1);
    chain.produced = common_type(inputs);
    chain.producer = spec.merge_name;
  }
  for (std::size_t i = 0; i < spec.stages.size(); ++i) {
    StageSpec& stage = spec.stages[i];
    if (stage.options.name.empty()) stage.options.name = to_string(stage.kind);
    const std::string where = path + ".stage[" + std::to_string(i) + "]";
    validate_stage(stage, where + " '" + stage.options.name + "'");
    check_fit(chain, stage, where);
    StageRunner* runner = impl->add_runner(
        detail::make_pipe_runner(impl, impl->next_index(), stage));
    runner->add_input(chain.tail_slots, chain.tail);
    chain.tail = runner;
    std::size_t capacity = stage.options.output_capacity;
    if (capacity == 0 && stage.kind == StageKind::kAggregate) {
      capacity = kDefaultBatchQueueCapacity;
    }
    // A stage autotune may widen gets the slots of its widest setting.
    int concurrency = stage.options.concurrency;
    const AutotuneOptions& autotune = impl->options().autotune;
    if (autotune.enabled && runner->tunable()) {
      concurrency = std::max(concurrency, autotune.max_concurrency);
    }
    chain.tail_slots = slots_for(capacity, concurrency);
    chain.tail_concurrency = concurrency;
    chain.produced = stage.op->output_type();
    chain.producer = stage.options.name;
  }
  return chain;
}

}  // namespace

Pipeline build_pipeline(PipelineSpec spec, BuildOptions options) {
  if (options.num_threads < 1) {
    throw InvalidArgument("num_threads must be >= 1 (got " +
                          std::to_string(options.num_threads) + ")");
  }
  if (!spec.sink_capacity) {
    throw InvalidArgument("the pipeline has no sink (add_sink was not called)");
  }
  if (*spec.sink_capacity < 1) {
    throw InvalidArgument("sink buffer_size must be >= 1 (got 0)");
  }
  if (options.failure_log_burst < 0) {
    throw InvalidArgument("failure_log_burst must be >= 0 (got " +
                          std::to_string(options.failure_log_burst) + ")");
  }
  const AutotuneOptions& autotune = options.autotune;
  if (autotune.enabled) {
    if (!(autotune.cpu_budget > 0 && autotune.cpu_budget <= 1)) {
      throw InvalidArgument("autotune cpu_budget must be in (0, 1] (got " +
                            std::to_string(autotune.cpu_budget) + ")");
    }
    if (autotune.max_concurrency < 1 || autotune.max_threads < 0 ||
        autotune.cpus < 0 || autotune.interval.count() <= 0) {
      throw InvalidArgument(
          "autotune needs max_concurrency >= 1, max_threads >= 0, cpus >= 0 "
          "and an interval > 0 (got " +
          std::to_string(autotune.max_concurrency) + ", " +
          std::to_string(autotune.max_threads) + ", " +
          std::to_string(autotune.cpus) + ", " +
          std::to_string(autotune.interval.count()) + " ns)");
    }
  }
  auto impl = std::make_unique<PipelineImpl>(std::move(options));
  Chain chain = build_chain(impl.get(), spec, "pipeline");
  for (bool c : chain.continuous) {
    if (c != chain.continuous.front()) {
      throw InvalidArgument(
          "mixed continuous mode is not supported: every merged source must "
          "be continuous, or none");
    }
  }
  std::size_t sink_slots =
      *spec.sink_capacity + static_cast<std::size_t>(chain.tail_concurrency);
  auto sink =
      std::make_unique<detail::SinkRunner>(impl.get(), impl->next_index());
  detail::SinkRunner* sink_ptr = sink.get();
  impl->add_runner(std::move(sink));
  sink_ptr->add_input(sink_slots, chain.tail);
  impl->set_sink(sink_ptr);
  return Pipeline(std::move(impl));
}

}  // namespace feedline
