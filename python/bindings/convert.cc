// SPDX-License-Identifier: Apache-2.0

#include "convert.h"

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "feedline/base/log.h"
#include "feedline/ops/adapt.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

struct Registry {
  std::unordered_map<std::type_index, ToPythonFn> to_python;
  std::unordered_map<std::type_index, FromPythonFn> from_python;
  nb::handle samples;  // feedline/_samples.py, imported once (and kept)
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: used until process exit
  return *r;
}

nb::object make_exception(const char* feedline_class,
                          const std::string& message) {
  nb::object cls =
      nb::module_::import_("feedline._feedline_ext").attr(feedline_class);
  return cls(message);
}

// Function `name` of module `module` (feedline._errors).
nb::object helper(const char* module, const char* name) {
  return nb::module_::import_(module).attr(name);
}

// "Type: message (at file.py:12 in fn)" for `exc` (feedline/_errors.py); its
// type's name alone if that fails. Requires: the GIL.
std::string describe_python_exception(nb::handle exc) {
  try {
    return nb::cast<std::string>(helper("feedline._errors", "_describe")(exc));
  } catch (const std::exception&) {
    PyErr_Clear();
    return Py_TYPE(exc.ptr())->tp_name;
  }
}

// Item converters of the basic types.
nb::object batch_to_python(Item& item) {
  ItemBatch& batch = item.as<ItemBatch>();
  nb::object list =
      nb::steal(PyList_New(static_cast<Py_ssize_t>(batch.size())));
  if (!list.is_valid()) throw nb::python_error();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    PyList_SET_ITEM(list.ptr(), static_cast<Py_ssize_t>(i),
                    to_python(std::move(batch[i])).release().ptr());
  }
  return list;
}

// Samples (feedline/ops/samples.h), given back in their record's shape.
nb::object key_of(const ops::Field& f) {
  return std::visit([](const auto& v) { return nb::cast(v); }, f);
}
nb::handle record_of(const ops::Record& r) { return r->as<PyObj>().get(); }
nb::object sample_to_python(Item& item) {
  auto& s = item.as<ops::Sample>();
  return registry().samples.attr("with_field")(
      record_of(s.record), key_of(s.field), to_python(std::move(s.payload)));
}
nb::object samples_to_python(Item& item) {
  auto& b = item.as<ops::SampleBatch>();
  nb::list records;
  for (const ops::Record& r : b.records) records.append(record_of(r));
  return registry().samples.attr("columns")(records, key_of(b.field),
                                            to_python(std::move(b.batch)));
}

Item int_from_python(nb::handle obj) {
  if (!PyLong_Check(obj.ptr()) || PyBool_Check(obj.ptr())) {
    throw InvalidArgument("expected an int");
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  if (overflow != 0) throw InvalidArgument("int does not fit in 64 bits");
  if (v == -1 && PyErr_Occurred()) throw_python_error();
  return Item(static_cast<int64_t>(v));
}
Item float_from_python(nb::handle obj) {
  if (!PyFloat_Check(obj.ptr()) && !PyLong_Check(obj.ptr())) {
    throw InvalidArgument("expected a float");
  }
  double v = PyFloat_AsDouble(obj.ptr());
  if (v == -1.0 && PyErr_Occurred()) throw_python_error();
  return Item(v);
}
Item bool_from_python(nb::handle obj) {
  if (!PyBool_Check(obj.ptr())) throw InvalidArgument("expected a bool");
  return Item(obj.ptr() == Py_True);
}
Item str_from_python(nb::handle obj) {
  // Paths are strings to native ops: str and os.PathLike both work.
  std::optional<std::string> text = path_from(obj);
  if (!text) throw InvalidArgument("expected a str or os.PathLike");
  return Item(std::move(*text));
}

}  // namespace

std::chrono::nanoseconds seconds_to_ns(double seconds) {
  if (!(seconds >= 0)) {
    throw InvalidArgument("timeout must be >= 0 (got " +
                          std::to_string(seconds) + ")");
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(std::min(seconds, 1e9)));
}

[[noreturn]] void throw_python_error() {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  if (type == nullptr)
    throw Internal("throw_python_error() without a Python error");
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != nullptr) {
    PyException_SetTraceback(value, tb);
    Py_DECREF(tb);
  }
  Py_DECREF(type);
  PyObj exc = PyObj::steal(value);
  throw python_error_from(exc.get());
}

PythonError python_error_from(nb::handle exc) {
  return PythonError(PyObj::borrow(exc.ptr()), describe_python_exception(exc));
}

void release_python_objects(const std::exception_ptr& error) {
  for_each_cause(error, [](const std::exception_ptr& cause) {
    try {
      std::rethrow_exception(cause);
    } catch (const PythonError& e) {
      e.release_exception();
    } catch (...) {
    }
  });
}

