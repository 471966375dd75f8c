// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/shared_arena.h"

#include <algorithm>
#include <climits>
#include <new>
#include <string>
#include <utility>

#include "concurrency/shared_file.h"
#include "feedline/base/error.h"
#include "feedline/concurrency/fork.h"
#include "feedline/concurrency/parallel_copy.h"

namespace feedline {

// The first bytes of the memory file; the state words follow it. Written
// once by create() before any other process can see the file, then only
// the atomics change.
struct SharedArena::Header {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t segment_size;
  uint64_t count;
  uint64_t stride;
  uint64_t data_offset;
  std::atomic<uint32_t> shutdown;
  std::atomic<uint32_t> wake;     // the futex word; bumped on every release
  std::atomic<uint32_t> waiters;  // writers inside begin_unit()'s wait
  uint32_t reserved2;
};

namespace {

constexpr uint64_t kMagic = 0x616e657261'6c6466ULL;  // "fdlarena"
constexpr uint32_t kVersion = 1;

// Shared across processes, the words must not depend on an address or a
// lock table of one process.
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

using detail::page_size;
using detail::round_up;

const char* state_name(uint32_t state) {
  switch (state) {
    case SharedArena::kFree:
      return "free";
    case SharedArena::kWriting:
      return "being written";
    case SharedArena::kPublished:
      return "published";
    case SharedArena::kHeld:
      return "already adopted";
    default:
      return "corrupt";
  }
}

}  // namespace

std::shared_ptr<SharedArena> SharedArena::create(std::size_t segment_size,
                                                 std::size_t count) {
  fork_generation();  // installs the fork handler before anything is held
  if (segment_size == 0)
    throw InvalidArgument("shared arena: segment_size must be >= 1 (got 0)");
  if (count == 0 || count > kMaxSegments)
    throw InvalidArgument("shared arena: count must be in [1, " +
                          std::to_string(kMaxSegments) + "] (got " +
                          std::to_string(count) + ")");
  const std::size_t page = page_size();
  const std::size_t data_offset =
      round_up(sizeof(Header) + count * sizeof(uint32_t), page);
  std::size_t stride = 0;
  std::size_t total = 0;
  if (segment_size > SIZE_MAX - page ||
      __builtin_mul_overflow(round_up(segment_size, page), count, &stride) ||
      __builtin_add_overflow(stride, data_offset, &total) ||
      total > static_cast<std::size_t>(INT64_MAX))
    throw InvalidArgument("shared arena: " + std::to_string(count) +
                          " segments of " + std::to_string(segment_size) +
                          " bytes overflow the address space");
  stride = round_up(segment_size, page);

  const detail::SharedFile file =
      detail::create_shared_file("shared arena", "feedline-arena", total);
  void* base = file.base;
  // The file starts zeroed: every state word is already kFree.
  auto* header = new (base) Header{};
  header->magic = kMagic;
  header->version = kVersion;
  header->segment_size = segment_size;
  header->count = count;
  header->stride = stride;
  header->data_offset = data_offset;
  auto* states = static_cast<uint8_t*>(base) + sizeof(Header);
  for (std::size_t i = 0; i < count; ++i)
    new (states + i * sizeof(uint32_t)) std::atomic<uint32_t>(kFree);
  return std::make_shared<SharedArena>(
      Token{}, file.fd, base, total,
      Geometry{segment_size, count, stride, data_offset});
}

std::shared_ptr<SharedArena> SharedArena::attach(int fd) {
  fork_generation();
  const detail::SharedFile file = detail::map_shared_file(
      "shared arena", "a shared arena", fd, sizeof(Header));
  const std::size_t total = file.bytes;
  void* base = file.base;
  // One read of each field: the header is shared, and what is checked is
  // what is used. Every product and sum is checked: the sizes come from
  // another process.
  const auto* h = static_cast<const volatile Header*>(base);
  const uint64_t magic = h->magic;
  const uint32_t version = h->version;
  const Geometry g{h->segment_size, h->count, h->stride, h->data_offset};
  const std::size_t page = page_size();
  std::size_t segments_bytes = 0;
  std::size_t end = 0;
  const bool valid =
      magic == kMagic && version == kVersion && g.count >= 1 &&
      g.count <= kMaxSegments && g.segment_size >= 1 &&
      g.segment_size <= total && g.stride == round_up(g.segment_size, page) &&
      g.data_offset == round_up(sizeof(Header) + g.count * 4, page) &&
      !__builtin_mul_overflow(g.stride, g.count, &segments_bytes) &&
      !__builtin_add_overflow(g.data_offset, segments_bytes, &end) &&
      end == total;
  if (!valid) {
    detail::unmap_shared_file(file);
    throw InvalidArgument("shared arena: fd " + std::to_string(fd) +
                          " is not a shared arena (bad header)");
  }
  return std::make_shared<SharedArena>(Token{}, file.fd, base, total, g);
}

SharedArena::SharedArena(Token, int fd, void* base, std::size_t mapped_bytes,
                         const Geometry& geometry)
    : fd_(fd),
      base_(static_cast<uint8_t*>(base)),
      mapped_bytes_(mapped_bytes),
      header_(static_cast<Header*>(base)),
      segment_size_(geometry.segment_size),
      count_(geometry.count),
      stride_(geometry.stride),
      data_offset_(geometry.data_offset) {}

SharedArena::~SharedArena() {
  detail::unmap_shared_file({fd_, base_, mapped_bytes_});
}

std::atomic<uint32_t>& SharedArena::state_word(uint32_t segment) const {
  auto* states =
      reinterpret_cast<std::atomic<uint32_t>*>(base_ + sizeof(Header));
  return states[segment];
}

uint8_t* SharedArena::segment_data(uint32_t segment) const {
  return base_ + data_offset_ + stride_ * segment;
}

std::size_t SharedArena::free_segments() const {
  std::size_t n = 0;
  for (uint32_t i = 0; i < count_; ++i)
    n += state_word(i).load(std::memory_order_relaxed) == kFree ? 1 : 0;
  return n;
}

SharedArena::SegmentState SharedArena::state(uint32_t segment) const {
  if (segment >= count_)
    throw OutOfRange("shared arena: segment " + std::to_string(segment) +
                     " out of range [0, " + std::to_string(count_) + ")");
  return static_cast<SegmentState>(
      state_word(segment).load(std::memory_order_acquire));
}

int64_t SharedArena::try_take() {
  for (uint32_t i = 0; i < count_; ++i) {
    uint32_t expected = kFree;
    if (state_word(i).load(std::memory_order_relaxed) == kFree &&
        state_word(i).compare_exchange_strong(expected, kWriting,
                                              std::memory_order_acquire))
      return i;
  }
  return -1;
}

SharedArena::Unit SharedArena::begin_unit(std::chrono::nanoseconds timeout) {
  int64_t taken = -1;
  const bool ok = detail::wait_shared(
      header_->wake, header_->waiters, deadline_after(timeout),
      [&] { return (taken = try_take()) >= 0; }, [&] { return is_shutdown(); });
  if (ok) return Unit(shared_from_this(), static_cast<uint32_t>(taken));
  if (is_shutdown()) throw Cancelled("shared arena: begin_unit after shutdown");
  throw Timeout("shared arena: no segment freed within " +
                std::to_string(std::chrono::duration<double>(timeout).count()) +
                " s (all " + std::to_string(count_) + " segments of " +
                std::to_string(segment_size_) + " bytes in use)");
}

void SharedArena::release(uint32_t segment) {
  state_word(segment).store(kFree, std::memory_order_release);
  detail::notify_shared(header_->wake, header_->waiters);
}

std::shared_ptr<const void> SharedArena::adopt(uint32_t segment) {
  if (segment >= count_)
    throw OutOfRange("shared arena: adopt: segment " + std::to_string(segment) +
                     " out of range [0, " + std::to_string(count_) + ")");
  uint32_t expected = kPublished;
  if (!state_word(segment).compare_exchange_strong(expected, kHeld,
                                                   std::memory_order_acquire))
    throw InvalidArgument(
        "shared arena: adopt: segment " + std::to_string(segment) +
        " is not published (it is " + state_name(expected) + ")");
  // Frees the segment when the lease and the last view are gone. A copy
  // inherited by a forked child frees nothing: the parent's views still
  // read the segment.
  struct Lease {
    std::shared_ptr<SharedArena> arena;
    uint32_t segment;
    uint64_t generation;
  };
  auto lease = std::shared_ptr<Lease>(
      new Lease{shared_from_this(), segment, fork_generation()}, [](Lease* l) {
        if (!inherited_from_parent(l->generation))
          l->arena->release(l->segment);
        delete l;
      });
  // The aliasing constructor: the pointer is the segment, the owner the
  // lease, so view() can tell which segment a lease is for.
  return {std::move(lease), segment_data(segment)};
}

Buffer SharedArena::view(std::shared_ptr<const void> lease, uint64_t offset,
                         DType dtype, std::vector<int64_t> shape) const {
  const auto* p = static_cast<const uint8_t*>(lease.get());
  const uint8_t* first = base_ + data_offset_;
  if (p == nullptr || p < first || p >= first + stride_ * count_ ||
      static_cast<std::size_t>(p - first) % stride_ != 0)
    throw InvalidArgument(
        "shared arena: view: the lease is not one of this "
        "arena's (adopt() makes leases)");
  uint64_t nbytes = dtype_size(dtype);
  for (const int64_t d : shape) {
    if (d < 0)
      throw InvalidArgument("shared arena: view: negative dimension " +
                            std::to_string(d));
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes))
      nbytes = UINT64_MAX;
  }
  if (offset > segment_size_ || nbytes > segment_size_ - offset)
    throw OutOfRange("shared arena: view: " + std::to_string(nbytes) +
                     " bytes at offset " + std::to_string(offset) +
                     " run past the segment of " +
                     std::to_string(segment_size_) + " bytes");
  auto* data = const_cast<uint8_t*>(p) + offset;
  return Buffer::view(std::move(lease), data, dtype, std::move(shape));
}

