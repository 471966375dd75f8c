// SPDX-License-Identifier: Apache-2.0

#include "feedline/base/buffer.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "feedline/base/mutex.h"

namespace feedline {
namespace {

constexpr std::size_t kAlignment = 64;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUint8:
      return 1;
    case DType::kInt16:
    case DType::kUint16:
    case DType::kFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUint32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUint64:
    case DType::kFloat64:
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
  }
  return 1;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kInt8:
      return "int8";
    case DType::kUint8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kUint16:
      return "uint16";
    case DType::kInt32:
      return "int32";
    case DType::kUint32:
      return "uint32";
    case DType::kInt64:
      return "int64";
    case DType::kUint64:
      return "uint64";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  for (int d = 0; d <= static_cast<int>(DType::kComplex128); ++d) {
    if (name == dtype_name(static_cast<DType>(d))) return static_cast<DType>(d);
  }
  throw InvalidArgument("unknown dtype '" + std::string(name) + "'");
}

// The kind is the first letter of the name: bool, int, uint, float, complex.
std::string numpy_typestr(DType dtype) {
  const std::size_t size = dtype_size(dtype);
  return (size == 1 ? "|" : "<") + std::string(1, dtype_name(dtype)[0]) +
         std::to_string(size);
}

uint8_t dlpack_type_code(DType dtype) {
  switch (dtype_name(dtype)[0]) {
    case 'i':
      return 0;
    case 'u':
      return 1;
    case 'f':
      return 2;
    case 'c':
      return 5;
    default:  // bool
      return 6;
  }
}

Buffer Buffer::view_as(DType dtype, std::vector<int64_t> shape) const {
  // Checked: a wrapped product could pass for the buffer's size.
  uint64_t n = dtype_size(dtype);
  bool fits = true;
  for (const int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      fits = false;
      break;
    }
  }
  if (!fits || !contiguous() || n != nbytes())
    throw InvalidArgument("cannot view " + to_string() + " as " +
                          dtype_name(dtype) + " of another size");
  return view(owner_, data_, dtype, std::move(shape), {}, writable_);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape,
                                        std::size_t itemsize) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = static_cast<int64_t>(itemsize);
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

namespace {

// Large buffers (a video clip is hundreds of MB) are mapped directly,
// 2 MiB-aligned, and marked for transparent huge pages: the first touch of
// each 2 MiB then costs one page fault instead of 512. With 4 KiB pages the
// kernel's fault handling took a fifth of a 1080p decode's time.
//
// Freed large buffers are kept in a small cache and handed out again (a
// loader makes buffers of the same few sizes over and over), which also
// saves the kernel zeroing fresh pages: another tenth. The cache holds at
// most set_buffer_cache_limit() bytes (default 2 GiB, or 1/16 of memory if
// that is less) and takes a block only for a request of between half its
// size and its size.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugeThreshold = kHugePage;

std::size_t huge_length(std::size_t bytes) {
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

void* map_huge(std::size_t length) {
  // Map one extra huge page so that an aligned start exists, then trim.
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + length + kHugePage;
  // Addresses inside the mapping are formed from `raw`, not from integers.
  char* p = static_cast<char*>(raw) + (aligned - start);
  if (end > aligned + length) munmap(p + length, end - aligned - length);
  madvise(p, length, MADV_HUGEPAGE);  // advisory: fine if refused
  return p;
}

std::size_t default_cache_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  std::size_t limit = std::size_t{2} << 30;
  if (pages > 0 && page > 0) {
    limit = std::min(limit, static_cast<std::size_t>(pages) *
                                static_cast<std::size_t>(page) / 16);
  }
  return limit;
}

class HugeCache;
HugeCache* g_huge_cache = nullptr;  // for the fork handlers

class HugeCache {
 public:
  static HugeCache& get() {
    static auto* cache = [] {
      auto* c = new HugeCache();  // never destroyed: used at exit
      g_huge_cache = c;           // set before the handlers can run
      // A fork() while another thread held mu_ would leave it held in the
      // child for good (a child's first large allocation hung): the forking
      // thread takes it across the fork. Its holders only edit the list.
      pthread_atfork(&HugeCache::lock_for_fork, &HugeCache::unlock_after_fork,
                     &HugeCache::unlock_after_fork);
      return c;
    }();
    return *cache;
  }

