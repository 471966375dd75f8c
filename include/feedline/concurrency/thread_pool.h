// SPDX-License-Identifier: Apache-2.0
//
// ThreadPool: a fixed set of worker threads running submitted tasks in FIFO
// order.
//
// The pipeline engine submits short, non-blocking stage tasks here; tasks
// never wait on pipeline queues, so a full queue cannot occupy a thread.
// Threads are named "feedline:w<i>" (visible in perf, gdb and py-spy).
//
// Hazard: a task that blocks until another task of the same pool runs
// deadlocks when every thread is blocked that way. The engine never does this;
// user ops that block (on I/O, say) hold a thread for that long.
//
// Active threads: set_active_threads(n) lets only the first n threads take
// tasks (the others park), so that a controller (the pipeline's autotune) can
// change how many tasks run at once without creating or joining threads. All
// threads are started by the constructor; at shutdown every thread helps
// drain the queue.
//
// Thread safety: submit() may be called from any thread, including pool
// threads. shutdown() (and the destructor) runs every task submitted, including
// tasks that running tasks submit while it drains, then joins. A task
// submitted after the threads are gone runs inline on the submitting thread,
// so no task is ever lost.
//
// Failure to start: when the OS refuses a thread (a process or memory limit),
// the constructor joins the threads it started and throws feedline::Error
// naming the thread and the OS's reason; nothing is left running.
//
// Fork: a pool inherited by a child process (feedline/concurrency/fork.h) is
// dead there: shutdown() does nothing, submit() throws, and the destructor
// leaks its state rather than join threads that do not exist or destroy a
// condition variable they waited on.

#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "feedline/base/mutex.h"

namespace feedline {

class ThreadPool {
 public:
  using Task = std::function<void()>;

  // Starts `num_threads` threads named "<name_prefix><i>".
  // Throws: InvalidArgument if num_threads < 1; Error if the OS refuses a
  // thread.
  explicit ThreadPool(int num_threads, std::string name_prefix = "feedline:w");
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task` to run on a pool thread. A task must not throw; one that
  // does terminates the process (the engine's tasks catch everything).
  // Throws: Error in a child process, for a pool inherited from its parent.
  void submit(Task task);

  // Drains the queue, then joins every thread. Idempotent. Must not be called
  // from a pool thread.
  void shutdown();

  int num_threads() const { return static_cast<int>(threads_.size()); }

  // Lets threads [0, n) take tasks and parks the others once they finish
  // the task they run; n is clamped to [1, num_threads()]. Initially all.
  void set_active_threads(int n);
  int active_threads() const {
    return active_limit_.load(std::memory_order_relaxed);
  }
  // True on one of this pool's threads that set_active_threads() has made
  // inactive: a task that runs a long loop (a stage's worker) should end or
  // requeue itself, so that the thread parks and the limit holds.
  bool current_thread_inactive() const;

  // CPU time used by the pool's threads so far (CLOCK_THREAD_CPUTIME_ID of
  // each, summed; threads that have exited count what they used up to then
  // only if they exited at shutdown). Zero in a child process.
  std::chrono::nanoseconds cpu_time() const;

  // True when tasks are waiting for a thread (a hint: may change at once).
  bool has_queued_tasks() const {
    return queued_.load(std::memory_order_relaxed) > 0;
  }

  // True when called from one of this pool's threads.
  bool in_pool_thread() const;
  // True when called from a thread of any ThreadPool. Code that must not
  // join a pool from inside it (a finalizer, say) checks this first.
  static bool in_any_pool_thread();

  // Pool threads alive in the process, over all pools (a thread counts until
  // its last instruction before exiting). For leak checks and diagnostics.
  static int live_threads();

 private:
  void run_worker(int index);
  std::chrono::nanoseconds threads_cpu_time() const;
  // Wakes and joins the threads started so far.
  void join_threads();
  bool inherited() const;

  const uint64_t generation_;  // fork generation of the creating process
  mutable Mutex mu_;
  // On the heap, so that an inherited pool can leak it (see the destructor).
  std::unique_ptr<std::condition_variable> work_cv_;
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  int idle_ GUARDED_BY(mu_) = 0;  // active threads waiting for a task
  // Threads with an index at or above this park (set_active_threads()).
  std::atomic<int> active_limit_{0};
  std::unique_ptr<std::condition_variable> park_cv_;
  std::atomic<int> queued_{0};  // tasks_.size(), readable without mu_
  bool shutting_down_ GUARDED_BY(mu_) = false;
  std::atomic<bool> draining_{false};  // shutting_down_, readable without mu_
  bool joined_ GUARDED_BY(mu_) = false;
  std::chrono::nanoseconds final_cpu_time_ GUARDED_BY(mu_){0};
  mutable Mutex join_mu_;  // serialises shutdown() and cpu_time()
  const std::string name_prefix_;
  // Declared last: threads start after every other member is constructed and
  // are joined in the destructor before any member is destroyed.
  std::vector<std::thread> threads_;
};

}  // namespace feedline
