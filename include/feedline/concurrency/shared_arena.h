// SPDX-License-Identifier: Apache-2.0
//
// SharedArena: a pool of equal shared-memory segments that hands large items
// from a writer process to a reader process without copying them out again.
//
// The whole pool is one anonymous file (memfd_create, close-on-exec) mapped
// MAP_SHARED. It has no name, so nothing is ever left behind in /dev/shm,
// whichever process dies: the memory goes when the last mapping and the last
// descriptor of it are gone. Another process maps the same pool with
// attach(fd) on a descriptor it received (inherited over fork, passed over a
// Unix socket with SCM_RIGHTS, as Python's multiprocessing does).
//
// Layout: a header (the first pages) and then `count` segments, each
// page-aligned. The header holds, as lock-free 32-bit atomics (address-free,
// so valid in every mapping), one state word per segment, a shutdown flag,
// and a wake counter that blocked writers sleep on as a process-shared futex
// (FUTEX_WAIT without FUTEX_PRIVATE_FLAG, keyed by the file and offset, so a
// release in one process wakes a writer in another).
//
// A segment's life:
//   kFree --begin_unit()--> kWriting --commit()--> kPublished
//     ^         |  (a Unit dropped uncommitted: abort)      |
//     +---------+                                       adopt()
//     |                                                     v
//     +------ the last holder of the lease is gone ---- kHeld
// The writer copies the item's large parts into its unit with write(),
// commits it and sends the segment number (a few bytes) to the reader by any
// channel. The reader adopt()s the segment and makes zero-copy Buffers of it
// with view(); every view shares the lease, and the segment becomes free
// only when the lease and the last view are gone. Memory is never reused
// under a live view: there is no epoch reset and no recycling by age, so a
// consumer may keep views for as long as it likes (the writer then waits).
//
// Fork: a child inherits the parent's Units and leases, but they stay the
// parent's. Dropping them in the child frees nothing (the parent may still
// read the segment), and an inherited Unit cannot be written or committed.
// Nor does an inherited view hold its segment: once the parent's last view
// is gone the segment may be reused under the child's copy of it, so a
// child copies what it keeps past that (a child that exits without running
// destructors would otherwise hold the segment for good).
//
// A committed segment whose number never reaches a reader stays published;
// the reader discards such units by adopting them and dropping the lease.
// A process killed while writing leaves its segment in kWriting: the pool is
// then one segment smaller until it is made anew (the transport that owns it
// replaces a dead worker's pool with the worker).
//
// Thread safety: every method may be called concurrently from any thread of
// any process mapping the arena. A Unit belongs to one thread at a time.

#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "feedline/base/buffer.h"

namespace feedline {

class SharedArena : public std::enable_shared_from_this<SharedArena> {
  struct Token {};  // makes the constructor callable by make_shared only

 public:
  // The state words of the header.
  enum SegmentState : uint32_t {
    kFree = 0,
    kWriting = 1,
    kPublished = 2,
    kHeld = 3,
  };

  // The most segments one arena has.
  static constexpr std::size_t kMaxSegments = 1 << 16;
  // Offsets returned by Unit::write() are multiples of this.
  static constexpr std::size_t kAlignment = 64;

  class Unit;

  // A new arena of `count` segments of `segment_size` bytes each.
  // Throws: InvalidArgument if a size is 0, `count` > kMaxSegments or the
  // total overflows; IoError if the memory file cannot be made or mapped.
  static std::shared_ptr<SharedArena> create(std::size_t segment_size,
                                             std::size_t count);

  // Maps the arena whose memory file is `fd` (made by create() in this or
  // another process). The arena keeps its own duplicate of `fd`; the caller
  // still owns and closes `fd`.
  // Throws: InvalidArgument if `fd` is not a descriptor of an arena;
  // IoError if it cannot be duplicated or mapped.
  static std::shared_ptr<SharedArena> attach(int fd);

  // Where the segments are, as checked by create() or attach(); never read
  // again from the header, which any process mapping it could change.
  struct Geometry {
    std::size_t segment_size;
    std::size_t count;
    std::size_t stride;       // bytes between segment starts
    std::size_t data_offset;  // where segment 0 starts
  };

