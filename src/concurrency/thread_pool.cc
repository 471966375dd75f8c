// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <string>
#include <system_error>
#include <utility>

#include <pthread.h>

#include "feedline/base/error.h"
#include "feedline/concurrency/fork.h"
#include "feedline/concurrency/spin_wait.h"

namespace feedline {
namespace {

thread_local const ThreadPool* t_current_pool = nullptr;
thread_local int t_current_index = -1;  // this thread's index in its pool
std::atomic<int> g_live_threads{0};

}  // namespace

namespace detail {
void forget_current_pool_after_fork() noexcept { t_current_pool = nullptr; }
}  // namespace detail

ThreadPool::ThreadPool(int num_threads, std::string name_prefix)
    : generation_(fork_generation()),
      work_cv_(std::make_unique<std::condition_variable>()),
      active_limit_(num_threads),
      park_cv_(std::make_unique<std::condition_variable>()),
      name_prefix_(std::move(name_prefix)) {
  if (num_threads < 1) {
    throw InvalidArgument("num_threads must be >= 1 (got " +
                          std::to_string(num_threads) + ")");
  }
  threads_.reserve(static_cast<std::size_t>(num_threads));
  for (int i = 0; i < num_threads; ++i) {
    try {
      threads_.emplace_back([this, i] { run_worker(i); });
    } catch (const std::system_error& e) {
      // The OS refused the thread (RLIMIT_NPROC, address space, ...): the
      // destructor will not run, so stop the threads started so far here.
      join_threads();
      throw Error("could not start worker thread " + std::to_string(i + 1) +
                  " of " + std::to_string(num_threads) + " (" + name_prefix_ +
                  "): " + e.what());
    }
  }
}

ThreadPool::~ThreadPool() {
  if (inherited()) {
    // In a child process: the threads are gone and may have left mu_ held
    // or work_cv_ waited on. Leak rather than join or destroy (destroying a
    // condition variable with waiters blocks forever).
    // A failed allocation here terminates (a destructor is noexcept).
    (void)work_cv_.release();
    (void)park_cv_.release();
    // NOLINTNEXTLINE(bugprone-unhandled-exception-at-new)
    (void)new std::vector<std::thread>(std::move(threads_));
    // NOLINTNEXTLINE(bugprone-unhandled-exception-at-new)
    (void)new std::deque<Task>(std::move(tasks_));
    return;
  }
  shutdown();
}

bool ThreadPool::inherited() const {
  return inherited_from_parent(generation_);
}

void ThreadPool::join_threads() {
  {
    MutexLock lock(mu_);
    shutting_down_ = true;
    draining_.store(true, std::memory_order_relaxed);
  }
  work_cv_->notify_all();
  park_cv_->notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::shutdown() {
  if (inherited()) return;
  MutexLock join_lock(join_mu_);
  {
    MutexLock lock(mu_);
    if (joined_) return;
  }
  {
    // The threads' clocks go with them: keep what they used by now (the
    // drain that follows is not counted).
    std::chrono::nanoseconds used = threads_cpu_time();
    MutexLock lock(mu_);
    final_cpu_time_ = used;
  }
  join_threads();
  // A thread outside the pool may have queued a task after the last worker
  // left; run such stragglers here.
  std::deque<Task> left;
  {
    MutexLock lock(mu_);
    joined_ = true;
    left.swap(tasks_);
  }
  for (Task& task : left) task();
}

void ThreadPool::submit(Task task) {
  if (inherited()) {
    throw Error(
        "a thread pool inherited from the parent process cannot run "
        "tasks in the child (after fork)");
  }
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (!joined_) {
      tasks_.push_back(std::move(task));
      queued_.store(static_cast<int>(tasks_.size()), std::memory_order_relaxed);
      wake = idle_ > 0;
      task = nullptr;
    }
  }
  if (task) {
    task();  // every thread has exited: run it here rather than lose it
    return;
  }
  if (wake) work_cv_->notify_one();
}

void ThreadPool::set_active_threads(int n) {
  n = std::clamp(n, 1, num_threads());
  int before = 0;
  {
    MutexLock lock(mu_);
    before = active_limit_.exchange(n, std::memory_order_relaxed);
  }
  if (n > before) {
    // Newly active threads take queued tasks (and later wake-ups) at once.
    park_cv_->notify_all();
  } else if (n < before) {
    // Idle threads now above the limit move to the parking condition.
    work_cv_->notify_all();
  }
}

std::chrono::nanoseconds ThreadPool::cpu_time() const {
  if (inherited()) return std::chrono::nanoseconds(0);
  MutexLock join_lock(join_mu_);
  {
    MutexLock lock(mu_);
    if (joined_) return final_cpu_time_;
  }
  return threads_cpu_time();
}

std::chrono::nanoseconds ThreadPool::threads_cpu_time() const {
  int64_t total = 0;
  for (const std::thread& t : threads_) {
    clockid_t clock{};
    // A thread that has exited but is not joined yet still has its clock.
    if (pthread_getcpuclockid(const_cast<std::thread&>(t).native_handle(),
                              &clock) != 0) {
      continue;
    }
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) continue;
    total += int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  return std::chrono::nanoseconds(total);
}

bool ThreadPool::in_pool_thread() const { return t_current_pool == this; }

bool ThreadPool::current_thread_inactive() const {
  // While draining at shutdown every thread takes tasks: none is inactive.
  return t_current_pool == this &&
         t_current_index >= active_limit_.load(std::memory_order_relaxed) &&
         !draining_.load(std::memory_order_relaxed);
}

bool ThreadPool::in_any_pool_thread() { return t_current_pool != nullptr; }

int ThreadPool::live_threads() { return g_live_threads.load(); }

void ThreadPool::run_worker(int index) {
  g_live_threads.fetch_add(1);
  struct Exit {
    ~Exit() { g_live_threads.fetch_sub(1); }
  } on_exit;
  t_current_pool = this;
  t_current_index = index;
  std::string name = name_prefix_ + std::to_string(index);
  if (name.size() > 15) name.resize(15);  // the kernel's limit
  pthread_setname_np(pthread_self(), name.c_str());
  for (;;) {
    Task task;
    // A task often follows within microseconds (a stage's next worker): poll
    // for it before sleeping, so that submit() need not wake this thread.
    if (index < active_limit_.load(std::memory_order_relaxed)) {
      spin_wait([this] { return queued_.load(std::memory_order_relaxed) > 0; });
    }
    {
      MutexLock lock(mu_);
      for (;;) {
        if (shutting_down_) {
          // Keep running until the queue is empty, since running tasks may
          // still submit follow-up tasks that must not be lost.
          if (tasks_.empty()) return;
          break;
        }
        if (index >= active_limit_.load(std::memory_order_relaxed)) {
          // Parked. A wake-up meant for an active thread may have reached
          // this one as it was deactivated: pass it on.
          if (!tasks_.empty() && idle_ > 0) work_cv_->notify_one();
          park_cv_->wait(lock.native());
          continue;
        }
        if (!tasks_.empty()) break;
        ++idle_;
        work_cv_->wait(lock.native());
        --idle_;
      }
      task = std::move(tasks_.front());
      tasks_.pop_front();
      queued_.store(static_cast<int>(tasks_.size()), std::memory_order_relaxed);
    }
    task();
  }
}

}  // namespace feedline
