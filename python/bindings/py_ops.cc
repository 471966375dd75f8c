// SPDX-License-Identifier: Apache-2.0

#include "py_ops.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>

#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/pipeline/stats.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// Calls `fn(arg)`; returns a new reference. Throws: PythonError.
PyObject* call1(PyObject* fn, PyObject* arg) {
  PyObject* r = PyObject_CallOneArg(fn, arg);
  if (r == nullptr) throw_python_error();
  return r;
}

// A result as an Item: None is the empty Item (skip).
Item result_item(PyObject* r) {
  if (r == Py_None) {
    Py_DECREF(r);
    return Item();
  }
  return Item(PyObj::steal(r));
}

// Runs `f`, which calls Python, and turns a nanobind python_error into a
// PythonError: no nanobind exception, whose what() and destructor take the
// GIL, may reach the engine (which formats and drops errors under its locks).
// Requires: the GIL.
template <typename F>
decltype(auto) python_call(F&& f) {
  try {
    return f();
  } catch (nb::python_error& e) {
    e.restore();
  }
  throw_python_error();
}

class PyMapOp final : public MapOp {
 public:
  explicit PyMapOp(nb::object fn) : fn_(PyObj::steal(fn.release().ptr())) {}
  const std::type_info* output_type() const override { return &typeid(PyObj); }
  Item call(Item input) override {
    GilScope gil;
    return python_call([&] {
      nb::object arg = to_python(std::move(input));
      return result_item(call1(fn_.get(), arg.ptr()));
    });
  }

 private:
  PyObj fn_;
};

// Returns the next value of iterator `it` (a new reference), or null at its
// end. Throws: PythonError. Requires: the GIL.
PyObject* next_value(PyObject* it) {
  PyObject* r = PyIter_Next(it);
  if (r == nullptr && PyErr_Occurred() != nullptr) throw_python_error();
  return r;
}

// Pulls a Python iterator; None results skip.
class PyIterGenerator final : public ItemGenerator {
 public:
  explicit PyIterGenerator(PyObj it) : it_(std::move(it)) {}
  bool next(Item* out) override {
    GilScope gil;
    return python_call([&] {
      PyObject* r = next_value(it_.get());
      if (r == nullptr) return false;
      *out = result_item(r);
      return true;
    });
  }

 private:
  PyObj it_;
};

// iter(obj) as a generator. Requires: the GIL.
std::unique_ptr<ItemGenerator> iterate(PyObject* obj) {
  PyObject* it = PyObject_GetIter(obj);
  if (it == nullptr) throw_python_error();
  return std::make_unique<PyIterGenerator>(PyObj::steal(it));
}

class PyGeneratorOp final : public GeneratorOp {
 public:
  explicit PyGeneratorOp(nb::object fn)
      : fn_(PyObj::steal(fn.release().ptr())) {}
  const std::type_info* output_type() const override { return &typeid(PyObj); }
  std::unique_ptr<ItemGenerator> start(Item input) override {
    GilScope gil;
    return python_call([&] {
      nb::object arg = to_python(std::move(input));
      nb::object gen = nb::steal(call1(fn_.get(), arg.ptr()));
      return iterate(gen.ptr());
    });
  }

 private:
  PyObj fn_;
};

// The Completion of one async call, as a Python object.
class PyCompletion {
 public:
  explicit PyCompletion(Completion&& done) : done_(std::move(done)) {}
  PyCompletion(PyCompletion&& other) noexcept : done_(std::move(other.done_)) {
    other.done_.reset();
  }
  // A completion dropped unfinished reports a failure to the engine; do it
  // without the GIL, like every call into the engine.
  ~PyCompletion() {
    if (!done_) return;
    if (holds_gil()) {
      nb::gil_scoped_release release;
      done_.reset();
    } else {
      done_.reset();
    }
  }

  bool pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_.has_value();
  }
  bool stop_requested() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_.has_value() && done_->stop_token().stop_requested();
  }

  void emit(nb::handle result) {
    Item item;
    if (!result.is_none()) item = Item(PyObj::borrow(result.ptr()));
    Completion done = take();
    nb::gil_scoped_release release;
    done.emit(std::move(item));
  }

  void fail(nb::handle exc) {
    if (!PyExceptionInstance_Check(exc.ptr())) {
      throw nb::type_error("Completion.fail() takes an exception instance");
    }
    fail_with(std::make_exception_ptr(python_error_from(exc)));
  }

  void fail_with(std::exception_ptr error) {
    Completion done = take();
    nb::gil_scoped_release release;
    done.fail(std::move(error));
  }

 private:
  Completion take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) throw InvalidArgument("this completion was already finished");
    Completion done = std::move(*done_);
    done_.reset();
    return done;
  }

  // Guards done_: without a GIL (free-threaded builds) two threads could
  // race to finish the same call.
  std::mutex mu_;
  std::optional<Completion> done_;
};

