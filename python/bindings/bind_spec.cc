// SPDX-License-Identifier: Apache-2.0
//
// _PipelineSpec: collects the stages that feedline.pipeline hands over
// (Python ops, native ops, aggregates, ...) and builds an engine pipeline,
// wrapped as a _NativePipeline (bind_pipeline.cc). Also the handles of native
// ops and sources (bindings.h) that it takes.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <typeinfo>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/spec.h"
#include "py_ops.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// The name of a native item type; None for null (any, or not known).
std::optional<std::string> type_name_of(const std::type_info* type) {
  if (type == nullptr) return std::nullopt;
  return type_name(*type);
}

// The engine's build_pipeline() checks the spec as a whole (a source or
// merged inputs, no sink on a merged pipeline, a sink of room >= 1).
class PipelineSpecBuilder {
 public:
  // The source: a NativeSource, or any Python iterable.
  void set_source(nb::handle source, const std::string& name, bool continuous) {
    spec_.source_options.name = name;
    spec_.source_options.continuous = continuous;
    if (nb::isinstance<NativeSource>(source)) {
      NativeSource& s = nb::cast<NativeSource&>(source);
      spec_.source = s.factory;
      spec_.source_type = s.output;
    } else {
      spec_.source = make_python_source(nb::borrow(source));
      spec_.source_type = &typeid(PyObj);
    }
  }

  void set_merge(const std::vector<PipelineSpecBuilder*>& inputs,
                 const std::string& name) {
    for (PipelineSpecBuilder* input : inputs) {
      if (input == nullptr)
        throw InvalidArgument("set_merge: an input is None, not a spec");
      spec_.merge_inputs.push_back(input->spec_);
    }
    spec_.merge_name = name;
  }

  // A pipe stage: `op` is a Python function ("map", "generator"), a submit
  // function ("async") or a NativeOp ("native").
  void add_pipe(const std::string& kind, nb::object op, const std::string& name,
                int concurrency, bool input_order,
                std::optional<FailureBudget> budget) {
    OpPtr native;
    if (kind == "native") {
      native = adapt_native_op(nb::cast<const NativeOp&>(op));
    } else if (kind == "map" || kind == "generator" || kind == "async") {
      native = kind == "map"         ? make_python_map_op(std::move(op))
               : kind == "generator" ? make_python_generator_op(std::move(op))
                                     : make_python_async_op(std::move(op));
    } else {
      throw InvalidArgument("unknown pipe kind '" + kind + "'");
    }
    add_stage(StageKind::kPipe, std::move(native), name, concurrency,
              input_order, budget);
  }

  // An aggregate stage: batches of `op` items (an int), or an Aggregator.
  void add_aggregate(nb::object op, bool drop_last, const std::string& name,
                     std::optional<FailureBudget> budget) {
    add_stage(StageKind::kAggregate,
              PyLong_Check(op.ptr())
                  ? make_aggregate_op(nb::cast<std::size_t>(op), drop_last)
                  : make_python_aggregator_op(std::move(op), drop_last),
              name, 1, false, budget);
  }

  void add_disaggregate(const std::string& name) {
    add_stage(StageKind::kDisaggregate, make_disaggregate_any_op(), name, 1,
              false, std::nullopt);
  }

  void set_sink(std::size_t capacity) { spec_.sink_capacity = capacity; }

  // (cpu_budget, cpus, max_concurrency, max_threads, interval in seconds)
  using AutotuneArgs = std::tuple<double, int, int, int, double>;

