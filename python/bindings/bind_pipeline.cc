// SPDX-License-Identifier: Apache-2.0
//
// The private pipeline API that feedline.pipeline builds on:
//   _PipelineSpec     collects stages (Python ops, native ops, aggregate, ...)
//                     and builds an engine pipeline;
//   _NativePipeline   the consumer's end: get(), epoch iterators, stop();
//   NativeOp / NativeSource   handles of native ops and sources.
// Statistics classes are bound in bind_stats.cc.
//
// GIL policy (py_ref.h): every call into the engine runs with the GIL
// released; waits are cut into slices so that Ctrl-C reaches the consumer.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <typeinfo>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/spec.h"
#include "feedline/pipeline/stats.h"
#include "native_op.h"
#include "py_ops.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

using std::chrono::duration;
using std::chrono::duration_cast;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

// How long the consumer waits between checks for signals (Ctrl-C).
constexpr auto kSignalCheckInterval = std::chrono::milliseconds(50);

nanoseconds seconds_to_ns(double s) {
  if (!(s >= 0))
    throw InvalidArgument("timeout must be >= 0 (got " + std::to_string(s) +
                          ")");
  return duration_cast<nanoseconds>(duration<double>(std::min(s, 1e9)));
}

// ---------------------------------------------------------------------------
// Failure budgets from Python: None, ("unlimited",), ("count", n) or
// ("rate", numerator, denominator).

std::optional<FailureBudget> to_budget(nb::handle spec) {
  if (spec.is_none()) return std::nullopt;
  nb::tuple t = nb::cast<nb::tuple>(spec);
  std::string kind = nb::cast<std::string>(t[0]);
  if (kind == "unlimited") return FailureBudget::unlimited();
  if (kind == "count")
    return FailureBudget::max_count(nb::cast<uint64_t>(t[1]));
  if (kind == "rate") {
    return FailureBudget::max_rate(nb::cast<uint64_t>(t[1]),
                                   nb::cast<uint64_t>(t[2]));
  }
  throw InvalidArgument("unknown failure budget kind '" + kind + "'");
}

// ---------------------------------------------------------------------------
// Ownership of an engine pipeline from Python.
//
// Stopping joins the pool threads, which may be waiting for the GIL, so it
// must happen with the GIL released, and never on one of the pool's own
// threads (a finalizer can run there): then a helper thread does it.

void dispose(Pipeline* p) {
  if (ThreadPool::in_any_pool_thread()) {
    std::thread([p] { delete p; }).detach();
    return;
  }
  if (holds_gil()) {
    {
      nb::gil_scoped_release release;
      p->stop();
    }
    // Stopped: destroying it joins nothing, and with the GIL held the Python
    // objects its stages hold are released right here.
    delete p;
  } else {
    delete p;
  }
}

using PipelinePtr = std::shared_ptr<Pipeline>;

// The shared state of stopping: the first stop() starts it, later calls wait
// for the same completion. The stopper leaves the final statistics and the
// failure here, so that the engine pipeline can be released afterwards.
struct StopState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  PipelineStats final_stats;
  std::exception_ptr failure;
};

class NativePipeline;

// One epoch of the pipeline as a Python iterator.
class EpochIterator {
 public:
  EpochIterator(std::shared_ptr<NativePipeline> owner,
                std::optional<double> timeout)
      : owner_(std::move(owner)), timeout_(timeout) {}
  nb::object next();

 private:
  std::shared_ptr<NativePipeline> owner_;
  std::optional<double> timeout_;
  bool ended_ = false;
};

// The consumer's end of an engine pipeline. Once stopped, the engine pipeline
// (and with it every Python object its stages hold) is released, keeping only
// the final statistics and the failure: a pipeline whose ops refer back to it
// (through a module's globals, say) is then no longer a reference cycle that
// the garbage collector cannot see.
class NativePipeline : public std::enable_shared_from_this<NativePipeline> {
 public:
  explicit NativePipeline(Pipeline p)
      : pipeline_(new Pipeline(std::move(p)), &dispose) {}

  void start() {
    PipelinePtr p = engine();
    if (!p) throw InvalidArgument("the pipeline was stopped; build a new one");
    nb::gil_scoped_release release;
    p->start();
  }
  bool started() const {
    PipelinePtr p = engine();
    return !p || p->started();
  }

