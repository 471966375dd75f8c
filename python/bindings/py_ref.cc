// SPDX-License-Identifier: Apache-2.0

#include "py_ref.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <new>
#include <vector>

#include <nanobind/nanobind.h>
#include <pthread.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/op.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// Creating or deleting a Python thread state takes the interpreter's lock on
// its list of thread states. Python 3.10 and 3.11 before 3.11.8 do not reset
// that lock in a fork()ed child until after they have taken it there, so a
// fork() that lands while a native thread creates its thread state (with no
// GIL: nothing else stops the fork) leaves the child hung for good (CPython
// issue 112275). Native threads therefore create and delete their thread
// states under this mutex, which a pthread_atfork handler holds across every
// fork(). Lock order: the GIL, then this mutex, then the interpreter's lock;
// nothing waits for the GIL while holding it.
//
// Python 3.12 resets the lock first, and 3.13 takes it itself before
// fork() (so the handler would wait for a thread that waits for the lock
// the forking thread holds): the handler is installed below 3.12 only.
// Without the handler the mutex is not used either: a fork while a thread
// held it would leave it held in the child for good.
#if PY_VERSION_HEX < 0x030C0000
std::mutex g_tstate_list_mu;

void install_fork_guard() {
  static const bool kInstalled = [] {
    pthread_atfork([] { g_tstate_list_mu.lock(); },
                   [] { g_tstate_list_mu.unlock(); },
                   [] { g_tstate_list_mu.unlock(); });
    return true;
  }();
  (void)kInstalled;
}

using TstateListLock = std::lock_guard<std::mutex>;
#else
void install_fork_guard() {}

struct TstateListLock {
  explicit TstateListLock(int /*unused*/) {}
};
constexpr int g_tstate_list_mu = 0;
#endif

// The exit gate (begin_interpreter_exit): engine threads announce that they
// are about to wait for the GIL (g_acquiring) before they look at the flag,
// and the exiting thread sets the flag before it looks at the count, so that
// either the thread sees the flag or the exiting thread waits for it.
std::atomic<bool> g_exit_began{false};
std::atomic<int> g_acquiring{0};
std::mutex g_acquired_mu;
std::condition_variable g_acquired_cv;

// Counts this thread among those about to wait for the GIL, until destroyed.
class AcquireTicket {
 public:
  AcquireTicket() { g_acquiring.fetch_add(1); }
  ~AcquireTicket() {
    if (g_acquiring.fetch_sub(1) == 1) {
      { std::lock_guard<std::mutex> lock(g_acquired_mu); }
      g_acquired_cv.notify_all();
    }
  }
  AcquireTicket(const AcquireTicket&) = delete;
  AcquireTicket& operator=(const AcquireTicket&) = delete;
};

bool exit_began() { return g_exit_began.load() || interpreter_finalizing(); }

// The interpreter's main thread (note_main_thread), and the thread that ran
// begin_interpreter_exit(): the one that finalizes, which Python never ends.
std::atomic<unsigned long> g_main_thread{0};
std::atomic<unsigned long> g_exit_thread{0};

bool may_be_ended_by_exit() {
  const unsigned long self = PyThread_get_thread_ident();
  return self != g_main_thread.load() && self != g_exit_thread.load();
}

// Blocks this thread until the process ends; it holds no GIL and no lock of
// its own, and the process's exit ends it.
[[noreturn]] void park_until_process_exit() {
  for (;;) pause();
}

// The Python thread state a native thread created for itself: kept for the
// thread's life and deleted when the thread exits (unless the interpreter is
// already shutting down, when it is leaked on purpose).
struct NativeThreadState {
  PyThreadState* tstate = nullptr;

  // Creates this thread's state and takes the GIL with it. Requires: the
  // thread has no thread state and does not hold the GIL.
  void create() {
    install_fork_guard();
    {
      TstateListLock lock(g_tstate_list_mu);
      // Also makes it the thread's PyGILState thread state.
      tstate = PyThreadState_New(PyInterpreterState_Main());
    }
    if (tstate == nullptr) throw std::bad_alloc();
    PyEval_RestoreThread(tstate);
    // Keeps PyGILState's count on it above zero for the thread's life, so a
    // nested PyGILState_Ensure/Release pair (nanobind's) never deletes it.
    (void)PyGILState_Ensure();
  }

