// SPDX-License-Identifier: Apache-2.0

#include "py_ops.h"

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/ops/adapt.h"
#include "feedline/ops/shared_completion.h"
#include "feedline/pipeline/stats.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// The reference `obj` holds, as a PyObj.
PyObj own(nb::object obj) { return PyObj::steal(obj.release().ptr()); }

// `obj` shared by the copies of a callback.
std::shared_ptr<PyObj> shared(nb::object obj) {
  return std::make_shared<PyObj>(own(std::move(obj)));
}

// A result as an Item: None is the empty Item (skip).
Item result_item(nb::object r) {
  if (r.is_none()) return Item();
  return Item(own(std::move(r)));
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

// A Python callable as an op of interface Base, producing Python values.
template <typename Base>
class PyOp : public Base {
 public:
  explicit PyOp(nb::object fn) : fn_(own(std::move(fn))) {}
  const std::type_info* output_type() const override { return &typeid(PyObj); }

 protected:
  // fn_(input), or fn_.<method>(input). Requires: the GIL.
  nb::object call_fn(Item input, const char* method = nullptr) {
    nb::object arg = to_python(std::move(input));
    if (method != nullptr) return nb::handle(fn_.get()).attr(method)(arg);
    PyObject* r = PyObject_CallOneArg(fn_.get(), arg.ptr());
    if (r == nullptr) throw_python_error();  // as a PythonError
    return nb::steal(r);
  }

  PyObj fn_;
};

class PyMapOp final : public PyOp<MapOp> {
 public:
  using PyOp::PyOp;
  Item call(Item input) override {
    GilScope gil;
    return python_call([&] { return result_item(call_fn(std::move(input))); });
  }
};

// Pulls a Python iterator under the GIL: as an ItemGenerator None results
// skip; as an ItemSource None is an item, as in SPDL.
template <typename Base>
class PyIter final : public Base {
 public:
  explicit PyIter(PyObj it) : it_(std::move(it)) {}
  bool next(Item* out) override {
    GilScope gil;
    PyObject* r = PyIter_Next(it_.get());
    if (r == nullptr && PyErr_Occurred() != nullptr) throw_python_error();
    if (r == nullptr) return false;
    *out = std::is_same_v<Base, ItemSource> ? Item(PyObj::steal(r))
                                            : result_item(nb::steal(r));
    return true;
  }

 private:
  PyObj it_;
};

// iter(obj) as an ItemGenerator or ItemSource. Requires: the GIL.
template <typename Base = ItemGenerator>
std::unique_ptr<Base> iterate(PyObject* obj) {
  PyObject* it = PyObject_GetIter(obj);
  if (it == nullptr) throw_python_error();
  return std::make_unique<PyIter<Base>>(PyObj::steal(it));
}

class PyGeneratorOp final : public PyOp<GeneratorOp> {
 public:
  using PyOp::PyOp;
  std::unique_ptr<ItemGenerator> start(Item input) override {
    GilScope gil;
    return python_call(
        [&] { return iterate(call_fn(std::move(input)).ptr()); });
  }
};

// The Completion of one async call, as a Python object.
class PyCompletion {
 public:
  explicit PyCompletion(Completion&& done) : done_(std::move(done)) {}
  // A completion dropped unfinished reports a failure to the engine; do it
  // without the GIL, like every call into the engine.
  ~PyCompletion() {
    if (!done_.pending()) return;
    std::optional<ReleaseGil> release;
    if (holds_gil()) release.emplace();
    Completion dropped = done_.take();
  }

  bool pending() const { return done_.pending(); }
  bool stop_requested() const { return done_.stop_requested(); }

  void emit(nb::handle result) {
    Item item;
    if (!result.is_none()) item = Item(PyObj::borrow(result.ptr()));
    Completion done = done_.take();
    ReleaseGil release;
    done.emit(std::move(item));
  }

  void fail(nb::handle exc) {
    if (!PyExceptionInstance_Check(exc.ptr())) {
      throw nb::type_error("Completion.fail() takes an exception instance");
    }
    fail_with(std::make_exception_ptr(python_error_from(exc)));
  }

  void fail_with(std::exception_ptr error) {
    Completion done = done_.take();
    ReleaseGil release;
    done.fail(std::move(error));
  }

 private:
  // Without a GIL (free-threaded builds) two threads could race to finish
  // the same call; the first take() wins.
  ops::SharedCompletion done_;
};

// fn_ is the submit function.
class PyAsyncOp final : public PyOp<AsyncOp> {
 public:
  using PyOp::PyOp;
  void start(Item input, Completion&& done) override {
    GilScope gil;
    nb::object arg = python_call([&] { return to_python(std::move(input)); });
    auto* handle = new PyCompletion(std::move(done));
    nb::object completion = nb::cast(handle, nb::rv_policy::take_ownership);
    PyObject* r = PyObject_CallFunctionObjArgs(fn_.get(), arg.ptr(),
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
};

// fn_ is the aggregator object.
class PyAggregatorOp final : public PyOp<MapOp> {
 public:
  PyAggregatorOp(nb::object aggregator, bool drop_last)
      : PyOp(std::move(aggregator)), drop_last_(drop_last) {}
  bool stateful() const override { return true; }
  Item call(Item input) override {
    GilScope gil;
    return python_call(
        [&] { return result_item(call_fn(std::move(input), "accumulate")); });
  }
  Item flush(FlushReason /*reason*/) override {
    GilScope gil;
    return python_call([&] {
      nb::object r = nb::handle(fn_.get()).attr("flush")();
      return drop_last_ ? Item() : result_item(std::move(r));
    });
  }

 private:
  const bool drop_last_;
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
  return make_disaggregate_op([](Item input) -> std::unique_ptr<ItemGenerator> {
    if (!input.holds<PyObj>()) {
      throw InvalidArgument(
          "disaggregate takes a batch (a list or other iterable), got native " +
          type_name(input.type()));
    }
    GilScope gil;
    PyObj obj = input.take_as<PyObj>();
    return python_call([&] { return iterate(obj.get()); });
  });
}

OpPtr adapt_native_op(const NativeOp& op) {
  static const ops::Foreign kPython{
      &typeid(PyObj), &can_convert_from_python,
      [](const std::function<void()>& f) {
        GilScope gil;
        python_call(f);
      },
      [](Item& item, const std::type_info& wanted, const ops::Field* field) {
        item = value_from_python(to_python(std::move(item)), wanted, field);
      }};
  return ops::take_foreign(op.op, kPython, op.element, op.name);
}

SourceFactory make_python_source(nb::object iterable) {
  return [obj = shared(std::move(iterable))] {
    GilScope gil;
    return iterate<ItemSource>(obj->get());
  };
}

StatsHook make_python_stats_hook(nb::object callback) {
  return [fn = shared(std::move(callback))](const PipelineStats& stats) {
    try {
      GilScope gil;
      try {
        nb::handle(fn->get())(stats);
      } catch (nb::python_error& e) {
        // Ctrl-C reached the main thread while it ran the callback (stop()
        // reports the final statistics there): the user's interrupt, not the
        // callback's failure. It is raised again at the thread's next check.
        if (e.matches(PyExc_KeyboardInterrupt) && on_main_thread()) {
          PyErr_SetInterrupt();
          return;
        }
        e.restore();
        throw_python_error();
      }
    } catch (const std::exception& e) {
      log(LogLevel::kWarning,
          std::string("pipeline stats callback failed: ") + e.what());
    }
  };
}

LogSink make_python_log_sink(nb::object handler) {
  return [fn = shared(std::move(handler))](LogLevel level,
                                           std::string_view message) {
    if (interpreter_finalizing()) return;
    try {
      GilScope gil;
      nb::object text = nb::str(message.data(), message.size());
      PyObject* r = PyObject_CallFunction(fn->get(), "iO",
                                          static_cast<int>(level), text.ptr());
      if (r == nullptr) PyErr_Clear();
      Py_XDECREF(r);
    } catch (const std::exception&) {
      // Logging must never fail the caller (a thread ending still unwinds).
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