void SharedArena::shutdown() {
  header_->shutdown.store(1, std::memory_order_seq_cst);
  detail::notify_shared(header_->wake, header_->waiters);
}

bool SharedArena::is_shutdown() const {
  return header_->shutdown.load(std::memory_order_acquire) != 0;
}

SharedArena::Unit::Unit(std::shared_ptr<SharedArena> arena, uint32_t segment)
    : arena_(std::move(arena)),
      segment_(segment),
      generation_(fork_generation()) {}

SharedArena::Unit::Unit(Unit&& other) noexcept
    : arena_(std::move(other.arena_)),
      segment_(other.segment_),
      used_(other.used_),
      generation_(other.generation_) {}

SharedArena::Unit& SharedArena::Unit::operator=(Unit&& other) noexcept {
  if (this != &other) {
    abort();
    arena_ = std::move(other.arena_);
    segment_ = other.segment_;
    used_ = other.used_;
    generation_ = other.generation_;
  }
  return *this;
}

SharedArena::Unit::~Unit() { abort(); }

void SharedArena::Unit::check_usable(const char* what) const {
  if (arena_ == nullptr)
    throw InvalidArgument(std::string("shared arena: ") + what +
                          ": the unit of segment " + std::to_string(segment_) +
                          " was already committed or aborted");
  if (inherited_from_parent(generation_))
    throw InvalidArgument(std::string("shared arena: ") + what +
                          ": the unit of segment " + std::to_string(segment_) +
                          " belongs to the parent process");
}

uint64_t SharedArena::Unit::write(const void* data, std::size_t n) {
  check_usable("write");
  const std::size_t size = arena_->segment_size_;
  const std::size_t offset = round_up(used_, kAlignment);
  if (offset > size || n > size - offset)
    throw InvalidArgument("shared arena: write: " + std::to_string(n) +
                          " bytes at offset " + std::to_string(offset) +
                          " do not fit in a segment of " +
                          std::to_string(size) + " bytes (the unit holds " +
                          std::to_string(used_) + " bytes already)");
  parallel_copy(arena_->segment_data(segment_) + offset, data, n);
  used_ = offset + n;
  return offset;
}

uint64_t SharedArena::Unit::commit() {
  check_usable("commit");
  arena_->state_word(segment_).store(kPublished, std::memory_order_release);
  arena_.reset();
  return used_;
}

void SharedArena::Unit::abort() noexcept {
  if (arena_ == nullptr) return;
  if (!inherited_from_parent(generation_)) arena_->release(segment_);
  arena_.reset();
}

}  // namespace feedline
