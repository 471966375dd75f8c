// SPDX-License-Identifier: Apache-2.0
//
// _feedline_testing: small native ops and sources for the tests and
// benchmarks of the Python pipeline API (the seam between native and Python
// stages), and a hook that throws each C++ error class. Not installed.
//
// The ops are handed to feedline through its ExtensionApi capsule
// (include/feedline/pipeline/extension_api.h), so they run inside pipelines
// of feedline._feedline_ext and are converted by its converter registry.

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <poll.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/extension_api.h"

namespace nb = nanobind;

namespace feedline::testing {
namespace {

const ExtensionApi* g_api = nullptr;

nb::object steal_or_throw(PyObject* obj) {
  if (obj == nullptr) throw nb::python_error();
  return nb::steal(obj);
}

nb::object wrap(OpPtr op, const char* name) {
  return steal_or_throw(g_api->wrap_op(std::move(op), name));
}

// Passes any item on unchanged; declares no types.
class IdentityOp final : public MapOp {
 public:
  Item call(Item input) override { return input; }
};

// Replaces any item by whether the calling thread holds the GIL. With
// `take_gil` it takes the GIL first: the control that shows the probe can
// see a GIL that is held.
class GilProbeOp final : public MapOp {
 public:
  explicit GilProbeOp(bool take_gil) : take_gil_(take_gil) {}
  Item call(Item /*input*/) override {
    if (!take_gil_) return Item(PyGILState_Check() != 0);
    PyGILState_STATE state = PyGILState_Ensure();
    bool held = PyGILState_Check() != 0;
    PyGILState_Release(state);
    return Item(held);
  }
  const std::type_info* output_type() const override { return &typeid(bool); }

 private:
  const bool take_gil_;
};

// Passes ints on; before passing `value` (every item if `value` < 0) it
// writes one byte to `entered_fd` (if >= 0), then blocks in read() until one
// byte arrives on `fd` or its write end closes: a native op that hangs until
// the test releases it (the fault campaign).
// With `destroyed_fd` >= 0 it writes one byte there when it is destroyed.
class GateOp final : public MapOp {
 public:
  GateOp(int fd, int64_t value, int entered_fd, int destroyed_fd)
      : fd_(fd),
        value_(value),
        entered_fd_(entered_fd),
        destroyed_fd_(destroyed_fd) {}
  ~GateOp() override {
    char byte = 0;
    if (destroyed_fd_ >= 0) {
      while (::write(destroyed_fd_, &byte, 1) < 0 && errno == EINTR) {
      }
    }
  }
  GateOp(const GateOp&) = delete;
  GateOp& operator=(const GateOp&) = delete;
  Item call(Item input) override {
    int64_t v = input.as<int64_t>();
    if (value_ < 0 || v == value_) {
      char byte = 0;
      if (entered_fd_ >= 0) {
        while (::write(entered_fd_, &byte, 1) < 0 && errno == EINTR) {
        }
      }
      while (::read(fd_, &byte, 1) < 0 && errno == EINTR) {
      }
    }
    return Item(v);
  }
  const std::type_info* input_type() const override { return &typeid(int64_t); }
  const std::type_info* output_type() const override {
    return &typeid(int64_t);
  }

 private:
  const int fd_;
  const int64_t value_;
  const int entered_fd_;
  const int destroyed_fd_;
};

// The descriptors of release_at_final_exit().
int g_final_release_fd = -1;
int g_final_done_fd = -1;

// Runs at the very end of Py_FinalizeEx (a Py_AtExit function), when the
// interpreter and its thread states are gone: writes one byte to the release
// descriptor, then waits (at most 30 s) for a byte on the done descriptor.
void at_final_exit() {
  char byte = 0;
  while (::write(g_final_release_fd, &byte, 1) < 0 && errno == EINTR) {
  }
  pollfd done{g_final_done_fd, POLLIN, 0};
  while (::poll(&done, 1, 30000) < 0 && errno == EINTR) {
  }
}

// Passes ints on after `micros` microseconds of busy work (a slow op that
// keeps its thread, without sleeping).
int64_t spin_for(int64_t v, int64_t micros) {
  auto end =
      std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  volatile int64_t sink = v;
  while (std::chrono::steady_clock::now() < end) sink = sink + 1;
  return v;
}

// Busy until this thread has used `micros` us of CPU: a fixed CPU cost per
// call, which takes longer in wall time when threads outnumber the CPUs.
int64_t cpu_work(int64_t v, int64_t micros) {
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  };
  const int64_t end = cpu_now() + micros * 1000;
  volatile int64_t sink = v;
  while (cpu_now() < end) sink = sink + 1;
  return v;
}

class RepeatGenerator final : public ItemGenerator {
 public:
  RepeatGenerator(int64_t value, int64_t times) : value_(value), left_(times) {}
  bool next(Item* out) override {
    if (left_ == 0) return false;
    --left_;
    *out = Item(value_);
    return true;
  }

