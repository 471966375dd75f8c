// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/parallel_copy.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "feedline/base/cpus.h"

namespace feedline {
namespace {

constexpr std::size_t kMaxThreads = 4;
constexpr std::size_t kMinPart = std::size_t{2} << 20;
// Parts start on page boundaries of the destination's offsets.
constexpr std::size_t kPartAlign = 4096;

}  // namespace

std::size_t parallel_copy_parts(std::size_t n, int cpus) {
  if (n < kParallelCopyMin) return 1;
  return std::max<std::size_t>(
      1, std::min({kMaxThreads, n / kMinPart,
                   static_cast<std::size_t>(std::max(cpus, 1))}));
}

void parallel_copy(void* dst, const void* src, std::size_t n) {
  auto* to = static_cast<char*>(dst);
  const auto* from = static_cast<const char*>(src);
  // A small copy does not ask the system for the CPU count.
  const std::size_t parts =
      n < kParallelCopyMin ? 1 : parallel_copy_parts(n, usable_cpus());
  if (parts <= 1) {
    if (n > 0) std::memcpy(to, from, n);
    return;
  }
  const std::size_t part =
      (n / parts + kPartAlign - 1) / kPartAlign * kPartAlign;
  std::vector<std::thread> helpers;
  helpers.reserve(parts - 1);
  // Part 0 is the caller's; parts 1.. go to helpers, or back to the caller
  // when a thread cannot start (a process at its thread limit, or out of
  // memory for the thread's state): the helpers already running must be
  // joined, never left to std::terminate.
  std::size_t inline_from = n;
  for (std::size_t at = part; at < n; at += part) {
    const std::size_t len = std::min(part, n - at);
    try {
      helpers.emplace_back(
          [to, from, at, len] { std::memcpy(to + at, from + at, len); });
    } catch (const std::exception&) {
      inline_from = at;
      break;
    }
  }
  std::memcpy(to, from, std::min(part, n));
  if (inline_from < n)
    std::memcpy(to + inline_from, from + inline_from, n - inline_from);
  for (std::thread& t : helpers) t.join();
}

}  // namespace feedline
