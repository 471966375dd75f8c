// SPDX-License-Identifier: Apache-2.0
//
// The private pipeline API that feedline.pipeline builds on:
//   _NativePipeline   the consumer's end: get(), epoch iterators, stop();
//   FailureBudget     a failure budget, made by its factory functions;
//   the log hooks.
// _PipelineSpec is bound in bind_spec.cc, NativeOp / NativeSource in
// bind_spec.cc, statistics classes in bind_stats.cc. Stopping, final statistics
// and the failure are the engine's (feedline/pipeline/pipeline.h); this file
// converts arguments and sets the GIL policy (py_ref.h): every call that can
// wait runs with the GIL released, and the consumer waits in slices so that
// Ctrl-C reaches it.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/stats.h"
#include "py_ops.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// How long the exit gate waits for engine threads already waiting for the
// GIL to have it (each then runs at most its current Python call).
constexpr double kExitGilWaitSeconds = 2.0;

using std::chrono::nanoseconds;

// How long the consumer waits between checks for signals (Ctrl-C).
constexpr auto kSignalCheckInterval = std::chrono::milliseconds(50);

// The consumer's end of an engine pipeline.
class NativePipeline : public std::enable_shared_from_this<NativePipeline> {
 public:
  explicit NativePipeline(Pipeline p) : pipeline_(std::move(p)) {}

  // A pipeline nobody stopped is stopped here, without the GIL (the stop
  // waits for calls that may need it); on a worker thread of any pipeline,
  // without waiting (see stop()). A stop under way is left to the engine.
  ~NativePipeline() {
    std::optional<ReleaseGil> release;
    if (holds_gil()) release.emplace();
    if (ThreadPool::in_any_pool_thread()) pipeline_.stop(nanoseconds(0));
    Pipeline gone = std::move(pipeline_);
  }

  void start() {
    ReleaseGil release;
    pipeline_.start();
  }
  bool started() const { return pipeline_.started(); }

  // Blocks (GIL released; consumers take turns) for the next entry, in
  // slices between which pending signals are handled. Returns kItem with
  // `*out`, kEpochEnd or kEnd. Throws: Timeout after `timeout` seconds;
  // PipelineFailure.
  NextStatus wait_next(Item* out, std::optional<double> timeout) {
    std::optional<nanoseconds> wait;
    if (timeout) wait = seconds_to_ns(*timeout);
    // Pending signals are handled between slices of the wait, with the GIL.
    // At exit (see ReleaseGil) it stops the wait with no error set; the
    // ReleaseGil then parks this thread.
    auto signalled = [] {
      BriefGil gil;
      if (!gil.held()) return true;
      return PyErr_CheckSignals() != 0;  // leaves the error set
    };
    NextStatus status;
    std::chrono::steady_clock::time_point taken;
    {
      ReleaseGil release;
      status = pipeline_.next(out, wait, signalled, kSignalCheckInterval);
      taken = std::chrono::steady_clock::now();
    }
    // The wait to retake the GIL with the item: long when the pipeline's
    // Python stages hold it, which then pace this consumer too.
    if (status == NextStatus::kItem) {
      pipeline_.report_consumer_gil_wait(std::chrono::steady_clock::now() -
                                         taken);
    }
    if (status != NextStatus::kInterrupted) return status;
    // Ctrl-C in the consumer stops the pipeline: nobody is left to read it,
    // and its threads must not outlive the interrupted program. The interrupt
    // is raised now; the stop goes on in the background.
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) != 0) {
      nb::python_error interrupt;
      stop(0.0);
      throw interrupt;
    }
    throw nb::python_error();
  }

  // Stops the pipeline; waits at most `timeout` seconds (None: until done).
  // Returns false while the stop is still running (true on this pipeline's
  // own worker: the stop is requested, there is nothing to wait for). On a
  // worker thread of any pipeline it never waits, not to hold that worker.
  bool stop(std::optional<double> timeout) {
    std::optional<nanoseconds> wait;
    if (timeout) wait = seconds_to_ns(*timeout);
    ReleaseGil release;
    if (ThreadPool::in_any_pool_thread()) wait = nanoseconds(0);
    if (wait) return pipeline_.stop(*wait) || pipeline_.on_worker_thread();
    pipeline_.stop();
    return true;
  }

  bool stopping() const { return pipeline_.stopping(); }
  bool consumer_waiting() const { return pipeline_.consumers_waiting() > 0; }

  // Keeps the GIL: a snapshot takes stage mutexes only briefly, and no engine
  // thread waits for the GIL while holding one (py_ref.h), so this cannot
  // deadlock; a caller may poll it while holding the GIL.
  PipelineStats stats() const { return pipeline_.stats(); }

  // The sampled calls as Trace Event Format JSON (to_trace_json()).
  std::string trace_json() const {
    ReleaseGil release;
    return to_trace_json(pipeline_.trace(), pipeline_.stats());
  }

  // The latest counters of one worker of a region, as a record from
  // encode_stage_stats() in that worker (see Pipeline::report_region).
  // Throws: FormatError for a damaged record.
  void report_region(const std::string& region, int host_stage, int worker,
                     int workers, const nb::bytes& record) {
    std::vector<StageStats> stages =
        decode_stage_stats(std::string_view(record.c_str(), record.size()));
    ReleaseGil release;
    pipeline_.report_region(region, host_stage, worker, workers,
                            std::move(stages));
  }

  // Once stopped: the failure as a Python feedline.PipelineFailure (None if
  // no stage failed, or it was handed over already). Python then holds the
  // exception objects, where the garbage collector can see the cycles their
  // tracebacks may form with this pipeline (release_python_objects()).
  nb::object take_failure() {
    std::exception_ptr failure;
    {
      // Without the GIL: a stop that just finished may join its stopper
      // thread, which takes the GIL as it exits.
      ReleaseGil release;
      failure = pipeline_.take_failure();
    }
    if (!failure) return nb::none();
    nb::object exc = to_python_exception(failure);
    release_python_objects(failure);
    return exc;
  }

 private:
  Pipeline pipeline_;
};