 private:
  int64_t value_;
  int64_t left_;
};

class RepeatOp final : public GeneratorOp {
 public:
  explicit RepeatOp(int64_t times) : times_(times) {}
  std::unique_ptr<ItemGenerator> start(Item input) override {
    return std::make_unique<RepeatGenerator>(input.as<int64_t>(), times_);
  }
  const std::type_info* input_type() const override { return &typeid(int64_t); }
  const std::type_info* output_type() const override {
    return &typeid(int64_t);
  }

 private:
  int64_t times_;
};

class RangeSource final : public ItemSource {
 public:
  explicit RangeSource(int64_t n) : n_(n) {}
  bool next(Item* out) override {
    if (i_ == n_) return false;
    *out = Item(i_++);
    return true;
  }

 private:
  int64_t n_;
  int64_t i_ = 0;
};

template <typename E>
[[noreturn]] void throw_test_error(std::string_view kind) {
  std::string message = "test: " + std::string(kind);
  if constexpr (std::is_same_v<E, PipelineFailure>) {
    // PipelineFailure builds its message from the causes of failed stages.
    std::exception_ptr cause = std::make_exception_ptr(Error(message));
    throw PipelineFailure({StageError{"test", cause, message}});
  } else {
    throw E(message);
  }
}

// Throws the C++ exception class named `kind` with message "test: <kind>"
// (PipelineFailure: a message ending so), so the tests can check the
// translation of every class by feedline's exception translators.
void raise_error(std::string_view kind) {
  using Thrower = void (*)(std::string_view);
  static constexpr std::pair<std::string_view, Thrower> kThrowers[] = {
      {"Error", &throw_test_error<Error>},
      {"IoError", &throw_test_error<IoError>},
      {"FormatError", &throw_test_error<FormatError>},
      {"DecodeError", &throw_test_error<DecodeError>},
      {"Cancelled", &throw_test_error<Cancelled>},
      {"Internal", &throw_test_error<Internal>},
      {"Timeout", &throw_test_error<Timeout>},
      {"TooManyFailures", &throw_test_error<TooManyFailures>},
      {"PipelineFailure", &throw_test_error<PipelineFailure>},
      {"InvalidArgument", &throw_test_error<InvalidArgument>},
      {"OutOfRange", &throw_test_error<OutOfRange>},
  };
  for (const auto& [name, thrower] : kThrowers) {
    if (name == kind) thrower(kind);
  }
  throw InvalidArgument("raise_error: unknown kind '" + std::string(kind) +
                        "'");
}

void load_api() {
  g_api = static_cast<const ExtensionApi*>(
      PyCapsule_Import(kExtensionApiCapsule, 0));
  if (g_api == nullptr) throw nb::python_error();
  if (g_api->abi_version != kExtensionAbiVersion) {
    throw std::runtime_error(
        "_feedline_testing was built for another feedline extension ABI; "
        "rebuild it (make test-ext)");
  }
}

}  // namespace
}  // namespace feedline::testing

