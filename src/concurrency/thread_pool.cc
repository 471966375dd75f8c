// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/thread_pool.h"

#include <atomic>
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
std::atomic<int> g_live_threads{0};

}  // namespace

namespace detail {
void forget_current_pool_after_fork() noexcept { t_current_pool = nullptr; }
}  // namespace detail

ThreadPool::ThreadPool(int num_threads, std::string name_prefix)
    : generation_(fork_generation()),
      work_cv_(std::make_unique<std::condition_variable>()),
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
  }
  work_cv_->notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::shutdown() {
  if (inherited()) return;
  MutexLock join_lock(join_mu_);
  {
    MutexLock lock(mu_);
    if (joined_) return;
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

bool ThreadPool::in_pool_thread() const { return t_current_pool == this; }

bool ThreadPool::in_any_pool_thread() { return t_current_pool != nullptr; }

int ThreadPool::live_threads() { return g_live_threads.load(); }

void ThreadPool::run_worker(int index) {
  g_live_threads.fetch_add(1);
  struct Exit {
    ~Exit() { g_live_threads.fetch_sub(1); }
  } on_exit;
  t_current_pool = this;
  std::string name = name_prefix_ + std::to_string(index);
  if (name.size() > 15) name.resize(15);  // the kernel's limit
  pthread_setname_np(pthread_self(), name.c_str());
  for (;;) {
    Task task;
    // A task often follows within microseconds (a stage's next worker): poll
    // for it before sleeping, so that submit() need not wake this thread.
    spin_wait([this] { return queued_.load(std::memory_order_relaxed) > 0; });
    {
      MutexLock lock(mu_);
      while (tasks_.empty() && !shutting_down_) {
        ++idle_;
        work_cv_->wait(lock.native());
        --idle_;
      }
      // Shutting down: keep running until the queue is empty, since running
      // tasks may still submit follow-up tasks that must not be lost.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      queued_.store(static_cast<int>(tasks_.size()), std::memory_order_relaxed);
    }
    task();
  }
}

}  // namespace feedline