  nb::object build(int num_threads, std::optional<FailureBudget> max_failures,
                   double report_interval, nb::object stats_callback,
                   int failure_log_burst, double failure_log_interval,
                   const std::string& name, int trace_every,
                   std::size_t trace_capacity,
                   std::optional<AutotuneArgs> autotune) {
    BuildOptions options;
    if (autotune) {
      const auto& [budget, cpus, max_concurrency, max_threads, interval] =
          *autotune;
      options.autotune.enabled = true;
      options.autotune.cpu_budget = budget;
      options.autotune.cpus = cpus;
      options.autotune.max_concurrency = max_concurrency;
      options.autotune.max_threads = max_threads;
      options.autotune.interval = seconds_to_ns(interval);
    }
    options.trace_every = trace_every;
    options.trace_capacity = trace_capacity;
    options.num_threads = num_threads;
    if (max_failures) options.max_failures = *max_failures;
    options.name = name;
    options.failure_log_burst = failure_log_burst;
    options.failure_log_interval = seconds_to_ns(failure_log_interval);
    if (!stats_callback.is_none()) {
      options.stats_hook = make_python_stats_hook(std::move(stats_callback));
      if (report_interval > 0)
        options.report_interval = seconds_to_ns(report_interval);
    }
    return wrap_pipeline(build_pipeline(spec_, std::move(options)));
  }

 private:
  void add_stage(StageKind kind, OpPtr op, const std::string& name,
                 int concurrency, bool input_order,
                 std::optional<FailureBudget> budget) {
    OutputOrder order =
        input_order ? OutputOrder::kInput : OutputOrder::kCompletion;
    spec_.stages.push_back(
        {kind, std::move(op), {name, concurrency, order, std::move(budget)}});
  }

  PipelineSpec spec_;
};
}  // namespace

void bind_spec(nb::module_& m) {
  nb::class_<NativeOp>(
      m, "NativeOp", nb::dynamic_attr(),
      "A pipeline op implemented in C++. Pass it to PipelineBuilder.pipe(): "
      "it\nruns without the GIL and passes native items on without converting"
      "\nthem to Python objects.")
      .def_ro("name", &NativeOp::name)
      .def_prop_ro("kind",
                   [](const NativeOp& n) { return op_kind_name(n.op->kind()); })
      .def_prop_ro(
          "input_type",
          [](const NativeOp& n) { return type_name_of(n.op->input_type()); },
          "Name of the native type the op takes; None: any item.")
      .def_prop_ro(
          "output_type",
          [](const NativeOp& n) { return type_name_of(n.op->output_type()); },
          "Name of the native type the op produces; None: what it was given.")
      .def("__repr__", [](const NativeOp& n) {
        return "NativeOp(" + n.name + ": " + op_signature(*n.op) + ")";
      });
  nb::class_<NativeSource>(
      m, "NativeSource",
      "A pipeline source implemented in C++; pass it to add_source().")
      .def_ro("name", &NativeSource::name)
      .def("__repr__", [](const NativeSource& s) {
        return "NativeSource(" + s.name + ")";
      });

  nb::class_<PipelineSpecBuilder>(m, "_PipelineSpec")
      .def(nb::init<>())
      .def("set_source", &PipelineSpecBuilder::set_source, nb::arg("source"),
           nb::arg("name"), nb::arg("continuous"))
      .def("set_merge", &PipelineSpecBuilder::set_merge, nb::arg("inputs"),
           nb::arg("name"))
      .def("add_pipe", &PipelineSpecBuilder::add_pipe, nb::arg("kind"),
           nb::arg("op"), nb::arg("name"), nb::arg("concurrency"),
           nb::arg("input_order"), nb::arg("budget").none())
      .def("add_aggregate", &PipelineSpecBuilder::add_aggregate, nb::arg("op"),
           nb::arg("drop_last"), nb::arg("name"), nb::arg("budget").none())
      .def("add_disaggregate", &PipelineSpecBuilder::add_disaggregate)
      .def("set_sink", &PipelineSpecBuilder::set_sink)
      .def("build", &PipelineSpecBuilder::build, nb::arg("num_threads"),
           nb::arg("max_failures").none(), nb::arg("report_interval"),
           nb::arg("stats_callback").none(), nb::arg("failure_log_burst"),
           nb::arg("failure_log_interval"), nb::arg("name"),
           nb::arg("trace_every"), nb::arg("trace_capacity"),
           nb::arg("autotune").none());
}

}  // namespace feedline::bindings
