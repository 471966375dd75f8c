// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/shared_arena.h"

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

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "feedline/concurrency/parallel_copy.h"

namespace feedline {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

std::vector<uint8_t> bytes_of(const Buffer& b) {
  return {b.data_as<uint8_t>(), b.data_as<uint8_t>() + b.nbytes()};
}

// Publishes `payload` as one unit; returns its segment.
uint32_t publish(SharedArena& arena, const std::vector<uint8_t>& payload) {
  auto unit = arena.begin_unit(nanoseconds::zero());
  EXPECT_EQ(unit.write(payload.data(), payload.size()), 0u);
  unit.commit();
  return unit.segment();
}

TEST(SharedArenaTest, TwoMappingsSeeOneArena) {
  auto writer = SharedArena::create(4096, 2);
  auto reader = SharedArena::attach(writer->fd());
  EXPECT_NE(reader->fd(), writer->fd());  // attach keeps its own duplicate
  EXPECT_EQ(reader->segment_size(), 4096u);
  EXPECT_EQ(reader->count(), 2u);

  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  const uint32_t segment = publish(*writer, payload);
  EXPECT_EQ(reader->free_segments(), 1u);
  {
    auto lease = reader->adopt(segment);
    Buffer view = reader->view(lease, 0, DType::kUint8, {5});
    lease.reset();
    EXPECT_EQ(bytes_of(view), payload);
    EXPECT_EQ(writer->state(segment), SharedArena::kHeld);
  }
  // The last view is gone: free in both mappings.
  EXPECT_EQ(writer->free_segments(), 2u);
  EXPECT_EQ(reader->free_segments(), 2u);
}

// An item large enough to be copied in parallel parts (parallel_copy)
// arrives whole in the other mapping.
TEST(SharedArenaTest, ALargeItemArrivesWhole) {
  const std::size_t n = kParallelCopyMin * 2 + 4097;
  auto writer = SharedArena::create(n + 64, 1);
  auto reader = SharedArena::attach(writer->fd());
  std::vector<uint8_t> payload(n);
  for (std::size_t i = 0; i < n; ++i)
    payload[i] = static_cast<uint8_t>((i * 2654435761u) >> 11);
  const uint32_t segment = publish(*writer, payload);
  auto lease = reader->adopt(segment);
  Buffer view =
      reader->view(lease, 0, DType::kUint8, {static_cast<int64_t>(n)});
  lease.reset();
  EXPECT_TRUE(bytes_of(view) == payload);
}

TEST(SharedArenaTest, MemoryHasNoNameInDevShm) {
  auto arena = SharedArena::create(1, 1);
  char link[256] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(arena->fd());
  ASSERT_GT(readlink(path.c_str(), link, sizeof(link) - 1), 0);
  EXPECT_EQ(std::string(link).rfind("/memfd:", 0), 0u) << link;
  EXPECT_TRUE(fcntl(arena->fd(), F_GETFD) & FD_CLOEXEC);
}

TEST(SharedArenaTest, SegmentIsFreedOnlyAfterTheLastView) {
  auto arena = SharedArena::create(4096, 1);
  const uint32_t segment = publish(*arena, std::vector<uint8_t>(100, 7));
  auto lease = arena->adopt(segment);
  Buffer a = arena->view(lease, 0, DType::kUint8, {10});
  Buffer b = arena->view(lease, 64, DType::kInt32, {4});
  lease.reset();
  EXPECT_EQ(arena->free_segments(), 0u);
  a = Buffer();
  EXPECT_EQ(arena->free_segments(), 0u);
  EXPECT_THROW(arena->begin_unit(nanoseconds::zero()), Timeout);
  b = Buffer();
  EXPECT_EQ(arena->free_segments(), 1u);
}

TEST(SharedArenaTest, WritesAreAlignedAndCounted) {
  auto arena = SharedArena::create(4096, 1);
  auto unit = arena->begin_unit(nanoseconds::zero());
  const char data[3] = {'a', 'b', 'c'};
  EXPECT_EQ(unit.write(data, 3), 0u);
  EXPECT_EQ(unit.write(data, 3), SharedArena::kAlignment);
  EXPECT_EQ(unit.commit(), SharedArena::kAlignment + 3);
  EXPECT_FALSE(unit.active());
}

TEST(SharedArenaTest, DroppingAnUncommittedUnitAbortsIt) {
  auto arena = SharedArena::create(4096, 2);
  {
    auto unit = arena->begin_unit(nanoseconds::zero());
    unit.write("x", 1);
    auto moved = std::move(unit);
    EXPECT_EQ(arena->free_segments(), 1u);
    EXPECT_EQ(arena->state(moved.segment()), SharedArena::kWriting);
  }
  EXPECT_EQ(arena->free_segments(), 2u);
  auto unit = arena->begin_unit(nanoseconds::zero());
  const uint32_t segment = unit.segment();
  unit.abort();
  EXPECT_EQ(arena->state(segment), SharedArena::kFree);
  EXPECT_THROW(unit.write("x", 1), InvalidArgument);
  EXPECT_THROW(unit.commit(), InvalidArgument);
  EXPECT_THROW(arena->adopt(segment), InvalidArgument);  // never published
}

TEST(SharedArenaTest, TimesOutWithNoFreeSegment) {
  auto arena = SharedArena::create(64, 1);
  auto held = arena->begin_unit(nanoseconds::zero());
  EXPECT_THROW(arena->begin_unit(nanoseconds::zero()), Timeout);
  try {
    arena->begin_unit(milliseconds(5));
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("all 1 segments of 64 bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST(SharedArenaTest, ReleaseWakesABlockedWriter) {
  auto arena = SharedArena::create(64, 1);
  const uint32_t segment = publish(*arena, {1});
  std::latch waiting(1);
  std::optional<uint32_t> got;
  std::thread writer([&] {
    waiting.count_down();
    got = arena->begin_unit(hours(1)).segment();
  });
  waiting.wait();
  arena->adopt(segment).reset();  // frees it; the writer takes it
  writer.join();
  EXPECT_EQ(got, segment);
}

TEST(SharedArenaTest, ShutdownWakesABlockedWriter) {
  auto arena = SharedArena::create(64, 1);
  auto held = arena->begin_unit(nanoseconds::zero());
  std::latch waiting(1);
  bool cancelled = false;
  std::thread writer([&] {
    waiting.count_down();
    try {
      arena->begin_unit(hours(1));
    } catch (const Cancelled&) {
      cancelled = true;
    }
  });
  waiting.wait();
  arena->shutdown();
  writer.join();
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(arena->is_shutdown());
  held.commit();  // units and leases stay usable after shutdown
  EXPECT_EQ(arena->adopt(held.segment()).get() != nullptr, true);
}

TEST(SharedArenaTest, BadArgumentsAreTypedErrors) {
  EXPECT_THROW(SharedArena::create(0, 1), InvalidArgument);
  EXPECT_THROW(SharedArena::create(1, 0), InvalidArgument);
  EXPECT_THROW(SharedArena::create(1, SharedArena::kMaxSegments + 1),
               InvalidArgument);
  EXPECT_THROW(SharedArena::create(SIZE_MAX / 2, 4), InvalidArgument);
  EXPECT_THROW(SharedArena::attach(-1), IoError);
  const int plain = memfd_create("not-an-arena", MFD_CLOEXEC);
  ASSERT_GE(plain, 0);
  ASSERT_EQ(ftruncate(plain, 1 << 16), 0);
  EXPECT_THROW(SharedArena::attach(plain), InvalidArgument);
  close(plain);

  auto arena = SharedArena::create(128, 2);
  EXPECT_THROW(arena->adopt(2), OutOfRange);
  EXPECT_THROW(arena->state(7), OutOfRange);
  EXPECT_THROW(arena->adopt(0), InvalidArgument);  // free, not published
  auto unit = arena->begin_unit(nanoseconds::zero());
  unit.write(std::vector<uint8_t>(100).data(), 100);
  try {
    unit.write(std::vector<uint8_t>(100).data(), 100);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("100 bytes at offset 128 do not fit "
                                         "in a segment of 128 bytes"),
              std::string::npos)
        << e.what();
  }
  unit.commit();
  auto lease = arena->adopt(unit.segment());
  EXPECT_THROW(arena->adopt(unit.segment()), InvalidArgument);  // adopted
  EXPECT_THROW(arena->view(lease, 64, DType::kUint8, {65}), OutOfRange);
  EXPECT_THROW(arena->view(lease, 129, DType::kUint8, {0}), OutOfRange);
  EXPECT_THROW(arena->view(lease, 0, DType::kFloat64, {-1}), InvalidArgument);
  EXPECT_THROW(arena->view(lease, 0, DType::kUint8, {INT64_MAX, 4}),
               OutOfRange);
  auto other = SharedArena::attach(arena->fd());
  EXPECT_THROW(other->view(lease, 0, DType::kUint8, {1}), InvalidArgument);
  EXPECT_THROW(arena->view(nullptr, 0, DType::kUint8, {1}), InvalidArgument);
}

// The header is in memory every process mapping the arena can write: a
// corrupt one is refused by attach(), including sizes whose product wraps
// (2^48-byte segments x 65,536 = 2^64, i.e. 0, the file's size past the
// header), and attach() never reads a size it did not check.
TEST(SharedArenaTest, AttachRefusesAHeaderWhoseSizesOverflow) {
  auto arena = SharedArena::create(4096, 2);
  const int fd = arena->fd();
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t count = SharedArena::kMaxSegments;
  const uint64_t segment = uint64_t{1} << 48;
  // The header: magic, version, reserved, then segment_size, count,
  // stride, data_offset (64 bytes with its atomics).
  const uint64_t data_offset = (64 + count * 4 + page - 1) / page * page;
  ASSERT_EQ(pwrite(fd, &segment, 8, 16), 8);
  ASSERT_EQ(pwrite(fd, &count, 8, 24), 8);
  ASSERT_EQ(pwrite(fd, &segment, 8, 32), 8);
  ASSERT_EQ(pwrite(fd, &data_offset, 8, 40), 8);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(data_offset)), 0);
  try {
    SharedArena::attach(fd);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is not a shared arena (bad header)"),
              std::string::npos)
        << e.what();
  }
}

