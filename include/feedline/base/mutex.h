// SPDX-License-Identifier: Apache-2.0
//
// Mutex and MutexLock: std::mutex with clang thread-safety annotations.
//
// libstdc++'s std::mutex carries no capability annotations, so clang's
// -Wthread-safety cannot check code that uses it. These thin wrappers add
// them. Members protected by a Mutex are declared GUARDED_BY(mu_) and methods
// that expect it held REQUIRES(mu_). With GCC the annotations compile away.
//
// Thread safety: as std::mutex.

#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define FEEDLINE_TSA(x) __attribute__((x))
#else
#define FEEDLINE_TSA(x)
#endif

#define CAPABILITY(x) FEEDLINE_TSA(capability(x))
#define SCOPED_CAPABILITY FEEDLINE_TSA(scoped_lockable)
#define GUARDED_BY(x) FEEDLINE_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) FEEDLINE_TSA(pt_guarded_by(x))
#define REQUIRES(...) FEEDLINE_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) FEEDLINE_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) FEEDLINE_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) FEEDLINE_TSA(release_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS FEEDLINE_TSA(no_thread_safety_analysis)

namespace feedline {

// Tells the processor that the caller is in a busy-wait loop (x86 `pause`,
// Arm `yield`): it saves power and frees the core's resources for a sibling
// hardware thread. Used by every poll loop of the engine.
inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until the mutex is held. A mutex of the engine is held for a few
  // hundred nanoseconds at a time, so a short poll usually gets it without
  // the futex sleep and wake-up that std::mutex::lock() would pay under
  // contention.
  void lock() ACQUIRE() {
    for (int i = 0; i < kSpinTries; ++i) {
      if (mu_.try_lock()) return;
      cpu_pause();
    }
    mu_.lock();
  }
  void unlock() RELEASE() { mu_.unlock(); }

  // The wrapped mutex, for std::condition_variable waits.
  std::mutex& native() { return mu_; }

 private:
  static constexpr int kSpinTries = 64;
  std::mutex mu_;
};

// Holds `mu` for its scope. Can be temporarily released with unlock()/lock()
// around work that must not run under the lock.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu)
      : lock_(locked(mu), std::adopt_lock) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases and re-acquires the mutex inside the scope, for work that must
  // not run under it.
  void unlock() RELEASE() { lock_.unlock(); }
  void lock() ACQUIRE() { lock_.lock(); }

  // The underlying lock, for std::condition_variable::wait.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  static std::mutex& locked(Mutex& mu) NO_THREAD_SAFETY_ANALYSIS {
    mu.lock();
    return mu.native();
  }

  std::unique_lock<std::mutex> lock_;
};

}  // namespace feedline