  // Blocks (GIL released) for the next entry. Returns kItem with `*out`.
  NextStatus wait_next(Item* out, std::optional<double> timeout) {
    std::optional<steady_clock::time_point> deadline;
    if (timeout) deadline = steady_clock::now() + seconds_to_ns(*timeout);
    // One consumer at a time (the engine's contract); wait for the lock
    // without the GIL so that the other consumer can proceed.
    std::unique_lock<std::mutex> consumer;
    {
      nb::gil_scoped_release release;
      consumer = std::unique_lock<std::mutex>(consumer_mu_);
    }
    PipelinePtr p = engine();
    if (!p) {
      std::exception_ptr failure = this->failure();
      if (failure) std::rethrow_exception(failure);
      return NextStatus::kEnd;
    }
    // Visible to tests (consumer_waiting) so that they can interrupt a
    // consumer that is certainly inside this wait.
    struct Waiting {
      std::atomic<int>& n;
      explicit Waiting(std::atomic<int>& count) : n(count) { ++n; }
      ~Waiting() { --n; }
    } waiting(waiting_);
    for (;;) {
      nanoseconds slice = kSignalCheckInterval;
      if (deadline) {
        auto left = duration_cast<nanoseconds>(*deadline - steady_clock::now());
        slice = std::max(nanoseconds(0), std::min(slice, left));
      }
      try {
        nb::gil_scoped_release release;
        return p->next(out, slice);
      } catch (const Timeout&) {
      }
      if (PyErr_CheckSignals() != 0) {
        // Ctrl-C in the consumer stops the pipeline: nobody is left to read
        // it, and its threads must not outlive the interrupted program. The
        // stop runs in the background so that the interrupt is raised now,
        // even if an op is in the middle of a long call.
        if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) != 0) {
          consumer.unlock();
          nb::python_error interrupt;
          stop(0.0);
          throw interrupt;
        }
        throw nb::python_error();
      }
      if (deadline && steady_clock::now() >= *deadline) {
        throw Timeout("the next item is not available after " +
                      std::to_string(*timeout) + " s");
      }
    }
  }

  // Stops the pipeline; waits at most `timeout` seconds (None: until done).
  // Returns false if the stop was still running when the time ran out.
  bool stop(std::optional<double> timeout) {
    std::shared_ptr<StopState> state;
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_state_) {
        stop_state_ = std::make_shared<StopState>();
        first = true;
      }
      state = stop_state_;
    }
    bool in_pool = ThreadPool::in_any_pool_thread();
    if (first) {
      auto run = [p = engine(), state]() mutable {
        if (p) {
          p->stop();
          state->final_stats = p->stats();
          state->failure = p->failure();
        }
        p.reset();  // may destroy it here, without the GIL: see dispose()
        std::lock_guard<std::mutex> lock(state->mu);
        state->done = true;
        state->cv.notify_all();
      };
      if (!timeout && !in_pool) {
        nb::gil_scoped_release release;
        run();
      } else if (in_pool) {
        std::thread(std::move(run)).detach();  // nobody here may wait for it
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        stopper_ = std::thread(std::move(run));
      }
    }
    if (in_pool) return false;  // never wait on a pool thread
    bool done = true;
    {
      nb::gil_scoped_release release;
      {
        std::unique_lock<std::mutex> lock(state->mu);
        if (!timeout) {
          state->cv.wait(lock, [&] { return state->done; });
        } else {
          done = state->cv.wait_for(lock, seconds_to_ns(*timeout),
                                    [&] { return state->done; });
        }
      }
      // The stopper has done its work and is leaving: join it, so that no
      // thread outlives a stop() that returned.
      if (done) join_stopper();
    }
    if (done) release_engine(*state);
    return done;
  }

  ~NativePipeline() {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopper_.joinable()) stopper_.detach();  // a stop that timed out
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_state_ != nullptr;
  }

  bool consumer_waiting() const { return waiting_.load() > 0; }

  PipelineStats stats_holding_gil() {
    PipelinePtr p = engine();
    if (!p) {
      std::lock_guard<std::mutex> lock(mu_);
      return final_stats_;
    }
    return p->stats();
  }

  PipelineStats stats() {
    PipelinePtr p = engine();
    if (!p) {
      std::lock_guard<std::mutex> lock(mu_);
      return final_stats_;
    }
    nb::gil_scoped_release release;
    return p->stats();
  }

  std::exception_ptr failure() const {
    PipelinePtr p = engine();
    if (p) return p->failure();
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }

  // Once stopped: hands the failure over as a Python feedline.PipelineFailure
  // (None if no stage failed) and forgets it here. The exception's traceback
  // can reach the pipeline again (through an op's module globals); held by
  // Python, that cycle is one the garbage collector can see and break.
  nb::object take_failure() {
    std::exception_ptr failure;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pipeline_) return nb::none();  // still running (or stop timed out)
      failure = std::move(failure_);
      failure_ = nullptr;
    }
    if (!failure) return nb::none();
    return to_python_exception(failure);
  }

 private:
  void join_stopper() {
    std::thread stopper;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopper = std::move(stopper_);
    }
    if (stopper.joinable()) stopper.join();
  }

  // The engine pipeline; null once released after stop().
  PipelinePtr engine() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pipeline_;
  }

  void release_engine(StopState& state) {
    PipelinePtr old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pipeline_) return;
      {
        std::lock_guard<std::mutex> state_lock(state.mu);
        final_stats_ = state.final_stats;
        failure_ = state.failure;
      }
      old = std::move(pipeline_);
    }
    old.reset();  // with the GIL: the stages' Python objects go now
  }

  mutable std::mutex mu_;
  PipelinePtr pipeline_;
  PipelineStats final_stats_;
  std::exception_ptr failure_;
  std::shared_ptr<StopState> stop_state_;
  std::thread stopper_;  // runs a stop that has a timeout
  std::mutex consumer_mu_;
  std::atomic<int> waiting_{0};  // consumers inside wait_next()
};