// Runs `child` in a forked child; returns its exit status (0: passed).
template <typename F>
int in_child(F child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = -1;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(SharedArenaTest, AForkedChildDroppingInheritedHoldsFreesNothing) {
  auto arena = SharedArena::create(4096, 2);
  const uint32_t published = publish(*arena, std::vector<uint8_t>(64, 9));
  auto lease = arena->adopt(published);
  std::optional<Buffer> view = arena->view(lease, 0, DType::kUint8, {64});
  std::optional<SharedArena::Unit> unit =
      arena->begin_unit(nanoseconds::zero());
  const uint32_t writing = unit->segment();

  EXPECT_EQ(in_child([&] {
              try {
                unit->write("x", 1);  // the parent's unit
                return 1;
              } catch (const InvalidArgument&) {
              }
              unit.reset();
              view.reset();
              lease.reset();
              return arena->state(published) == SharedArena::kHeld &&
                             arena->state(writing) == SharedArena::kWriting
                         ? 0
                         : 2;
            }),
            0);
  EXPECT_EQ(arena->state(published), SharedArena::kHeld);
  EXPECT_EQ(arena->state(writing), SharedArena::kWriting);
  EXPECT_EQ((*view).data_as<uint8_t>()[63], 9);
  unit.reset();
  view.reset();
  lease.reset();
  EXPECT_EQ(arena->free_segments(), 2u);
}

// --- A writer process --------------------------------------------------------

// Messages from the forked writer to the reading parent.
struct Message {
  enum Kind : uint32_t { kUnit, kFull, kDone, kFailed } kind;
  uint32_t segment;
  uint64_t index;
};

constexpr std::size_t kPayloadWords = 1000;

// Unit `index`: its index, a pattern, then the sum of both.
std::vector<uint64_t> stamped(uint64_t index) {
  std::vector<uint64_t> words(kPayloadWords);
  words[0] = index;
  for (std::size_t i = 1; i + 1 < words.size(); ++i)
    words[i] = index * 1000003 + i;
  words.back() = std::accumulate(words.begin(), words.end() - 1, uint64_t{0});
  return words;
}

bool verify(const Buffer& view, uint64_t index) {
  const auto* words = view.data_as<const uint64_t>();
  const auto expected = stamped(index);
  return std::memcmp(words, expected.data(), expected.size() * 8) == 0;
}

// The child: attaches to the arena by descriptor and writes `units` units.
// Before each it tries not to wait; when every segment is taken it says so
// and then waits for the parent to free one. Never returns.
[[noreturn]] void write_units(int fd, int out, uint64_t units) {
  auto send = [&](Message m) {
    if (::write(out, &m, sizeof(m)) != sizeof(m)) _exit(3);
  };
  try {
    auto arena = SharedArena::attach(fd);
    for (uint64_t i = 0; i < units; ++i) {
      std::optional<SharedArena::Unit> unit;
      try {
        unit.emplace(arena->begin_unit(nanoseconds::zero()));
      } catch (const Timeout&) {
        send({Message::kFull, 0, i});
        unit.emplace(arena->begin_unit(hours(1)));
      }
      const auto words = stamped(i);
      unit->write(words.data(), words.size() * sizeof(uint64_t));
      unit->commit();
      send({Message::kUnit, unit->segment(), i});
    }
    send({Message::kDone, 0, units});
    _exit(0);
  } catch (...) {
    send({Message::kFailed, 0, 0});
    _exit(2);
  }
}

TEST(SharedArenaTest, ForkedWriterWaitsForTheReaderAndNeverOverwritesAView) {
  constexpr uint64_t kUnits = 12;
  constexpr std::size_t kSegments = 3;
  auto arena = SharedArena::create(kPayloadWords * sizeof(uint64_t), kSegments);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    write_units(arena->fd(), fds[1], kUnits);
  }
  close(fds[1]);

  // Units 0 and 1 are kept to the end; every later one is held until the
  // writer says it is blocked, then dropped.
  std::vector<Buffer> kept;
  std::optional<Buffer> latest;
  uint64_t next = 0;
  int full = 0;
  Message m{};
  while (read(fds[0], &m, sizeof(m)) == sizeof(m) && m.kind != Message::kDone) {
    ASSERT_NE(m.kind, Message::kFailed);
    if (m.kind == Message::kFull) {
      ++full;
      EXPECT_EQ(arena->free_segments(), 0u);
      ASSERT_TRUE(latest.has_value());
      for (std::size_t i = 0; i < kept.size(); ++i)
        EXPECT_TRUE(verify(kept[i], i));
      EXPECT_TRUE(verify(*latest, next - 1));
      latest.reset();  // frees its segment: the writer resumes
      continue;
    }
    ASSERT_EQ(m.index, next++);
    Buffer view = arena->view(arena->adopt(m.segment), 0, DType::kUint64,
                              {static_cast<int64_t>(kPayloadWords)});
    ASSERT_TRUE(verify(view, m.index));
    if (kept.size() < 2) {
      kept.push_back(std::move(view));
    } else {
      ASSERT_FALSE(latest.has_value());
      latest = std::move(view);
    }
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(next, kUnits);
  // Units 3..11 each found every segment taken.
  EXPECT_EQ(full, static_cast<int>(kUnits - kSegments));
  for (std::size_t i = 0; i < kept.size(); ++i) EXPECT_TRUE(verify(kept[i], i));
}

}  // namespace
}  // namespace feedline
