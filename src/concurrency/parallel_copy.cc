// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/parallel_copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "feedline/base/cpus.h"

namespace feedline {
namespace {

constexpr std::size_t kMaxThreads = 4;
constexpr std::size_t kMinPart = std::size_t{2} << 20;
// What a thread claims at a time: large enough that claiming costs nothing
// next to the copy, small enough that a late helper's share is taken over
// in time. Chunks start on page boundaries of the offsets.
constexpr std::size_t kChunk = std::size_t{512} << 10;

}  // namespace

std::size_t parallel_copy_parts(std::size_t n, int cpus) {
  if (n < kParallelCopyMin) return 1;
  return std::max<std::size_t>(
      1, std::min({kMaxThreads, n / kMinPart,
                   static_cast<std::size_t>(std::max(cpus, 1))}));
}

void parallel_copy(void* dst, const void* src, std::size_t n) {
  // A small copy does not ask the system for the CPU count.
  const std::size_t threads =
      n < kParallelCopyMin ? 1 : parallel_copy_parts(n, usable_cpus());
  if (threads <= 1) {
    if (n > 0) std::memcpy(dst, src, n);
    return;
  }
  detail::parallel_copy_on(dst, src, n, threads, nullptr);
}

namespace detail {

std::size_t parallel_copy_on(void* dst, const void* src, std::size_t n,
                             std::size_t threads,
                             const ParallelCopyHooks* hooks) {
  auto* to = static_cast<char*>(dst);
  const auto* from = static_cast<const char*>(src);
  std::atomic<std::size_t> next{0};
  // Copies chunks until none is left; returns the bytes it copied.
  auto drain = [&]() {
    std::size_t copied = 0;
    for (;;) {
      const std::size_t at = next.fetch_add(kChunk, std::memory_order_relaxed);
      if (at >= n) return copied;
      const std::size_t len = std::min(kChunk, n - at);
      std::memcpy(to + at, from + at, len);
      copied += len;
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(threads > 0 ? threads - 1 : 0);
  // A thread that cannot start (a process at its thread limit, or out of
  // memory for the thread's state) leaves its chunks to the others; the
  // helpers already running must be joined, never left to std::terminate.
  for (std::size_t i = 1; i < threads; ++i) {
    try {
      helpers.emplace_back([&drain, hooks] {
        if (hooks != nullptr && hooks->before_helper) hooks->before_helper();
        drain();
      });
    } catch (const std::exception&) {
      break;
    }
  }
  const std::size_t mine = drain();
  if (hooks != nullptr && hooks->after_caller) hooks->after_caller();
  for (std::thread& t : helpers) t.join();
  return mine;
}

}  // namespace detail
}  // namespace feedline
