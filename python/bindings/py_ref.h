// SPDX-License-Identifier: Apache-2.0
//
// Python references held by native code, and the GIL policy of the engine's
// threads.
//
// Rules every binding follows (docs/python.md explains why):
//   1. Engine code never holds the GIL: a binding releases it before calling
//      into the engine (next(), stop(), a Completion; stats() alone keeps it,
//      as it only takes stage mutexes briefly), and takes it only around
//      Python calls, never while holding an engine lock.
//   2. Native threads (the worker pool, the stats reporter) take the GIL
//      through GilScope, which keeps one Python thread state per native thread
//      for the thread's whole life, so `threading.local` in user ops works and
//      no thread state is created per call.
//   3. A reference dropped by a thread without the GIL is not released there:
//      it is queued and released by the next thread that takes the GIL through
//      GilScope (or by drain_released()). Dropping an item therefore never
//      blocks on the GIL, so no engine lock can end up waiting for it.
// On a free-threaded build "holding the GIL" means "having an attached thread
// state", which the Python C API requires there as well.

#pragma once

#include <cstdint>
#include <utility>

#include <Python.h>

namespace feedline::bindings {

// True once the interpreter shuts down; native threads leak what they hold.
bool interpreter_finalizing();

// Called by the last atexit function of the process (registered when the
// module is imported): from now on the engine's own threads no longer take
// the GIL (GilScope throws Cancelled; a thread that ends leaks its thread
// state). Then waits, with the GIL released and for at most `timeout_s`,
// until every engine thread that was already waiting for the GIL has had it.
// Why: Python ends a thread that takes the GIL once finalization has begun
// (pthread_exit before 3.14), and a thread unwound from inside the engine's
// stop (a noexcept path) would abort the process. Requires: the GIL.
void begin_interpreter_exit(double timeout_s);

// Engine threads waiting for the GIL in a GilScope now (for tests).
int threads_waiting_for_gil();

// Records the interpreter's main thread (the one that runs atexit functions
// and finalizes): threading.main_thread().ident, when the module is imported.
void note_main_thread(unsigned long ident);

// True on the interpreter's main thread (the one Python delivers signals to).
bool on_main_thread();

// Releases the GIL for its scope, as nanobind::gil_scoped_release does; every
// binding that lets Python threads run meanwhile uses this instead. Python
// (< 3.14) ends a thread that asks for the GIL back once finalization has
// begun, with pthread_exit, and that unwinding, out of a destructor, aborts
// the process: a daemon thread decoding or iterating while the main thread
// exits. So a thread other than the main one takes part in the exit gate of
// begin_interpreter_exit(): once the exit began it never asks for the GIL
// again but parks, with no lock held by this scope, until the process ends,
// as Python 3.14 does with such threads. The main thread always gets the
// GIL back. Requires: the GIL (as nanobind's).
class ReleaseGil {
 public:
  ReleaseGil();
  ~ReleaseGil();
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* state_;
};

// True when this thread holds the GIL (has an attached thread state). Late in
// finalization Python < 3.12 deletes the key PyGILState_Check() reads, which
// then says yes on every thread; this thread's state is gone by then too.
inline bool holds_gil() {
  return PyGILState_Check() != 0 && PyGILState_GetThisThreadState() != nullptr;
}

// Takes the GIL for its scope on a Python thread inside a ReleaseGil scope
// that needs it briefly (a signal check while it waits), unless, as for
// ReleaseGil, the exit began and the thread could be ended: then held() is
// false and the caller must return to its ReleaseGil without Python calls.
class BriefGil {
 public:
  BriefGil();
  ~BriefGil();
  BriefGil(const BriefGil&) = delete;
  BriefGil& operator=(const BriefGil&) = delete;
  bool held() const { return held_; }

 private:
  bool held_ = false;
  PyGILState_STATE gstate_{};
};

// Releases one reference to `obj` now if this thread holds the GIL, else
// queues it for the next GilScope. Safe on any thread, at any time.
void release_reference(PyObject* obj) noexcept;

// Releases the queued references. Requires: the GIL.
void drain_released() noexcept;

// Holds the GIL for its lifetime, on any thread. Nests: a thread that already
// holds the GIL keeps it and the scope does nothing. A scope that takes the
// GIL reports, when it ends, how long it waited for it and the CPU time the
// thread used while holding it (report_gil_time(), in a stage's call).
// Throws: feedline::Cancelled if the interpreter is shutting down (on an
// engine thread: once begin_interpreter_exit() ran).
class GilScope {
 public:
  GilScope();
  ~GilScope();
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;

 private:
  PyThreadState* saved_ = nullptr;  // set when this scope took the GIL
  bool borrowed_ = false;           // took it through PyGILState_Ensure
  PyGILState_STATE gstate_{};
  int64_t wait_ns_ = -1;  // waited to take it; -1: it did not take it
  int64_t held0_ns_ = 0;  // the monotonic clock when it took it
  int64_t cpu0_ns_ = -1;  // the thread's CPU time then; -1: not read
};

// An owning reference to a Python object; the Item type of Python values.
// Moving it never touches the GIL; destroying it follows release_reference().
class PyObj {
 public:
  PyObj() = default;
  // Takes over the reference the caller owns (a "new reference").
  static PyObj steal(PyObject* obj) { return PyObj(obj); }
  // Adds a reference of its own. Requires: the GIL.
  static PyObj borrow(PyObject* obj) {
    Py_XINCREF(obj);
    return PyObj(obj);
  }
  PyObj(PyObj&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  PyObj& operator=(PyObj&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  PyObj(const PyObj&) = delete;
  PyObj& operator=(const PyObj&) = delete;
  ~PyObj() { reset(); }

  PyObject* get() const { return ptr_; }
  // Gives up ownership: the caller now owns the reference.
  PyObject* release() { return std::exchange(ptr_, nullptr); }
  void reset() noexcept {
    if (ptr_ != nullptr) release_reference(std::exchange(ptr_, nullptr));
  }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  explicit PyObj(PyObject* obj) : ptr_(obj) {}
  PyObject* ptr_ = nullptr;
};

}  // namespace feedline::bindings
