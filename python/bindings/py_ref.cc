// SPDX-License-Identifier: Apache-2.0

#include "py_ref.h"

#include <atomic>
#include <mutex>
#include <vector>

#include <nanobind/nanobind.h>

#include "feedline/base/error.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// The Python thread state a native thread created for itself: kept for the
// thread's life and deleted when the thread exits (unless the interpreter is
// already shutting down, when it is leaked on purpose).
struct NativeThreadState {
  PyThreadState* tstate = nullptr;
  PyGILState_STATE gstate{};

  ~NativeThreadState() {
    if (tstate == nullptr || interpreter_finalizing()) return;
    PyEval_RestoreThread(tstate);
    forget_dummy_thread();
    PyGILState_Release(gstate);  // the last release deletes the thread state
  }

  // Python code that asks for threading.current_thread() on a native thread
  // (logging does) registers a threading._DummyThread that Python < 3.13
  // never removes; drop it when the native thread ends, so that
  // threading.active_count() does not grow with every pipeline.
  static void forget_dummy_thread() {
    try {
      nb::module_ threading = nb::module_::import_("threading");
      nb::dict active = nb::cast<nb::dict>(threading.attr("_active"));
      nb::int_ ident(PyThread_get_thread_ident());
      if (active.contains(ident) &&
          nb::isinstance(active[ident], threading.attr("_DummyThread")))
        nb::del(active[ident]);
    } catch (...) {
      PyErr_Clear();
    }
  }
};

thread_local NativeThreadState t_native_state;

std::mutex g_pending_mu;
std::vector<PyObject*>* g_pending = nullptr;  // leaked on purpose at exit
std::atomic<bool> g_has_pending{false};

}  // namespace

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0 || Py_IsInitialized() == 0;
#else
  return _Py_IsFinalizing() != 0 || Py_IsInitialized() == 0;
#endif
}

void release_reference(PyObject* obj) noexcept {
  if (holds_gil()) {
    Py_DECREF(obj);
    return;
  }
  if (interpreter_finalizing()) return;  // no longer releasable: leak it
  std::lock_guard<std::mutex> lock(g_pending_mu);
  // A failed allocation here terminates (noexcept: this runs in destructors).
  // NOLINTNEXTLINE(bugprone-unhandled-exception-at-new)
  if (g_pending == nullptr) g_pending = new std::vector<PyObject*>();
  g_pending->push_back(obj);
  g_has_pending.store(true, std::memory_order_release);
}

void drain_released() noexcept {
  // Releasing may run __del__ methods that drop more references (which land
  // here again, with the GIL, and are released at once), so swap first.
  while (g_has_pending.load(std::memory_order_acquire)) {
    std::vector<PyObject*> batch;
    {
      std::lock_guard<std::mutex> lock(g_pending_mu);
      batch.swap(*g_pending);
      g_has_pending.store(false, std::memory_order_release);
    }
    for (PyObject* obj : batch) Py_DECREF(obj);
  }
}

GilScope::GilScope() {
  if (holds_gil()) return;
  if (interpreter_finalizing()) {
    throw Cancelled("the Python interpreter is shutting down");
  }
  if (t_native_state.tstate == nullptr &&
      PyGILState_GetThisThreadState() != nullptr) {
    // A thread Python created (the consumer, an asyncio loop): borrow its
    // thread state for this scope only; Python owns and deletes it.
    borrowed_ = true;
    gstate_ = PyGILState_Ensure();
  } else {
    if (t_native_state.tstate == nullptr) {
      t_native_state.gstate = PyGILState_Ensure();
      t_native_state.tstate = PyThreadState_Get();
    } else {
      PyEval_RestoreThread(t_native_state.tstate);
    }
    saved_ = t_native_state.tstate;
  }
  drain_released();
}

GilScope::~GilScope() {
  // Unwinding a thread Python ended at exit as it waited: no GIL to release.
  if (!holds_gil()) return;
  if (borrowed_) {
    PyGILState_Release(gstate_);
  } else if (saved_ != nullptr) {
    PyEval_SaveThread();
  }
}

}  // namespace feedline::bindings