NB_MODULE(_feedline_testing, m) {
  using namespace feedline;           // NOLINT(google-build-using-namespace)
  using namespace feedline::testing;  // NOLINT(google-build-using-namespace)
  m.doc() = "Native ops for feedline's tests (not installed).";
  load_api();

  m.def(
      "identity",
      [] { return wrap(std::make_shared<IdentityOp>(), "identity"); },
      "Passes any item on unchanged, without looking at it.");
  m.def(
      "add",
      [](int64_t n) {
        return wrap(make_map_op<int64_t>([n](int64_t x) { return x + n; }),
                    "add");
      },
      nb::arg("n"), "int -> int + n.");
  m.def(
      "fail_on_multiple",
      [](int64_t k) {
        return wrap(make_map_op<int64_t>([k](int64_t v) {
                      if (v % k == 0)
                        throw DecodeError("value " + std::to_string(v) +
                                          " is a multiple of " +
                                          std::to_string(k));
                      return v;
                    }),
                    "fail_on_multiple");
      },
      nb::arg("k"),
      "Passes ints on; raises feedline.DecodeError on multiples of k.");
  m.def(
      "gate",
      [](int fd, int64_t value, int entered_fd, int destroyed_fd) {
        return wrap(
            std::make_shared<GateOp>(fd, value, entered_fd, destroyed_fd),
            "gate");
      },
      nb::arg("fd"), nb::arg("value"), nb::arg("entered_fd") = -1,
      nb::arg("destroyed_fd") = -1,
      "int -> int; before `value` (< 0: every item) writes a byte to "
      "entered_fd (if >= 0), then blocks on one byte from fd. Writes a byte "
      "to destroyed_fd (if >= 0) when the op is destroyed.");
  m.def(
      "release_at_final_exit",
      [](int release_fd, int done_fd) {
        g_final_release_fd = release_fd;
        g_final_done_fd = done_fd;
        if (Py_AtExit(&at_final_exit) != 0) {
          throw std::runtime_error("Py_AtExit: no room left");
        }
      },
      nb::arg("release_fd"), nb::arg("done_fd"),
      "At the very end of interpreter finalization, writes a byte to "
      "release_fd, then waits (at most 30 s) for a byte on done_fd.");
  m.def(
      "spin",
      [](int64_t micros) {
        return wrap(make_map_op<int64_t>(
                        [micros](int64_t v) { return spin_for(v, micros); }),
                    "spin");
      },
      nb::arg("micros"), "int -> int after `micros` us of busy work.");
  m.def(
      "cpu_work",
      [](int64_t micros) {
        return wrap(make_map_op<int64_t>(
                        [micros](int64_t v) { return cpu_work(v, micros); }),
                    "cpu_work");
      },
      nb::arg("micros"),
      "int -> int after using `micros` us of this thread's CPU time.");
  m.def(
      "sleep",
      [](int64_t micros) {
        return wrap(
            make_map_op<int64_t>([micros](int64_t v) {
              std::this_thread::sleep_for(std::chrono::microseconds(micros));
              return v;
            }),
            "sleep");
      },
      nb::arg("micros"),
      "int -> int after sleeping `micros` us (without the GIL): a stand-in "
      "for I/O.");
  m.def(
      "to_str",
      [] {
        return wrap(
            make_map_op<int64_t>([](int64_t x) { return std::to_string(x); }),
            "to_str");
      },
      "int -> str.");
  m.def(
      "str_len",
      [] {
        return wrap(make_map_op<std::string>([](const std::string& s) {
                      return static_cast<int64_t>(s.size());
                    }),
                    "str_len");
      },
      "str (or os.PathLike) -> its length in bytes.");
  m.def(
      "gil_probe",
      [](bool take_gil) {
        return wrap(std::make_shared<GilProbeOp>(take_gil), "gil_probe");
      },
      nb::arg("take_gil") = false,
      "Replaces each item by whether the calling thread held the GIL; with "
      "take_gil, after taking it.");
  m.def(
      "repeat",
      [](int64_t times) {
        return wrap(std::make_shared<RepeatOp>(times), "repeat");
      },
      nb::arg("times"), "Generator: each int `times` times.");
  m.def(
      "range_source",
      [](int64_t n) {
        return steal_or_throw(
            g_api->wrap_source([n] { return std::make_unique<RangeSource>(n); },
                               "range", &typeid(int64_t)));
      },
      nb::arg("n"), "A native source of the ints 0 .. n-1.");
  m.def(
      "conversion_counts",
      [] {
        return nb::make_tuple(g_api->to_python_count->load(),
                              g_api->from_python_count->load());
      },
      "(native -> Python, Python -> native) conversions so far.");
  m.def("raise_error", &raise_error, nb::arg("kind"),
        "Throws the C++ exception class named `kind`.");
}