nb::object EpochIterator::next() {
  if (ended_) throw nb::stop_iteration();
  Item item;
  NextStatus status = owner_->wait_next(&item, timeout_);
  if (status == NextStatus::kItem) return to_python(std::move(item));
  ended_ = true;
  throw nb::stop_iteration();
}

// ---------------------------------------------------------------------------
// The spec builder.

class PipelineSpecBuilder {
 public:
  // The source: a NativeSource, or any Python iterable.
  void set_source(nb::handle source, const std::string& name, bool continuous) {
    check_head_unset();
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
    has_head_ = true;
  }

  void set_merge(std::vector<PipelineSpecBuilder*> inputs,
                 const std::string& name) {
    check_head_unset();
    if (inputs.empty())
      throw InvalidArgument("merge needs at least one input pipeline");
    for (PipelineSpecBuilder* input : inputs) {
      if (!input->has_head_)
        throw InvalidArgument("a merged pipeline has no source");
      if (input->spec_.sink_capacity)
        throw InvalidArgument("a merged pipeline must not have a sink");
      spec_.merge_inputs.push_back(input->spec_);
    }
    spec_.merge_name = name;
    has_head_ = true;
  }

  void add_map(nb::object fn, const std::string& name, int concurrency,
               bool input_order, nb::handle budget) {
    add_stage(StageKind::kPipe, make_python_map_op(std::move(fn)), name,
              concurrency, input_order, budget);
  }

  void add_generator(nb::object fn, const std::string& name, int concurrency,
                     bool input_order, nb::handle budget) {
    add_stage(StageKind::kPipe, make_python_generator_op(std::move(fn)), name,
              concurrency, input_order, budget);
  }

  void add_async(nb::object submit, const std::string& name, int concurrency,
                 bool input_order, nb::handle budget) {
    add_stage(StageKind::kPipe, make_python_async_op(std::move(submit)), name,
              concurrency, input_order, budget);
  }

  void add_native(const NativeOp& op, const std::string& name, int concurrency,
                  bool input_order, nb::handle budget) {
    add_stage(StageKind::kPipe, adapt_native_op(op.op, op.input, op.output),
              name, concurrency, input_order, budget);
  }

  void add_aggregate(std::size_t n, bool drop_last, const std::string& name) {
    add_stage(StageKind::kAggregate, make_aggregate_op(n, drop_last), name, 1,
              false, nb::none());
  }