  ~NativeThreadState() {
    if (tstate == nullptr) return;
    AcquireTicket ticket;
    if (exit_began()) return;
    PyEval_RestoreThread(tstate);
    forget_dummy_thread();
    PyThreadState_Clear(tstate);
    TstateListLock lock(g_tstate_list_mu);
    PyThreadState_DeleteCurrent();  // releases the GIL
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

int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
int64_t monotonic_ns() { return clock_ns(CLOCK_MONOTONIC); }
// CPU time of this thread: while it holds the GIL, the time it runs Python
// (or native code that kept the GIL), not the time it slept or blocked. A
// read is a system call (about 0.3 us, more than a short Python call), so
// GilScope reads it only on a thread that held the GIL for kTimeCpuAbove or
// more in one of its last kTimeCpuFor holds; a hold timed by the wall clock
// instead is short, and cannot differ much. (Threads serve every stage, so
// one slow stage among fast ones keeps CPU timing on.)
int64_t thread_cpu_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }
constexpr int64_t kTimeCpuAbove = 50'000;
constexpr int kTimeCpuFor = 8;
thread_local int t_time_cpu = kTimeCpuFor;  // holds left to time by CPU

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

void note_main_thread(unsigned long ident) { g_main_thread.store(ident); }

bool on_main_thread() {
  return PyThread_get_thread_ident() == g_main_thread.load();
}

ReleaseGil::ReleaseGil() : state_(PyEval_SaveThread()) {}

ReleaseGil::~ReleaseGil() {
  if (may_be_ended_by_exit()) {
    bool exiting = false;
    {
      AcquireTicket ticket;  // begin_interpreter_exit() waits for it
      exiting = exit_began();
      if (!exiting) PyEval_RestoreThread(state_);
    }
    if (exiting) park_until_process_exit();
    return;
  }
  PyEval_RestoreThread(state_);
}

BriefGil::BriefGil() {
  if (may_be_ended_by_exit()) {
    AcquireTicket ticket;
    if (exit_began()) return;
    gstate_ = PyGILState_Ensure();
  } else {
    gstate_ = PyGILState_Ensure();
  }
  held_ = true;
}

BriefGil::~BriefGil() {
  if (held_) PyGILState_Release(gstate_);
}

void begin_interpreter_exit(double timeout_s) {
  g_exit_thread.store(PyThread_get_thread_ident());
  g_exit_began.store(true);
  PyThreadState* self = PyEval_SaveThread();
  {
    std::unique_lock<std::mutex> lock(g_acquired_mu);
    g_acquired_cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                           [] { return g_acquiring.load() == 0; });
  }
  PyEval_RestoreThread(self);
}

int threads_waiting_for_gil() { return g_acquiring.load(); }

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
  const int64_t t0 = monotonic_ns();
  if (t_native_state.tstate == nullptr &&
      PyGILState_GetThisThreadState() != nullptr) {
    // A thread Python created (the consumer, an asyncio loop): borrow its
    // thread state for this scope only; Python owns and deletes it.
    // Past the start of the exit such a thread (not the main one) could be
    // ended as it waits; it unwinds to its ReleaseGil, which parks it.
    borrowed_ = true;
    AcquireTicket ticket;
    if (may_be_ended_by_exit() && exit_began()) {
      throw Cancelled("the Python interpreter is exiting");
    }
    gstate_ = PyGILState_Ensure();
  } else {
    AcquireTicket ticket;
    if (exit_began()) {
      throw Cancelled("the Python interpreter is exiting");
    }
    if (t_native_state.tstate == nullptr) {
      t_native_state.create();
    } else {
      PyEval_RestoreThread(t_native_state.tstate);
    }
    saved_ = t_native_state.tstate;
  }
  held0_ns_ = monotonic_ns();
  wait_ns_ = held0_ns_ - t0;
  cpu0_ns_ = t_time_cpu > 0 ? thread_cpu_ns() : -1;
  drain_released();
}

GilScope::~GilScope() {
  // Unwinding a thread Python ended at exit as it waited: no GIL to release.
  if (!holds_gil()) return;
  if (wait_ns_ >= 0) {
    const int64_t wall = monotonic_ns() - held0_ns_;
    const int64_t held = cpu0_ns_ >= 0 ? thread_cpu_ns() - cpu0_ns_ : wall;
    t_time_cpu =
        wall >= kTimeCpuAbove ? kTimeCpuFor : std::max(t_time_cpu - 1, 0);
    report_gil_time(std::chrono::nanoseconds(wait_ns_),
                    std::chrono::nanoseconds(held));
  }
  if (borrowed_) {
    PyGILState_Release(gstate_);
  } else if (saved_ != nullptr) {
    PyEval_SaveThread();
  }
}

}  // namespace feedline::bindings