class PyAsyncOp final : public AsyncOp {
 public:
  explicit PyAsyncOp(nb::object submit)
      : submit_(PyObj::steal(submit.release().ptr())) {}
  const std::type_info* output_type() const override { return &typeid(PyObj); }
  void start(Item input, Completion&& done) override {
    GilScope gil;
    nb::object arg = python_call([&] { return to_python(std::move(input)); });
    nb::object completion = nb::cast(PyCompletion(std::move(done)));
    PyCompletion* handle = nb::inst_ptr<PyCompletion>(completion);
    PyObject* r = PyObject_CallFunctionObjArgs(submit_.get(), arg.ptr(),
                                               completion.ptr(), nullptr);
    if (r != nullptr) {
      Py_DECREF(r);
      return;
    }
    // The submit function failed. If it did not finish the completion, fail
    // the call now rather than when the completion is garbage-collected; if
    // it did, the call has its outcome and the late error is dropped.
    std::exception_ptr error;
    try {
      throw_python_error();
    } catch (...) {
      error = std::current_exception();
    }
    if (handle->pending()) handle->fail_with(std::move(error));
  }

 private:
  PyObj submit_;
};

class PyAggregatorOp final : public MapOp {
 public:
  PyAggregatorOp(nb::object aggregator, bool drop_last)
      : aggregator_(PyObj::steal(aggregator.release().ptr())),
        drop_last_(drop_last) {}
  bool stateful() const override { return true; }
  const std::type_info* output_type() const override { return &typeid(PyObj); }
  Item call(Item input) override {
    GilScope gil;
    return python_call([&] {
      nb::object arg = to_python(std::move(input));
      nb::object r = nb::handle(aggregator_.get()).attr("accumulate")(arg);
      return result_item(r.release().ptr());
    });
  }
  Item flush(FlushReason /*reason*/) override {
    GilScope gil;
    return python_call([&] {
      nb::object r = nb::handle(aggregator_.get()).attr("flush")();
      if (drop_last_) return Item();
      return result_item(r.release().ptr());
    });
  }

 private:
  PyObj aggregator_;
  const bool drop_last_;
};

// The native disaggregate for native batches; Python iterables otherwise.
class DisaggregateAnyOp final : public GeneratorOp {
 public:
  std::unique_ptr<ItemGenerator> start(Item input) override {
    if (input.holds<ItemBatch>()) return native_.start(std::move(input));
    if (input.holds<PyObj>()) {
      GilScope gil;
      PyObj obj = input.take_as<PyObj>();
      return python_call([&] { return iterate(obj.get()); });
    }
    throw InvalidArgument(
        "disaggregate takes a batch (a list or other iterable), got native " +
        python_type_name(input.type()));
  }

 private:
  const OpPtr native_op_ = make_disaggregate_op();
  GeneratorOp& native_ = static_cast<GeneratorOp&>(*native_op_);
};

// Converts a Python value to the native type the wrapped op takes.
void convert_input(Item& input, const std::type_info& wanted) {
  if (!input.holds<PyObj>()) return;
  GilScope gil;
  PyObj obj = input.take_as<PyObj>();
  input = python_call([&] { return from_python(obj.get(), wanted); });
}

// What a converting adapter declares: the native types of the op it wraps,
// and that it also accepts Python values when they convert to its input.
struct Declared {
  const std::type_info* input;
  const std::type_info* output;
  bool accepts(const std::type_info& type) const {
    return input == nullptr || *input == type ||
           (type == typeid(PyObj) && can_convert_from_python(*input));
  }
};

class ConvertingMapOp final : public MapOp {
 public:
  ConvertingMapOp(OpPtr op, Declared types)
      : op_(std::move(op)), inner_(static_cast<MapOp&>(*op_)), types_(types) {}
  bool stateful() const override { return op_->stateful(); }
  Item flush(FlushReason reason) override { return op_->flush(reason); }
  const std::type_info* input_type() const override { return types_.input; }
  const std::type_info* output_type() const override { return types_.output; }
  bool accepts(const std::type_info& type) const override {
    return types_.accepts(type);
  }
  Item call(Item input) override {
    if (types_.input != nullptr) convert_input(input, *types_.input);
    return inner_.call(std::move(input));
  }

 private:
  OpPtr op_;
  MapOp& inner_;
  const Declared types_;
};

