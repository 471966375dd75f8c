// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/parallel_copy.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#define FEEDLINE_STREAMING_STORES 1
#endif

#include "feedline/base/cpus.h"

namespace feedline {
namespace {

constexpr std::size_t kMaxThreads = 4;
constexpr std::size_t kMinPart = std::size_t{2} << 20;
// What a thread claims at a time: large enough that claiming costs nothing
// next to the copy, small enough that a late helper's share is taken over
// in time. Chunks start on page boundaries of the offsets.
constexpr std::size_t kChunk = std::size_t{512} << 10;

std::size_t read_last_level_cache() {
  int best_level = 0;
  std::size_t best = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" +
                            std::to_string(index) + "/";
    std::ifstream level_file(dir + "level");
    std::ifstream size_file(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    if (level > best_level) {
      best_level = level;
      best = detail::parse_cache_size(size);
    }
  }
  if (best > 0) return best;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return static_cast<std::size_t>(l3);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<std::size_t>(l2) : 0;
}

}  // namespace

std::size_t last_level_cache_bytes() {
  static const std::size_t kBytes = read_last_level_cache();
  return kBytes;
}

bool parallel_copy_streams(std::size_t n, std::size_t cache_bytes) {
#ifdef FEEDLINE_STREAMING_STORES
  return cache_bytes > 0 && n >= cache_bytes / 2;
#else
  (void)n;
  (void)cache_bytes;
  return false;
#endif
}

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
  // A copy below half of any real cache does not read sysfs either.
  const bool streaming = n >= (std::size_t{1} << 20) &&
                         parallel_copy_streams(n, last_level_cache_bytes());
  if (threads <= 1) {
    detail::copy_part(dst, src, n, streaming);
    return;
  }
  detail::parallel_copy_on(dst, src, n, threads, nullptr, streaming);
}

namespace detail {

std::size_t parse_cache_size(const std::string& text) {
  std::size_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    value = value * 10 + static_cast<std::size_t>(text[i] - '0');
  if (i == 0) return 0;
  if (i < text.size() && text[i] == 'K') return value << 10;
  if (i < text.size() && text[i] == 'M') return value << 20;
  if (i < text.size() && text[i] == 'G') return value << 30;
  return value;
}

void copy_part(void* dst, const void* src, std::size_t n, bool streaming) {
  if (n == 0) return;
#ifdef FEEDLINE_STREAMING_STORES
  if (streaming) {
    auto* to = static_cast<char*>(dst);
    const auto* from = static_cast<const char*>(src);
    // Ordinary stores up to the destination's first 16-byte boundary, then
    // 64 bytes a step, then the tail.
    const std::size_t head =
        std::min(n, (16 - (reinterpret_cast<std::uintptr_t>(to) & 15)) &
                        std::size_t{15});
    std::memcpy(to, from, head);
    std::size_t i = head;
    for (; i + 64 <= n; i += 64) {
      const auto* s = reinterpret_cast<const __m128i*>(from + i);
      auto* d = reinterpret_cast<__m128i*>(to + i);
      const __m128i a = _mm_loadu_si128(s);
      const __m128i b = _mm_loadu_si128(s + 1);
      const __m128i c = _mm_loadu_si128(s + 2);
      const __m128i e = _mm_loadu_si128(s + 3);
      _mm_stream_si128(d, a);
      _mm_stream_si128(d + 1, b);
      _mm_stream_si128(d + 2, c);
      _mm_stream_si128(d + 3, e);
    }
    std::memcpy(to + i, from + i, n - i);
    _mm_sfence();
    return;
  }
#else
  (void)streaming;
#endif
  std::memcpy(dst, src, n);
}

std::size_t parallel_copy_on(void* dst, const void* src, std::size_t n,
                             std::size_t threads,
                             const ParallelCopyHooks* hooks, bool streaming) {
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
      copy_part(to + at, from + at, len, streaming);
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
