// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/parallel_copy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <vector>

#include <gtest/gtest.h>

namespace feedline {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Bytes that differ from their neighbours and from the same offset of the
// next page, so that a part copied to the wrong place shows.
uint8_t byte_at(std::size_t i) {
  return static_cast<uint8_t>((i * 2654435761u) >> 13);
}

// Every byte arrives, at every size around the thresholds and at offsets
// that put the parts off page boundaries, and nothing around the
// destination is written.
TEST(ParallelCopyTest, CopiesEveryByteAndNothingElse) {
  constexpr std::size_t kGuard = 64;
  for (const std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{4095}, kParallelCopyMin - 1,
        kParallelCopyMin, kParallelCopyMin + 4097, kParallelCopyMin * 2 + 3}) {
    for (const std::size_t shift : {std::size_t{0}, std::size_t{3}}) {
      std::vector<uint8_t> src(n + shift);
      for (std::size_t i = 0; i < n; ++i) src[shift + i] = byte_at(i);
      std::vector<uint8_t> dst(n + 2 * kGuard, 0xA5);
      parallel_copy(dst.data() + kGuard + shift % 2, src.data() + shift, n);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += dst[kGuard + shift % 2 + i] != byte_at(i) ? 1 : 0;
      EXPECT_EQ(wrong, 0u) << n << " bytes, shift " << shift;
      for (std::size_t i = 0; i < kGuard + shift % 2; ++i)
        ASSERT_EQ(dst[i], 0xA5) << "before, " << n << " bytes";
      for (std::size_t i = kGuard + shift % 2 + n; i < dst.size(); ++i)
        ASSERT_EQ(dst[i], 0xA5) << "after, " << n << " bytes";
    }
  }
}

// Small copies stay on the calling thread; large ones take one thread per
// CPU, up to 4, each with at least 2 MiB.
TEST(ParallelCopyTest, PartsFollowTheSizeAndTheCpus) {
  EXPECT_EQ(parallel_copy_parts(kMiB, 8), 1u);
  EXPECT_EQ(parallel_copy_parts(kParallelCopyMin - 1, 8), 1u);
  EXPECT_EQ(parallel_copy_parts(kParallelCopyMin, 8), 2u);
  EXPECT_EQ(parallel_copy_parts(16 * kMiB, 2), 2u);
  EXPECT_EQ(parallel_copy_parts(16 * kMiB, 8), 4u);
  EXPECT_EQ(parallel_copy_parts(16 * kMiB, 1), 1u);
  EXPECT_EQ(parallel_copy_parts(16 * kMiB, 0), 1u);
  EXPECT_EQ(parallel_copy_parts(6 * kMiB, 8), 3u);
}