  SharedArena(Token, int fd, void* base, std::size_t mapped_bytes,
              const Geometry& geometry);
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;
  ~SharedArena();

  // The descriptor of the memory file (close-on-exec; owned by the arena).
  int fd() const { return fd_; }
  std::size_t segment_size() const { return segment_size_; }
  std::size_t count() const { return count_; }
  // Segments in kFree now, in every process together.
  std::size_t free_segments() const;
  // The state of segment `segment` now. Throws: OutOfRange on a bad index.
  SegmentState state(uint32_t segment) const;

  // Takes a free segment for writing. Waits up to `timeout` for one to free
  // (0: does not wait); the wait sleeps on the futex and wakes when any
  // process frees a segment or calls shutdown().
  // Throws: Timeout if none frees in time; Cancelled after shutdown().
  Unit begin_unit(std::chrono::nanoseconds timeout);

  // Takes over published segment `segment` for reading. Returns the lease,
  // whose pointer is the start of the segment's memory; the segment becomes
  // free (and a waiting writer in any process is woken) when the lease and
  // every Buffer made from it by view() are gone.
  // Throws: OutOfRange on a bad index; InvalidArgument if the segment is
  // not published (free, being written, or already adopted).
  std::shared_ptr<const void> adopt(uint32_t segment);

  // A C-contiguous Buffer of `shape` elements of `dtype` at byte `offset` of
  // the leased segment, keeping the lease alive. Writable: the segment is
  // the reader's alone until it is freed.
  // Throws: InvalidArgument if `lease` is not a lease of this arena, or the
  // shape is negative; OutOfRange if the bytes run past the segment.
  Buffer view(std::shared_ptr<const void> lease, uint64_t offset, DType dtype,
              std::vector<int64_t> shape) const;

  // Wakes every writer waiting in begin_unit() in every process; every later
  // begin_unit() throws Cancelled. Units, leases and views stay valid.
  // Idempotent.
  void shutdown();
  bool is_shutdown() const;

 private:
  struct Header;

  // Takes the lowest free segment (recently freed ones are the likeliest
  // to be resident and cached); returns its index, or -1 when none is free.
  int64_t try_take();
  // Sets `segment` free and wakes waiting writers in every process.
  void release(uint32_t segment);
  std::atomic<uint32_t>& state_word(uint32_t segment) const;
  uint8_t* segment_data(uint32_t segment) const;

  const int fd_;
  uint8_t* const base_;
  const std::size_t mapped_bytes_;
  Header* const header_;
  std::size_t segment_size_ = 0;
  std::size_t count_ = 0;
  std::size_t stride_ = 0;       // bytes between segment starts
  std::size_t data_offset_ = 0;  // where segment 0 starts
};

// The writer's handle of one segment in kWriting. Move-only. Dropping an
// uncommitted Unit aborts it: the segment is free again.
class SharedArena::Unit {
 public:
  Unit(Unit&& other) noexcept;
  Unit& operator=(Unit&& other) noexcept;
  Unit(const Unit&) = delete;
  Unit& operator=(const Unit&) = delete;
  ~Unit();

  uint32_t segment() const { return segment_; }
  // Bytes of the segment used so far (including alignment padding).
  std::size_t used() const { return used_; }
  // False once committed or aborted.
  bool active() const { return arena_ != nullptr; }

  // Copies `n` bytes to the next kAlignment-aligned offset of the segment
  // and returns that offset.
  // Throws: InvalidArgument if the bytes would run past the segment (naming
  // both sizes), the unit is no longer active, or it is a forked child's
  // copy of its parent's unit.
  uint64_t write(const void* data, std::size_t n);

  // Publishes the segment; the writer must not touch it again. Returns the
  // bytes used. Throws: InvalidArgument if the unit is no longer active.
  uint64_t commit();

  // Frees the segment without publishing it. No-op when not active, and in
  // a forked child for a unit of its parent.
  void abort() noexcept;

 private:
  friend class SharedArena;
  Unit(std::shared_ptr<SharedArena> arena, uint32_t segment);
  void check_usable(const char* what) const;

  std::shared_ptr<SharedArena> arena_;
  uint32_t segment_ = 0;
  std::size_t used_ = 0;
  uint64_t generation_ = 0;  // fork_generation() when made
};

}  // namespace feedline
