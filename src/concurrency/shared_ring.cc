// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/shared_ring.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "concurrency/shared_file.h"
#include "feedline/base/error.h"
#include "feedline/concurrency/fork.h"

namespace feedline {

// The first bytes of the memory file; the data starts at data_offset.
struct SharedRing::Header {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t capacity;
  uint64_t data_offset;
  std::atomic<uint64_t> tail;
  std::atomic<uint64_t> published;
  std::atomic<uint32_t> writing;
  std::atomic<uint32_t> shutdown;
  std::atomic<uint32_t> wake;     // the futex word; bumped on every release
  std::atomic<uint32_t> waiters;  // writers waiting for room
};

namespace {

constexpr uint64_t kMagic = 0x676e6972'6c6466ULL;  // "fdlring"
constexpr uint32_t kVersion = 1;

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

std::string bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

}  // namespace

std::shared_ptr<SharedRing> SharedRing::create(std::size_t capacity) {
  fork_generation();  // installs the fork handler before anything is held
  if (capacity == 0 || capacity > kMaxCapacity)
    throw InvalidArgument("shared ring: capacity must be in [1, 2^40] (got " +
                          std::to_string(capacity) + ")");
  const std::size_t data_offset =
      detail::round_up(sizeof(Header), detail::page_size());
  const std::size_t total =
      data_offset + detail::round_up(capacity, detail::page_size());
  const detail::SharedFile file =
      detail::create_shared_file("shared ring", "feedline-ring", total);
  // The file starts zeroed: every counter is already 0.
  auto* header = new (file.base) Header{};
  header->magic = kMagic;
  header->version = kVersion;
  header->capacity = capacity;
  header->data_offset = data_offset;
  return std::make_shared<SharedRing>(Token{}, file.fd, file.base, total,
                                      capacity, data_offset);
}

std::shared_ptr<SharedRing> SharedRing::attach(int fd) {
  fork_generation();
  const detail::SharedFile file = detail::map_shared_file(
      "shared ring", "a shared ring", fd, sizeof(Header));
  // One read of each field: the header is shared, and what is checked is
  // what is used.
  const auto* h = static_cast<const volatile Header*>(file.base);
  const uint64_t magic = h->magic;
  const uint32_t version = h->version;
  const uint64_t capacity = h->capacity;
  const uint64_t data_offset = h->data_offset;
  const std::size_t page = detail::page_size();
  const bool valid =
      magic == kMagic && version == kVersion && capacity >= 1 &&
      capacity <= kMaxCapacity &&
      data_offset == detail::round_up(sizeof(Header), page) &&
      data_offset + detail::round_up(capacity, page) == file.bytes;
  if (!valid) {
    detail::unmap_shared_file(file);
    throw InvalidArgument("shared ring: fd " + std::to_string(fd) +
                          " is not a shared ring (bad header)");
  }
  return std::make_shared<SharedRing>(Token{}, file.fd, file.base, file.bytes,
                                      capacity, data_offset);
}

SharedRing::SharedRing(Token, int fd, void* base, std::size_t mapped_bytes,
                       std::size_t capacity, std::size_t data_offset)
    : fd_(fd),
      base_(static_cast<uint8_t*>(base)),
      mapped_bytes_(mapped_bytes),
      header_(static_cast<Header*>(base)),
      capacity_(capacity),
      data_offset_(data_offset) {}

SharedRing::~SharedRing() {
  detail::unmap_shared_file({fd_, base_, mapped_bytes_});
}

uint8_t* SharedRing::data() const { return base_ + data_offset_; }

std::size_t SharedRing::used() const {
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  const uint64_t published = header_->published.load(std::memory_order_acquire);
  return published - std::min(tail, published);
}

SharedRing::Unit SharedRing::begin_unit() {
  if (is_shutdown()) throw Cancelled("shared ring: begin_unit after shutdown");
  uint32_t expected = 0;
  if (!header_->writing.compare_exchange_strong(expected, 1,
                                                std::memory_order_acquire))
    throw InvalidArgument(
        "shared ring: begin_unit: another unit is being written (a ring has "
        "one writer at a time)");
  return Unit(shared_from_this(),
              header_->published.load(std::memory_order_acquire));
}

void SharedRing::check_readable(uint64_t offset, std::size_t n) const {
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  const uint64_t published = header_->published.load(std::memory_order_acquire);
  // A span longer than the ring cannot be published by a sound writer;
  // the counters are shared, so a broken one is refused, not read from.
  if (offset < tail || offset > published || n > published - offset ||
      n > capacity_)
    throw OutOfRange("shared ring: read: " + bytes(n) + " at position " +
                     std::to_string(offset) +
                     " are not in the published, unreleased part [" +
                     std::to_string(tail) + ", " + std::to_string(published) +
                     ")");
}

void SharedRing::read_into(uint64_t offset, std::size_t n, void* out) const {
  check_readable(offset, n);
  const std::size_t at = offset % capacity_;
  const std::size_t first = std::min(n, capacity_ - at);
  auto* dst = static_cast<uint8_t*>(out);
  if (first > 0) std::memcpy(dst, data() + at, first);
  if (n > first) std::memcpy(dst + first, data(), n - first);
}

Buffer SharedRing::read(uint64_t offset, DType dtype,
                        std::vector<int64_t> shape) const {
  uint64_t n = dtype_size(dtype);
  for (const int64_t d : shape) {
    if (d < 0)
      throw InvalidArgument("shared ring: read: negative dimension " +
                            std::to_string(d));
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) n = UINT64_MAX;
  }
  check_readable(offset, n);
  Buffer out = Buffer::allocate(dtype, std::move(shape));
  read_into(offset, n, out.data());
  return out;
}