// A helper that starts late takes nothing: the caller claims every chunk
// it finds left, and the call ends as soon as the bytes are all copied. The
// helper is held until the caller has found no chunk left; with fixed
// parts the caller would have left the helper's half for it.
TEST(ParallelCopyTest, TheCallerTakesTheChunksOfALateHelper) {
  const std::size_t n = kParallelCopyMin + 5;
  std::vector<uint8_t> src(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = byte_at(i);
  std::vector<uint8_t> dst(n, 0);
  std::latch caller_done(1);
  detail::ParallelCopyHooks hooks;
  hooks.before_helper = [&] { caller_done.wait(); };
  hooks.after_caller = [&] { caller_done.count_down(); };
  EXPECT_EQ(detail::parallel_copy_on(dst.data(), src.data(), n, 2, &hooks), n);
  EXPECT_EQ(dst, src);
}

// With helpers that start at once, the chunks are shared and still every
// byte arrives exactly once, whatever the number of threads.
TEST(ParallelCopyTest, AnyNumberOfThreadsCopiesEveryByte) {
  const std::size_t n = 5 * kMiB + 123;
  std::vector<uint8_t> src(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = byte_at(i);
  for (const std::size_t threads : {1, 2, 3, 7}) {
    std::vector<uint8_t> dst(n, 0);
    const std::size_t mine =
        detail::parallel_copy_on(dst.data(), src.data(), n, threads, nullptr);
    EXPECT_LE(mine, n);
    EXPECT_EQ(dst, src) << threads << " threads";
  }
}

// The streaming copy writes every byte and nothing around them, whatever
// the alignment of either side (its 64-byte steps start at the
// destination's first 16-byte boundary) and whatever tail is left.
TEST(ParallelCopyTest, StreamingStoresCopyEveryByteAtEveryAlignment) {
  constexpr std::size_t kGuard = 64;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15},
                              std::size_t{16}, std::size_t{63}, std::size_t{64},
                              std::size_t{65}, std::size_t{4095}, kMiB + 77}) {
    for (std::size_t to_shift = 0; to_shift < 17; to_shift += 3) {
      for (std::size_t from_shift = 0; from_shift < 3; ++from_shift) {
        std::vector<uint8_t> src(n + from_shift);
        for (std::size_t i = 0; i < n; ++i) src[from_shift + i] = byte_at(i);
        std::vector<uint8_t> dst(n + 2 * kGuard + to_shift, 0xA5);
        uint8_t* at = dst.data() + kGuard + to_shift;
        detail::copy_part(at, src.data() + from_shift, n, true);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i)
          wrong += at[i] != byte_at(i) ? 1 : 0;
        ASSERT_EQ(wrong, 0u)
            << n << " bytes, to +" << to_shift << ", from +" << from_shift;
        for (std::size_t i = 0; i < kGuard + to_shift; ++i)
          ASSERT_EQ(dst[i], 0xA5) << "before, " << n << " bytes";
        for (std::size_t i = kGuard + to_shift + n; i < dst.size(); ++i)
          ASSERT_EQ(dst[i], 0xA5) << "after, " << n << " bytes";
      }
    }
  }
}

// Threads sharing a streaming copy still deliver every byte once.
TEST(ParallelCopyTest, ThreadsShareAStreamingCopy) {
  const std::size_t n = 5 * kMiB + 45;
  std::vector<uint8_t> src(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = byte_at(i);
  for (const std::size_t threads : {1, 3}) {
    std::vector<uint8_t> dst(n + 1, 0);
    detail::parallel_copy_on(dst.data() + 1, src.data(), n, threads, nullptr,
                             true);
    EXPECT_EQ(dst[0], 0);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 1))
        << threads << " threads";
  }
}

// Streaming stores from half the last-level cache up, on x86-64 only, and
// never where the cache size is unknown.
TEST(ParallelCopyTest, CopiesOfHalfTheCacheStream) {
#if defined(__x86_64__)
  EXPECT_TRUE(parallel_copy_streams(4 * kMiB, 8 * kMiB));
  EXPECT_TRUE(parallel_copy_streams(16 * kMiB, 8 * kMiB));
#else
  EXPECT_FALSE(parallel_copy_streams(4 * kMiB, 8 * kMiB));
#endif
  EXPECT_FALSE(parallel_copy_streams(4 * kMiB - 1, 8 * kMiB));
  EXPECT_FALSE(parallel_copy_streams(16 * kMiB, 64 * kMiB));
  EXPECT_FALSE(parallel_copy_streams(std::size_t{1} << 40, 0));
  EXPECT_EQ(last_level_cache_bytes(), last_level_cache_bytes());
}

TEST(ParallelCopyTest, CacheSizesReadAsSysfsWritesThem) {
  EXPECT_EQ(detail::parse_cache_size("8192K"), 8 * kMiB);
  EXPECT_EQ(detail::parse_cache_size("32M"), 32 * kMiB);
  EXPECT_EQ(detail::parse_cache_size("1G"), 1024 * kMiB);
  EXPECT_EQ(detail::parse_cache_size("1024"), 1024u);
  EXPECT_EQ(detail::parse_cache_size(""), 0u);
  EXPECT_EQ(detail::parse_cache_size("K"), 0u);
}

}  // namespace
}  // namespace feedline
