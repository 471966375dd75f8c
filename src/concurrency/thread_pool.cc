// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/thread_pool.h"

#include <atomic>
#include <string>
#include <utility>

#include <pthread.h>

#include "feedline/base/error.h"
#include "feedline/concurrency/spin_wait.h"

namespace feedline {
namespace {

thread_local const ThreadPool* t_current_pool = nullptr;
std::atomic<int> g_live_threads{0};

}  // namespace

ThreadPool::ThreadPool(int num_threads, std::string name_prefix)
    : name_prefix_(std::move(name_prefix)) {
  if (num_threads < 1) {
    throw InvalidArgument("num_threads must be >= 1 (got " +
                          std::to_string(num_threads) + ")");
  }
  threads_.reserve(static_cast<std::size_t>(num_threads));
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this, i] { run_worker(i); });
  }
}

ThreadPool::~ThreadPool() { shutdown(); }

void ThreadPool::shutdown() {
  MutexLock join_lock(join_mu_);
  {
    MutexLock lock(mu_);
    if (joined_) return;
    shutting_down_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
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
  if (wake) work_cv_.notify_one();
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
        work_cv_.wait(lock.native());
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