nb::object to_python_exception(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PythonError& e) {
    if (e.exception() == nullptr) return make_exception("Error", e.what());
    return nb::borrow(e.exception());
  } catch (const PipelineFailure& e) {
    // Python (feedline/_errors.py) builds the exception from each failed
    // stage's name and exception.
    nb::list stages;
    for (const StageError& stage : e.errors())
      stages.append(
          nb::make_tuple(stage.stage, to_python_exception(stage.error)));
    return helper("feedline._errors", "_pipeline_failure")(e.what(), stages);
  } catch (const TooManyFailures& e) {
    nb::object cause =
        e.last_error() ? to_python_exception(e.last_error()) : nb::none();
    return helper("feedline._errors", "_too_many_failures")(e.what(), cause);
  } catch (const Error& e) {
    return make_exception(error_class(e), e.what());
  } catch (const InvalidArgument& e) {
    return nb::handle(PyExc_ValueError)(e.what());
  } catch (const OutOfRange& e) {
    return nb::handle(PyExc_IndexError)(e.what());
  } catch (const std::bad_alloc&) {
    return nb::handle(PyExc_MemoryError)("out of memory");
  } catch (const std::exception& e) {
    return nb::handle(PyExc_RuntimeError)(e.what());
  } catch (...) {
    return nb::handle(PyExc_RuntimeError)("unknown C++ exception");
  }
}

void set_python_error(const std::exception_ptr& error) {
  try {
    nb::object exc = to_python_exception(error);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

void register_type(const std::type_info& type, const char* name, ToPythonFn to,
                   FromPythonFn from) {
  if (to != nullptr) registry().to_python[std::type_index(type)] = to;
  if (from != nullptr) registry().from_python[std::type_index(type)] = from;
  register_type_name(type, name);
}

bool can_convert_from_python(const std::type_info& type) {
  return type == typeid(PyObj) ||
         registry().from_python.count(std::type_index(type)) > 0;
}

nb::object to_python(Item&& item) {
  if (PyObj* obj = item.get_if<PyObj>()) {
    return nb::steal(obj->release());
  }
  if (!item.has_value()) return nb::none();
  conversion_counts().to_python.fetch_add(1, std::memory_order_relaxed);
  auto it = registry().to_python.find(std::type_index(item.type()));
  if (it == registry().to_python.end()) {
    throw InvalidArgument("no conversion of native " + type_name(item.type()) +
                          " items to Python");
  }
  nb::object result = it->second(item);
  item.reset();
  return result;
}

Item from_python(nb::handle obj, const std::type_info& wanted) {
  if (wanted == typeid(PyObj)) return Item(PyObj::borrow(obj.ptr()));
  conversion_counts().from_python.fetch_add(1, std::memory_order_relaxed);
  auto it = registry().from_python.find(std::type_index(wanted));
  if (it == registry().from_python.end()) {
    throw InvalidArgument("no conversion from Python to native " +
                          type_name(wanted));
  }
  try {
    return it->second(obj);
  } catch (const InvalidArgument& e) {
    std::string got =
        nb::cast<std::string>(nb::handle(Py_TYPE(obj.ptr())).attr("__name__"));
    throw InvalidArgument(std::string(e.what()) + " for a native " +
                          type_name(wanted) + " input, got a Python " + got);
  }
}

Item value_from_python(nb::handle obj, const std::type_info& wanted,
                       const ops::Field* field) {
  if (!field || !(PyTuple_Check(obj.ptr()) || PyDict_Check(obj.ptr())))
    return from_python(obj, wanted);
  nb::object value = registry().samples.attr("field")(obj, key_of(*field));
  return Item(ops::Sample{from_python(value, wanted), *field,
                          std::make_shared<Item>(PyObj::borrow(obj.ptr()))});
}

ConversionCounts& conversion_counts() {
  static ConversionCounts counts;
  return counts;
}

void register_basic_converters() {
  register_type(typeid(int64_t), "int", &cast_to_python<int64_t>,
                &int_from_python);
  register_type(typeid(double), "float", &cast_to_python<double>,
                &float_from_python);
  register_type(typeid(bool), "bool", &cast_to_python<bool>, &bool_from_python);
  register_type(typeid(std::string), "str", &cast_to_python<std::string>,
                &str_from_python);
  register_type(typeid(ItemBatch), "list", &batch_to_python);
  register_type(typeid(PyObj), "object");
  registry().samples = nb::module_::import_("feedline._samples").release();
  register_type(typeid(ops::Sample), "sample", &sample_to_python);
  register_type(typeid(ops::SampleBatch), "sample batch", &samples_to_python);
}

}  // namespace feedline::bindings