  // A mapping of at least `length` bytes; *actual receives its length.
  void* take(std::size_t length, std::size_t* actual) {
    {
      MutexLock lock(mu_);
      auto best = blocks_.end();
      for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
        if (it->second >= length && it->second / 2 <= length &&
            (best == blocks_.end() || it->second < best->second)) {
          best = it;
        }
      }
      if (best != blocks_.end()) {
        void* p = best->first;
        *actual = best->second;
        cached_ -= best->second;
        blocks_.erase(best);
        return p;
      }
    }
    *actual = length;
    return map_huge(length);
  }

  void give(void* p, std::size_t length) {
    std::vector<std::pair<void*, std::size_t>> evicted;
    {
      MutexLock lock(mu_);
      if (length <= limit_) {
        // Oldest blocks leave first to make room.
        while (cached_ + length > limit_ && !blocks_.empty()) {
          evicted.push_back(blocks_.front());
          cached_ -= blocks_.front().second;
          blocks_.erase(blocks_.begin());
        }
        blocks_.emplace_back(p, length);
        cached_ += length;
      } else {
        evicted.emplace_back(p, length);
      }
    }
    unmap(evicted);  // outside the lock: a fork waits for none of it
  }

  void set_limit(std::size_t limit) {
    std::vector<std::pair<void*, std::size_t>> evicted;
    {
      MutexLock lock(mu_);
      limit_ = limit;
      while (cached_ > limit_ && !blocks_.empty()) {
        evicted.push_back(blocks_.front());
        cached_ -= blocks_.front().second;
        blocks_.erase(blocks_.begin());
      }
    }
    unmap(evicted);
  }

  std::size_t cached() {
    MutexLock lock(mu_);
    return cached_;
  }

 private:
  static void lock_for_fork() NO_THREAD_SAFETY_ANALYSIS {
    g_huge_cache->mu_.lock();
  }
  static void unlock_after_fork() NO_THREAD_SAFETY_ANALYSIS {
    g_huge_cache->mu_.unlock();
  }

  static void unmap(const std::vector<std::pair<void*, std::size_t>>& blocks) {
    for (const auto& [p, length] : blocks) munmap(p, length);
  }

  Mutex mu_;
  std::vector<std::pair<void*, std::size_t>> blocks_ GUARDED_BY(mu_);
  std::size_t cached_ GUARDED_BY(mu_) = 0;
  std::size_t limit_ GUARDED_BY(mu_) = default_cache_limit();
};

struct HugeFree {
  std::size_t length;
  void operator()(void* p) const { HugeCache::get().give(p, length); }
};

}  // namespace

Buffer Buffer::allocate(DType dtype, std::vector<int64_t> shape) {
  std::size_t bytes = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0)
      throw InvalidArgument("buffer dimensions must be >= 0 (got " +
                            std::to_string(d) + ")");
    if (d != 0 && bytes > std::numeric_limits<std::size_t>::max() /
                              static_cast<std::size_t>(d)) {
      throw InvalidArgument("buffer size overflows");
    }
    bytes *= static_cast<std::size_t>(d);
  }
  Buffer b;
  void* p = nullptr;
  if (bytes >= kHugeThreshold) {
    std::size_t length = 0;
    p = HugeCache::get().take(huge_length(bytes), &length);
    b.owner_ = std::shared_ptr<void>(p, HugeFree{length});
  } else {
    std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (p == nullptr) throw std::bad_alloc();
    b.owner_ = std::shared_ptr<void>(p, AlignedFree());
  }
  b.data_ = p;
  b.dtype_ = dtype;
  b.strides_ = contiguous_strides(shape, dtype_size(dtype));
  b.shape_ = std::move(shape);
  return b;
}

void set_buffer_cache_limit(std::size_t bytes) {
  HugeCache::get().set_limit(bytes);
}

std::size_t buffer_cache_size() { return HugeCache::get().cached(); }

Buffer Buffer::view(std::shared_ptr<const void> owner, void* data, DType dtype,
                    std::vector<int64_t> shape, std::vector<int64_t> strides,
                    bool writable) {
  if (!strides.empty() && strides.size() != shape.size()) {
    throw InvalidArgument("a buffer view needs one stride per dimension");
  }
  Buffer b;
  b.owner_ = std::move(owner);
  b.data_ = data;
  b.dtype_ = dtype;
  b.strides_ = strides.empty() ? contiguous_strides(shape, dtype_size(dtype))
                               : std::move(strides);
  b.shape_ = std::move(shape);
  b.writable_ = writable;
  return b;
}

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

bool Buffer::contiguous() const {
  return strides_ == contiguous_strides(shape_, dtype_size(dtype_));
}

std::string Buffer::to_string() const {
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape_[i]);
  }
  return s + "]";
}

}  // namespace feedline