  void add_aggregator(nb::object aggregator, bool drop_last,
                      const std::string& name, nb::handle budget) {
    add_stage(StageKind::kAggregate,
              make_python_aggregator_op(std::move(aggregator), drop_last), name,
              1, false, budget);
  }

  void add_disaggregate(const std::string& name) {
    add_stage(StageKind::kDisaggregate, make_disaggregate_any_op(), name, 1,
              false, nb::none());
  }

  void set_sink(std::size_t capacity) {
    if (capacity < 1)
      throw InvalidArgument("the sink's buffer_size must be >= 1 (got 0)");
    spec_.sink_capacity = capacity;
  }

  std::shared_ptr<NativePipeline> build(
      int num_threads, nb::handle max_failures, double report_interval,
      nb::object stats_callback, int failure_log_burst,
      double failure_log_interval, const std::string& name) {
    BuildOptions options;
    options.num_threads = num_threads;
    if (auto budget = to_budget(max_failures)) options.max_failures = *budget;
    options.name = name;
    options.failure_log_burst = failure_log_burst;
    options.failure_log_interval = seconds_to_ns(failure_log_interval);
    if (!stats_callback.is_none()) {
      auto callback =
          std::make_shared<PyObj>(PyObj::steal(stats_callback.release().ptr()));
      options.stats_hook = [callback](const PipelineStats& stats) {
        try {
          GilScope gil;
          PyObject* r =
              PyObject_CallOneArg(callback->get(), nb::cast(stats).ptr());
          if (r == nullptr) {
            std::string what = "pipeline stats callback failed";
            try {
              throw_python_error();
            } catch (const std::exception& e) {
              what += ": " + std::string(e.what());
            }
            log(LogLevel::kWarning, what);
          }
          Py_XDECREF(r);
        } catch (const std::exception& e) {
          log(LogLevel::kWarning,
              std::string("pipeline stats callback failed: ") + e.what());
        }
      };
      if (report_interval > 0)
        options.report_interval = seconds_to_ns(report_interval);
    }
    Pipeline p = build_pipeline(spec_, std::move(options));
    return std::make_shared<NativePipeline>(std::move(p));
  }

 private:
  void check_head_unset() const {
    if (has_head_) throw InvalidArgument("the pipeline already has a source");
  }

  void add_stage(StageKind kind, OpPtr op, const std::string& name,
                 int concurrency, bool input_order, nb::handle budget) {
    if (!has_head_)
      throw InvalidArgument("add a source before stage '" + name + "'");
    StageSpec stage;
    stage.kind = kind;
    stage.op = std::move(op);
    stage.options.name = name;
    stage.options.concurrency = concurrency;
    stage.options.output_order =
        input_order ? OutputOrder::kInput : OutputOrder::kCompletion;
    stage.options.max_failures = to_budget(budget);
    spec_.stages.push_back(std::move(stage));
  }

  PipelineSpec spec_;
  bool has_head_ = false;
};

// The log sink that forwards engine messages to a Python callable
// handler(level: int, message: str); None restores stderr.
void set_log_handler(nb::object handler) {
  if (handler.is_none()) {
    set_log_sink({});
    return;
  }
  auto shared = std::make_shared<PyObj>(PyObj::steal(handler.release().ptr()));
  set_log_sink([shared](LogLevel level, std::string_view message) {
    if (interpreter_finalizing()) return;
    try {
      GilScope gil;
      nb::object text = nb::str(message.data(), message.size());
      PyObject* r = PyObject_CallFunction(shared->get(), "iO",
                                          static_cast<int>(level), text.ptr());
      if (r == nullptr) PyErr_Clear();
      Py_XDECREF(r);
    } catch (...) {
      // Logging must never fail the caller.
    }
  });
}

void set_log_level_int(int level) {
  set_log_level(static_cast<LogLevel>(level));
}

}  // namespace