void SharedRing::release(uint64_t end) {
  const uint64_t published = header_->published.load(std::memory_order_acquire);
  if (end > published)
    throw OutOfRange("shared ring: release: position " + std::to_string(end) +
                     " is past the published end " + std::to_string(published));
  uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  while (tail < end && !header_->tail.compare_exchange_weak(
                           tail, end, std::memory_order_release)) {
  }
  detail::notify_shared(header_->wake, header_->waiters);
}

void SharedRing::shutdown() {
  header_->shutdown.store(1, std::memory_order_seq_cst);
  detail::notify_shared(header_->wake, header_->waiters);
}

bool SharedRing::is_shutdown() const {
  return header_->shutdown.load(std::memory_order_acquire) != 0;
}

SharedRing::Unit::Unit(std::shared_ptr<SharedRing> ring, uint64_t start)
    : ring_(std::move(ring)),
      start_(start),
      pos_(start),
      generation_(fork_generation()) {}

SharedRing::Unit::Unit(Unit&& other) noexcept
    : ring_(std::move(other.ring_)),
      start_(other.start_),
      pos_(other.pos_),
      generation_(other.generation_) {}

SharedRing::Unit& SharedRing::Unit::operator=(Unit&& other) noexcept {
  if (this != &other) {
    abort();
    ring_ = std::move(other.ring_);
    start_ = other.start_;
    pos_ = other.pos_;
    generation_ = other.generation_;
  }
  return *this;
}

SharedRing::Unit::~Unit() { abort(); }

uint64_t SharedRing::Unit::write(const void* data, std::size_t n,
                                 std::chrono::nanoseconds timeout) {
  if (ring_ == nullptr || inherited_from_parent(generation_))
    throw InvalidArgument(
        "shared ring: write: the unit was committed or aborted, or belongs to "
        "the parent process");
  const std::size_t capacity = ring_->capacity_;
  if (n > capacity - std::min<uint64_t>(size(), capacity))
    throw InvalidArgument("shared ring: write: a unit of " + bytes(size() + n) +
                          " does not fit in a ring of " + bytes(capacity));
  Header* h = ring_->header_;
  const uint64_t end = pos_ + n;
  const bool ok = detail::wait_shared(
      h->wake, h->waiters, deadline_after(timeout),
      [&] { return end - h->tail.load(std::memory_order_acquire) <= capacity; },
      [&] { return ring_->is_shutdown(); });
  if (!ok) {
    if (ring_->is_shutdown())
      throw Cancelled("shared ring: write after shutdown");
    throw Timeout(
        "shared ring: no room for " + bytes(n) + " within " +
        std::to_string(std::chrono::duration<double>(timeout).count()) +
        " s (" + bytes(ring_->used()) + " of " + bytes(capacity) +
        " not yet released by the reader)");
  }
  const std::size_t at = pos_ % capacity;
  const std::size_t first = std::min(n, capacity - at);
  const auto* src = static_cast<const uint8_t*>(data);
  if (first > 0) std::memcpy(ring_->data() + at, src, first);
  if (n > first) std::memcpy(ring_->data(), src + first, n - first);
  const uint64_t offset = pos_;
  pos_ = end;
  return offset;
}

std::pair<uint64_t, uint64_t> SharedRing::Unit::commit() {
  if (ring_ == nullptr || inherited_from_parent(generation_))
    throw InvalidArgument(
        "shared ring: commit: the unit was committed or aborted, or belongs "
        "to the parent process");
  ring_->header_->published.store(pos_, std::memory_order_release);
  ring_->header_->writing.store(0, std::memory_order_release);
  ring_.reset();
  return {start_, pos_};
}

void SharedRing::Unit::abort() noexcept {
  if (ring_ == nullptr) return;
  if (!inherited_from_parent(generation_))
    ring_->header_->writing.store(0, std::memory_order_release);
  ring_.reset();
}

}  // namespace feedline
