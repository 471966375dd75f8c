// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/shared_arena.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "feedline/concurrency/fork.h"

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

std::size_t page_size() {
  static const auto kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return kPage;
}

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

std::string sys_error(const char* what) {
  // std::generic_category().message(): strerror's text, thread-safe.
  return std::string("shared arena: ") + what +
         " failed: " + std::generic_category().message(errno);
}

// A futex call on a word of the shared mapping: no FUTEX_PRIVATE_FLAG, so
// the kernel keys it by the file and offset and a wake reaches every process.
long futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                 timeout, nullptr, 0);
}

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

  const int fd = static_cast<int>(memfd_create("feedline-arena", MFD_CLOEXEC));
  if (fd < 0) throw IoError(sys_error("memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    const std::string message = sys_error("ftruncate");
    close(fd);
    throw IoError(message + " (" + std::to_string(total) + " bytes)");
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const std::string message = sys_error("mmap");
    close(fd);
    throw IoError(message + " (" + std::to_string(total) + " bytes)");
  }
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
  return std::make_shared<SharedArena>(Token{}, fd, base, total);
}

std::shared_ptr<SharedArena> SharedArena::attach(int fd) {
  fork_generation();
  const std::string name = "shared arena: fd " + std::to_string(fd);
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0)
    throw IoError(sys_error("dup") + " (fd " + std::to_string(fd) + ")");
  struct stat st {};
  if (fstat(own, &st) != 0 ||
      static_cast<std::size_t>(st.st_size) < sizeof(Header)) {
    close(own);
    throw InvalidArgument(name + " is not a shared arena (too small)");
  }
  const auto total = static_cast<std::size_t>(st.st_size);
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  if (base == MAP_FAILED) {
    const std::string message = sys_error("mmap");
    close(own);
    throw IoError(message + " (" + name + ")");
  }
  const auto* h = static_cast<const Header*>(base);
  const std::size_t page = page_size();
  const bool valid =
      h->magic == kMagic && h->version == kVersion && h->count >= 1 &&
      h->count <= kMaxSegments && h->segment_size >= 1 &&
      h->stride == round_up(h->segment_size, page) &&
      h->data_offset == round_up(sizeof(Header) + h->count * 4, page) &&
      h->data_offset + h->stride * h->count == total;
  if (!valid) {
    munmap(base, total);
    close(own);
    throw InvalidArgument(name + " is not a shared arena (bad header)");
  }
  return std::make_shared<SharedArena>(Token{}, own, base, total);
}

SharedArena::SharedArena(Token, int fd, void* base, std::size_t mapped_bytes)
    : fd_(fd),
      base_(static_cast<uint8_t*>(base)),
      mapped_bytes_(mapped_bytes),
      header_(static_cast<Header*>(base)),
      segment_size_(header_->segment_size),
      count_(header_->count),
      stride_(header_->stride),
      data_offset_(header_->data_offset) {}

SharedArena::~SharedArena() {
  munmap(base_, mapped_bytes_);
  close(fd_);
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
  using Clock = std::chrono::steady_clock;
  // A century is "forever" and keeps the deadline from overflowing.
  constexpr std::chrono::nanoseconds kForever = std::chrono::hours(24 * 36525);
  const auto deadline = Clock::now() + std::min(timeout, kForever);
  const auto timed_out = [&] {
    return Timeout(
        "shared arena: no segment freed within " +
        std::to_string(std::chrono::duration<double>(timeout).count()) +
        " s (all " + std::to_string(count_) + " segments of " +
        std::to_string(segment_size_) + " bytes in use)");
  };
  for (;;) {
    if (is_shutdown())
      throw Cancelled("shared arena: begin_unit after shutdown");
    if (const int64_t s = try_take(); s >= 0)
      return Unit(shared_from_this(), static_cast<uint32_t>(s));
    if (timeout <= std::chrono::nanoseconds::zero()) throw timed_out();
    // Announce the wait, then read the counter, then look again: a release
    // after this look bumps the counter, so FUTEX_WAIT returns at once
    // instead of missing the wake.
    header_->waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = header_->wake.load(std::memory_order_seq_cst);
    int64_t s = is_shutdown() ? -1 : try_take();
    if (s < 0 && !is_shutdown()) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) {
        header_->waiters.fetch_sub(1, std::memory_order_seq_cst);
        throw timed_out();
      }
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      const timespec ts{static_cast<time_t>(ns / 1'000'000'000),
                        static_cast<long>(ns % 1'000'000'000)};
      futex(&header_->wake, FUTEX_WAIT, seen, &ts);
    }
    header_->waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (s >= 0) return Unit(shared_from_this(), static_cast<uint32_t>(s));
  }
}

void SharedArena::release(uint32_t segment) {
  state_word(segment).store(kFree, std::memory_order_release);
  header_->wake.fetch_add(1, std::memory_order_seq_cst);
  if (header_->waiters.load(std::memory_order_seq_cst) > 0)
    futex(&header_->wake, FUTEX_WAKE, INT_MAX, nullptr);
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
  header_->wake.fetch_add(1, std::memory_order_seq_cst);
  futex(&header_->wake, FUTEX_WAKE, INT_MAX, nullptr);
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
  if (n > 0) std::memcpy(arena_->segment_data(segment_) + offset, data, n);
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
