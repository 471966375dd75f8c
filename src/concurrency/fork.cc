// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/fork.h"

#include <atomic>

#include <pthread.h>

namespace feedline {
namespace detail {
// Reset in the child by the handler (the forking thread may be a pool
// thread: an op that forks). Defined in thread_pool.cc.
void forget_current_pool_after_fork() noexcept;
}  // namespace detail

namespace {

std::atomic<uint64_t> g_generation{0};

void on_fork_child() {
  g_generation.fetch_add(1, std::memory_order_relaxed);
  detail::forget_current_pool_after_fork();
}

bool install_handler() {
  pthread_atfork(nullptr, nullptr, &on_fork_child);
  return true;
}

}  // namespace

uint64_t fork_generation() {
  static const bool kInstalled = install_handler();
  (void)kInstalled;
  return g_generation.load(std::memory_order_relaxed);
}

}  // namespace feedline
