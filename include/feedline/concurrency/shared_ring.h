// SPDX-License-Identifier: Apache-2.0
//
// SharedRing: a byte ring in shared memory that hands items of any size (up
// to its capacity) from one writer process to one reader process, which
// copies them out.
//
// Where SharedArena gives the reader zero-copy views and needs a segment as
// large as the largest item for every item in flight, a ring needs only as
// many bytes as are in flight: items of very different sizes share it, and
// the reader owns private copies (writable, free of any lifetime rule).
//
// The ring is one anonymous memory file (memfd_create), as SharedArena's:
// nothing is ever left in /dev/shm. Positions are absolute byte counts since
// the ring was made (64-bit, never wrapping); position p lives at byte
// p % capacity of the data. The header holds, as lock-free atomics:
//   tail:      bytes the reader has released; the writer may reuse below it
//   published: the end of the last committed unit
//   writing:   1 while a writer holds a unit (one at a time)
//   shutdown, and a futex word that writers waiting for room sleep on.
//
// A unit is one item: the writer begin_unit()s, write()s its binaries (each
// write waits until the reader has released enough bytes, so a unit may be
// larger than the free space when it starts, but never than the capacity),
// and commit()s, which publishes it and returns its [start, end) span. The
// span travels to the reader by any channel. The reader copies the binaries
// out with read() and then release()s the span's end; units are released in
// the order they were written (a unit that will never be read is released
// unread).
//
// Thread safety: any method from any thread of any process mapping the
// ring; a Unit belongs to one thread at a time.

#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "feedline/base/buffer.h"

namespace feedline {

class SharedRing : public std::enable_shared_from_this<SharedRing> {
  struct Token {};  // makes the constructor callable by make_shared only

 public:
  class Unit;

  // The most bytes a ring holds (1 TiB).
  static constexpr std::size_t kMaxCapacity = std::size_t{1} << 40;

  // A new ring of `capacity` bytes.
  // Throws: InvalidArgument if `capacity` is 0 or over kMaxCapacity;
  // IoError if the memory file cannot be made or mapped.
  static std::shared_ptr<SharedRing> create(std::size_t capacity);

  // Maps the ring whose memory file is `fd` (the ring keeps a duplicate).
  // Throws: InvalidArgument if `fd` is not a ring's; IoError.
  static std::shared_ptr<SharedRing> attach(int fd);

  // `capacity` and `data_offset`: as checked by create() or attach(), never
  // read again from the header, which any process mapping it could change.
  SharedRing(Token, int fd, void* base, std::size_t mapped_bytes,
             std::size_t capacity, std::size_t data_offset);
  SharedRing(const SharedRing&) = delete;
  SharedRing& operator=(const SharedRing&) = delete;
  ~SharedRing();

  int fd() const { return fd_; }
  std::size_t capacity() const { return capacity_; }
  // Bytes not yet released by the reader (written or in flight).
  std::size_t used() const;

  // Starts a unit. Throws: Cancelled after shutdown(); InvalidArgument if
  // another unit is being written (one writer at a time).
  Unit begin_unit();

  // A private copy of `shape` elements of `dtype` at position `offset`.
  // Throws: OutOfRange unless the bytes lie within what is published and
  // not yet released; InvalidArgument on a negative dimension.
  Buffer read(uint64_t offset, DType dtype, std::vector<int64_t> shape) const;
  // Copies `n` bytes at position `offset` to `out` (checked as read()).
  void read_into(uint64_t offset, std::size_t n, void* out) const;

  // Frees everything before position `end` (the end of a unit's span) for
  // the writer, waking it. Releasing less than already released is a no-op.
  // Throws: OutOfRange if `end` is past what is published.
  void release(uint64_t end);

  // Wakes every writer waiting for room; later waits throw Cancelled.
  void shutdown();
  bool is_shutdown() const;

 private:
  struct Header;
  void check_readable(uint64_t offset, std::size_t n) const;
  uint8_t* data() const;

  const int fd_;
  uint8_t* const base_;
  const std::size_t mapped_bytes_;
  Header* const header_;
  std::size_t capacity_ = 0;
  std::size_t data_offset_ = 0;
};

// The writer's handle of one unit. Move-only; dropping an uncommitted unit
// aborts it (nothing is published, its bytes are reused).
class SharedRing::Unit {
 public:
  Unit(Unit&& other) noexcept;
  Unit& operator=(Unit&& other) noexcept;
  Unit(const Unit&) = delete;
  Unit& operator=(const Unit&) = delete;
  ~Unit();

  bool active() const { return ring_ != nullptr; }
  uint64_t start() const { return start_; }
  // Bytes written so far.
  uint64_t size() const { return pos_ - start_; }

  // Copies `n` bytes into the ring after the unit's last ones, waiting up to
  // `timeout` for the reader to release room. Returns their position.
  // Throws: InvalidArgument if the unit would exceed the capacity (naming
  // both) or is not active; Timeout; Cancelled after shutdown().
  uint64_t write(const void* data, std::size_t n,
                 std::chrono::nanoseconds timeout);

  // Publishes the unit; returns its span [start, end).
  // Throws: InvalidArgument if not active.
  std::pair<uint64_t, uint64_t> commit();

  void abort() noexcept;

 private:
  friend class SharedRing;
  Unit(std::shared_ptr<SharedRing> ring, uint64_t start);

  std::shared_ptr<SharedRing> ring_;
  uint64_t start_ = 0;
  uint64_t pos_ = 0;
  uint64_t generation_ = 0;  // fork_generation() when made
};

}  // namespace feedline