void bind_native_op(nb::module_& m) {
  nb::class_<NativeOp>(
      m, "NativeOp",
      "A pipeline op implemented in C++. Pass it to PipelineBuilder.pipe(): "
      "it\n"
      "runs without the GIL and passes native items on without converting\n"
      "them to Python objects.")
      .def_ro("name", &NativeOp::name)
      .def_prop_ro("kind",
                   [](const NativeOp& op) {
                     switch (op.op->kind()) {
                       case OpKind::kMap:
                         return "map";
                       case OpKind::kGenerator:
                         return "generator";
                       case OpKind::kAsync:
                         return "async";
                     }
                     return "map";
                   })
      .def_prop_ro(
          "input_type",
          [](const NativeOp& op) -> std::optional<std::string> {
            if (op.input == nullptr) return std::nullopt;
            return python_type_name(*op.input);
          },
          "Name of the native type the op takes; None: any item.")
      .def_prop_ro(
          "output_type",
          [](const NativeOp& op) -> std::optional<std::string> {
            if (op.output == nullptr) return std::nullopt;
            return python_type_name(*op.output);
          },
          "Name of the native type the op produces; None: what it was given.")
      .def("__repr__", [](const NativeOp& op) {
        std::string in = op.input ? python_type_name(*op.input) : "any";
        std::string out = op.output ? python_type_name(*op.output) : in;
        return "NativeOp(" + op.name + ": " + in + " -> " + out + ")";
      });
  nb::class_<NativeSource>(
      m, "NativeSource",
      "A pipeline source implemented in C++; pass it to add_source().")
      .def_ro("name", &NativeSource::name)
      .def("__repr__", [](const NativeSource& s) {
        return "NativeSource(" + s.name + ")";
      });
}

void bind_pipeline(nb::module_& m) {
  bind_completion(m);

  nb::class_<EpochIterator>(m, "_EpochIterator")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &EpochIterator::next);

  nb::class_<NativePipeline>(m, "_NativePipeline")
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
      .def("_stats_holding_gil", &NativePipeline::stats_holding_gil,
           "stats() without releasing the GIL: lets a test hold the GIL "
           "while it watches native stages progress.")
      .def("take_failure", &NativePipeline::take_failure);

  nb::class_<PipelineSpecBuilder>(m, "_PipelineSpec")
      .def(nb::init<>())
      .def("set_source", &PipelineSpecBuilder::set_source, nb::arg("source"),
           nb::arg("name"), nb::arg("continuous"))
      .def("set_merge", &PipelineSpecBuilder::set_merge, nb::arg("inputs"),
           nb::arg("name"))
      .def("add_map", &PipelineSpecBuilder::add_map, nb::arg("fn"),
           nb::arg("name"), nb::arg("concurrency"), nb::arg("input_order"),
           nb::arg("budget").none())
      .def("add_generator", &PipelineSpecBuilder::add_generator, nb::arg("fn"),
           nb::arg("name"), nb::arg("concurrency"), nb::arg("input_order"),
           nb::arg("budget").none())
      .def("add_async", &PipelineSpecBuilder::add_async, nb::arg("fn"),
           nb::arg("name"), nb::arg("concurrency"), nb::arg("input_order"),
           nb::arg("budget").none())
      .def("add_native", &PipelineSpecBuilder::add_native, nb::arg("op"),
           nb::arg("name"), nb::arg("concurrency"), nb::arg("input_order"),
           nb::arg("budget").none())
      .def("add_aggregate", &PipelineSpecBuilder::add_aggregate)
      .def("add_aggregator", &PipelineSpecBuilder::add_aggregator,
           nb::arg("aggregator"), nb::arg("drop_last"), nb::arg("name"),
           nb::arg("budget").none())
      .def("add_disaggregate", &PipelineSpecBuilder::add_disaggregate)
      .def("set_sink", &PipelineSpecBuilder::set_sink)
      .def("build", &PipelineSpecBuilder::build, nb::arg("num_threads"),
           nb::arg("max_failures").none(), nb::arg("report_interval"),
           nb::arg("stats_callback").none(), nb::arg("failure_log_burst"),
           nb::arg("failure_log_interval"), nb::arg("name"));

  m.def("_set_log_handler", &set_log_handler, nb::arg("handler").none(),
        "Routes engine log messages to handler(level, message); None: stderr.");
  m.def("_set_log_level", &set_log_level_int, nb::arg("level"));
  m.def(
      "_drain_released", [] { drain_released(); },
      "Releases Python references dropped by native threads.");
  m.def(
      "_live_pool_threads", [] { return ThreadPool::live_threads(); },
      "Worker threads of all pipelines alive in the process.");
}

}  // namespace feedline::bindings