// One epoch of the pipeline as a Python iterator.
class EpochIterator {
 public:
  EpochIterator(std::shared_ptr<NativePipeline> owner,
                std::optional<double> timeout)
      : owner_(std::move(owner)), timeout_(timeout) {}
  nb::object next() {
    if (ended_) throw nb::stop_iteration();
    Item item;
    NextStatus status = owner_->wait_next(&item, timeout_);
    if (status == NextStatus::kItem) return to_python(std::move(item));
    ended_ = true;
    throw nb::stop_iteration();
  }

 private:
  std::shared_ptr<NativePipeline> owner_;
  std::optional<double> timeout_;
  bool ended_ = false;
};

}  // namespace

nb::object wrap_pipeline(Pipeline pipeline) {
  return nb::cast(std::make_shared<NativePipeline>(std::move(pipeline)));
}

void bind_pipeline(nb::module_& m) {
  bind_completion(m);

  nb::class_<FailureBudget>(
      m, "FailureBudget",
      "How many failed calls a stage (or a pipeline) tolerates.")
      .def_static("unlimited", &FailureBudget::unlimited)
      .def_static("max_count", &FailureBudget::max_count, nb::arg("n"),
                  "Fails once more than `n` calls failed.")
      .def_static("max_rate", &FailureBudget::max_rate, nb::arg("numerator"),
                  nb::arg("denominator"), nb::arg("probation_calls") = 100,
                  "Fails once more than numerator/denominator of the calls "
                  "failed, after `probation_calls` calls.")
      .def("exceeded", &FailureBudget::exceeded, nb::arg("failures"),
           nb::arg("calls"))
      .def("__repr__", [](const FailureBudget& b) {
        return "FailureBudget(" + b.to_string() + ")";
      });

  nb::class_<EpochIterator>(m, "_EpochIterator")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &EpochIterator::next);

  nb::class_<NativePipeline>(m, "_NativePipeline", nb::is_weak_referenceable())
      .def("start", &NativePipeline::start)
      .def_prop_ro("started", &NativePipeline::started)
      .def(
          "get",
          [](NativePipeline& p, std::optional<double> timeout) -> nb::object {
            Item item;
            NextStatus status = p.wait_next(&item, timeout);
            if (status == NextStatus::kItem) return to_python(std::move(item));
            PyErr_SetString(PyExc_EOFError,
                            status == NextStatus::kEpochEnd
                                ? "Reached the end of the epoch."
                                : "Reached the end of the pipeline.");
            throw nb::python_error();
          },
          nb::arg("timeout").none())
      .def(
          "epoch",
          [](NativePipeline& p, std::optional<double> timeout) {
            return EpochIterator(p.shared_from_this(), timeout);
          },
          nb::arg("timeout").none())
      .def("stop", &NativePipeline::stop, nb::arg("timeout").none())
      .def_prop_ro("stopping", &NativePipeline::stopping)
      .def_prop_ro("consumer_waiting", &NativePipeline::consumer_waiting)
      .def("stats", &NativePipeline::stats)
      .def("trace_json", &NativePipeline::trace_json)
      .def("report_region", &NativePipeline::report_region, nb::arg("region"),
           nb::arg("host_stage"), nb::arg("worker"), nb::arg("workers"),
           nb::arg("record"))
      .def("take_failure", &NativePipeline::take_failure);

  m.def(
      "_set_log_handler",
      [](nb::object handler) {
        set_log_sink(handler.is_none() ? LogSink()
                                       : make_python_log_sink(handler));
      },
      nb::arg("handler").none(),
      "Routes engine log messages to handler(level, message); None: stderr.");
  m.def(
      "_set_log_level",
      [](int level) { set_log_level(static_cast<LogLevel>(level)); },
      nb::arg("level"));
  m.def(
      "_set_leak_warnings", [](bool on) { nb::set_leak_warnings(on); },
      nb::arg("on"),
      "nanobind's report of objects alive at exit: off once a pipeline is "
      "left running at exit (what it holds is left on purpose).");
  m.def(
      "_drain_released", [] { drain_released(); },
      "Releases Python references dropped by native threads.");
  m.def(
      "_live_pool_threads", [] { return ThreadPool::live_threads(); },
      "Worker threads of all pipelines alive in the process.");
  m.def(
      "_threads_waiting_for_gil", [] { return threads_waiting_for_gil(); },
      "Engine threads waiting for the GIL now.");
  m.def(
      "_begin_exit", [](double timeout) { begin_interpreter_exit(timeout); },
      nb::arg("timeout") = kExitGilWaitSeconds,
      "Run by the last atexit function: engine threads stop taking the GIL "
      "(see py_ref.h).");
  // Registered now, at the module's import, so that it runs after every
  // atexit function registered later (they run last first) and just before
  // the interpreter finalizes.
  nb::module_::import_("atexit").attr("register")(m.attr("_begin_exit"));
  note_main_thread(nb::cast<unsigned long>(
      nb::module_::import_("threading").attr("main_thread")().attr("ident")));
}

}  // namespace feedline::bindings