class ConvertingGeneratorOp final : public GeneratorOp {
 public:
  ConvertingGeneratorOp(OpPtr op, Declared types)
      : op_(std::move(op)),
        inner_(static_cast<GeneratorOp&>(*op_)),
        types_(types) {}
  const std::type_info* input_type() const override { return types_.input; }
  const std::type_info* output_type() const override { return types_.output; }
  bool accepts(const std::type_info& type) const override {
    return types_.accepts(type);
  }
  std::unique_ptr<ItemGenerator> start(Item input) override {
    if (types_.input != nullptr) convert_input(input, *types_.input);
    return inner_.start(std::move(input));
  }

 private:
  OpPtr op_;
  GeneratorOp& inner_;
  const Declared types_;
};

class ConvertingAsyncOp final : public AsyncOp {
 public:
  ConvertingAsyncOp(OpPtr op, Declared types)
      : op_(std::move(op)),
        inner_(static_cast<AsyncOp&>(*op_)),
        types_(types) {}
  const std::type_info* input_type() const override { return types_.input; }
  const std::type_info* output_type() const override { return types_.output; }
  bool accepts(const std::type_info& type) const override {
    return types_.accepts(type);
  }
  void start(Item input, Completion&& done) override {
    if (types_.input != nullptr) convert_input(input, *types_.input);
    inner_.start(std::move(input), std::move(done));
  }

 private:
  OpPtr op_;
  AsyncOp& inner_;
  const Declared types_;
};

class PyIterSource final : public ItemSource {
 public:
  explicit PyIterSource(PyObj it) : it_(std::move(it)) {}
  bool next(Item* out) override {
    GilScope gil;
    PyObject* r = next_value(it_.get());
    if (r == nullptr) return false;
    *out = Item(PyObj::steal(r));  // None is an item here, as in SPDL
    return true;
  }

 private:
  PyObj it_;
};

}  // namespace

OpPtr make_python_map_op(nb::object fn) {
  return std::make_shared<PyMapOp>(std::move(fn));
}

OpPtr make_python_generator_op(nb::object fn) {
  return std::make_shared<PyGeneratorOp>(std::move(fn));
}

OpPtr make_python_async_op(nb::object submit) {
  return std::make_shared<PyAsyncOp>(std::move(submit));
}

OpPtr make_python_aggregator_op(nb::object aggregator, bool drop_last) {
  return std::make_shared<PyAggregatorOp>(std::move(aggregator), drop_last);
}

OpPtr make_disaggregate_any_op() {
  return std::make_shared<DisaggregateAnyOp>();
}

OpPtr adapt_native_op(OpPtr op, const std::type_info* input,
                      const std::type_info* output) {
  Declared types{input != nullptr ? input : op->input_type(),
                 output != nullptr ? output : op->output_type()};
  if (types.input == nullptr && types.output == nullptr) return op;
  if (types.input != nullptr && *types.input == typeid(PyObj)) {
    types.input = nullptr;  // takes any item as it is
  }
  switch (op->kind()) {
    case OpKind::kMap:
      return std::make_shared<ConvertingMapOp>(std::move(op), types);
    case OpKind::kGenerator:
      return std::make_shared<ConvertingGeneratorOp>(std::move(op), types);
    case OpKind::kAsync:
      return std::make_shared<ConvertingAsyncOp>(std::move(op), types);
  }
  return op;
}

SourceFactory make_python_source(nb::object iterable) {
  auto shared = std::make_shared<PyObj>(PyObj::steal(iterable.release().ptr()));
  return [shared]() -> std::unique_ptr<ItemSource> {
    GilScope gil;
    PyObject* it = PyObject_GetIter(shared->get());
    if (it == nullptr) throw_python_error();
    return std::make_unique<PyIterSource>(PyObj::steal(it));
  };
}

StatsHook make_python_stats_hook(nb::object callback) {
  auto shared = std::make_shared<PyObj>(PyObj::steal(callback.release().ptr()));
  return [shared](const PipelineStats& stats) {
    try {
      GilScope gil;
      PyObject* r = PyObject_CallOneArg(shared->get(), nb::cast(stats).ptr());
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
}

LogSink make_python_log_sink(nb::object handler) {
  auto shared = std::make_shared<PyObj>(PyObj::steal(handler.release().ptr()));
  return [shared](LogLevel level, std::string_view message) {
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
  };
}

void bind_completion(nb::module_& m) {
  nb::class_<PyCompletion>(
      m, "_Completion", "Finishes one asynchronous call of a pipeline stage.")
      .def("emit", &PyCompletion::emit, nb::arg("result").none(),
           "Delivers the call's result (None skips the item).")
      .def("fail", &PyCompletion::fail, nb::arg("exception"),
           "Reports the call as failed with `exception`.")
      .def_prop_ro("pending", &PyCompletion::pending,
                   "True until emit() or fail() is called.")
      .def_prop_ro(
          "stop_requested", &PyCompletion::stop_requested,
          "True once the pipeline is stopping; long work may give up.");
}

}  // namespace feedline::bindings
