// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/shared_ring.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <latch>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "feedline/base/error.h"

namespace feedline {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

std::vector<uint8_t> pattern(std::size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

std::vector<uint8_t> read_bytes(const SharedRing& ring, uint64_t at,
                                std::size_t n) {
  std::vector<uint8_t> out(n);
  ring.read_into(at, n, out.data());
  return out;
}

TEST(SharedRingTest, UnitsRoundTripAcrossTheWrap) {
  auto ring = SharedRing::create(100);
  for (int i = 0; i < 20; ++i) {  // 20 x 45 bytes: wraps many times
    auto a = pattern(30, static_cast<uint8_t>(i));
    auto b = pattern(15, static_cast<uint8_t>(100 + i));
    auto unit = ring->begin_unit();
    const uint64_t pa = unit.write(a.data(), a.size(), nanoseconds::zero());
    const uint64_t pb = unit.write(b.data(), b.size(), nanoseconds::zero());
    EXPECT_EQ(pb, pa + 30);
    auto [start, end] = unit.commit();
    EXPECT_EQ(start, pa);
    EXPECT_EQ(end, pa + 45);
    EXPECT_EQ(ring->used(), 45u);
    EXPECT_EQ(read_bytes(*ring, pa, 30), a);
    Buffer copy = ring->read(pb, DType::kUint8, {15});
    EXPECT_EQ(std::vector<uint8_t>(copy.data_as<uint8_t>(),
                                   copy.data_as<uint8_t>() + 15),
              b);
    ring->release(end);
    EXPECT_EQ(ring->used(), 0u);
  }
}

TEST(SharedRingTest, TwoMappingsSeeOneRing) {
  auto ring = SharedRing::create(64);
  auto other = SharedRing::attach(ring->fd());
  EXPECT_EQ(other->capacity(), 64u);
  auto data = pattern(40, 3);
  auto unit = ring->begin_unit();
  const uint64_t at = unit.write(data.data(), data.size(), nanoseconds::zero());
  unit.commit();
  EXPECT_EQ(read_bytes(*other, at, 40), data);
  other->release(at + 40);
  EXPECT_EQ(ring->used(), 0u);
}

TEST(SharedRingTest, AWriterWaitsForTheReaderToReleaseRoom) {
  auto ring = SharedRing::create(64);
  auto first = pattern(48, 1);
  auto unit = ring->begin_unit();
  const uint64_t at = unit.write(first.data(), 48, nanoseconds::zero());
  const uint64_t end = unit.commit().second;
  // No room for 32 more bytes now, and none is waited for.
  auto second = pattern(32, 2);
  {
    auto u = ring->begin_unit();
    EXPECT_THROW(u.write(second.data(), 32, nanoseconds::zero()), Timeout);
  }
  std::latch started(1);
  std::optional<uint64_t> wrote;
  std::thread writer([&] {
    auto u = ring->begin_unit();
    started.count_down();
    wrote = u.write(second.data(), 32, hours(1));
    u.commit();
  });
  started.wait();
  // The first unit is intact until the reader releases it.
  EXPECT_EQ(read_bytes(*ring, at, 48), first);
  ring->release(end);
  writer.join();
  ASSERT_EQ(wrote, end);
  EXPECT_EQ(read_bytes(*ring, *wrote, 32), second);
}

TEST(SharedRingTest, ShutdownWakesAWaitingWriter) {
  auto ring = SharedRing::create(16);
  auto data = pattern(16, 0);
  auto unit = ring->begin_unit();
  unit.write(data.data(), 16, nanoseconds::zero());
  unit.commit();
  std::latch started(1);
  bool cancelled = false;
  std::thread writer([&] {
    auto u = ring->begin_unit();
    started.count_down();
    try {
      u.write(data.data(), 1, hours(1));
    } catch (const Cancelled&) {
      cancelled = true;
    }
  });
  started.wait();
  ring->shutdown();
  writer.join();
  EXPECT_TRUE(cancelled);
  EXPECT_THROW(ring->begin_unit(), Cancelled);
  EXPECT_EQ(read_bytes(*ring, 0, 16), data);  // what was published stays
}

TEST(SharedRingTest, AnAbortedUnitPublishesNothing) {
  auto ring = SharedRing::create(32);
  auto data = pattern(20, 9);
  {
    auto unit = ring->begin_unit();
    unit.write(data.data(), 20, nanoseconds::zero());
  }  // dropped: aborted
  EXPECT_EQ(ring->used(), 0u);
  EXPECT_THROW(ring->read(0, DType::kUint8, {20}), OutOfRange);
  auto unit = ring->begin_unit();
  EXPECT_EQ(unit.start(), 0u);  // its bytes are reused
}

TEST(SharedRingTest, BadUseIsATypedError) {
  EXPECT_THROW(SharedRing::create(0), InvalidArgument);
  EXPECT_THROW(SharedRing::create(SharedRing::kMaxCapacity + 1),
               InvalidArgument);
  auto ring = SharedRing::create(32);
  auto big = pattern(33, 0);
  auto unit = ring->begin_unit();
  EXPECT_THROW(ring->begin_unit(), InvalidArgument);  // one writer at a time
  EXPECT_THROW(unit.write(big.data(), 33, hours(1)), InvalidArgument);
  unit.write(big.data(), 20, nanoseconds::zero());
  // 20 + 13 bytes would make a unit larger than the ring: never waited for.
  EXPECT_THROW(unit.write(big.data(), 13, hours(1)), InvalidArgument);
  const uint64_t end = unit.commit().second;
  EXPECT_THROW(unit.commit(), InvalidArgument);
  EXPECT_THROW(ring->read(10, DType::kUint8, {11}), OutOfRange);
  EXPECT_THROW(ring->read(0, DType::kUint8, {-1}), InvalidArgument);
  EXPECT_THROW(ring->release(end + 1), OutOfRange);
  ring->release(end);
  ring->release(0);  // behind the tail: nothing
  EXPECT_THROW(ring->read(0, DType::kUint8, {1}), OutOfRange);  // released
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_THROW(SharedRing::attach(fds[0]), InvalidArgument);
  close(fds[0]);
  close(fds[1]);
}

// The counters are shared memory: a reader given a corrupt `published`
// (past the tail by more than the ring) refuses a span longer than the
// ring instead of copying past its end.
TEST(SharedRingTest, AReadLongerThanTheRingIsRefused) {
  auto ring = SharedRing::create(4096);
  // The header: magic, version, reserved, capacity, data_offset, tail,
  // published.
  const uint64_t published = 3 * 4096;
  ASSERT_EQ(pwrite(ring->fd(), &published, 8, 40), 8);
  try {
    ring->read(0, DType::kUint8, {3 * 4096});
    FAIL() << "expected OutOfRange";
  } catch (const OutOfRange& e) {
    EXPECT_NE(std::string(e.what()).find("12288 bytes at position 0"),
              std::string::npos)
        << e.what();
  }
  std::vector<uint8_t> out(4096);
  ring->read_into(0, out.size(), out.data());  // within the ring: read
}

// A writer process that stamps every unit with its index in every byte;
// the reader releases each unit only after checking it, so the writer keeps
// waiting for room. Sizes vary from 1 byte to the whole ring.
TEST(SharedRingTest, AForkedWriterNeverOverwritesWhatIsUnreleased) {
  constexpr std::size_t kCapacity = 4096;
  constexpr int kUnits = 200;
  auto ring = SharedRing::create(kCapacity);
  auto size_of = [](int i) {
    return static_cast<std::size_t>(1 + (i * 977) % kCapacity);
  };
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    int code = 0;
    try {
      auto writer = SharedRing::attach(ring->fd());
      for (int i = 0; i < kUnits; ++i) {
        std::vector<uint8_t> data(size_of(i), static_cast<uint8_t>(i));
        auto unit = writer->begin_unit();
        unit.write(data.data(), data.size(), std::chrono::seconds(30));
        auto span = unit.commit();
        if (write(fds[1], &span, sizeof(span)) != sizeof(span)) code = 3;
      }
    } catch (...) {
      code = 2;
    }
    _exit(code);
  }
  close(fds[1]);
  std::pair<uint64_t, uint64_t> span;
  int seen = 0;
  while (read(fds[0], &span, sizeof(span)) == sizeof(span)) {
    const std::size_t n = span.second - span.first;
    ASSERT_EQ(n, size_of(seen));
    std::vector<uint8_t> got = read_bytes(*ring, span.first, n);
    ASSERT_EQ(got, std::vector<uint8_t>(n, static_cast<uint8_t>(seen)))
        << "unit " << seen;
    ring->release(span.second);
    ++seen;
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(seen, kUnits);
}

}  // namespace
}  // namespace feedline
