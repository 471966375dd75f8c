// SPDX-License-Identifier: Apache-2.0
//
// Buffer: an owning, reference-counted N-d array of plain numbers.
//
// A Buffer is what decoders and parsers produce and what batches are made
// of. It has a dtype, a shape and strides (in bytes), and shares its storage:
// copying a Buffer copies a reference, never the data, so it moves through
// a pipeline for the price of a pointer. Python sees it through the NumPy
// array interface and DLPack without a copy, and the storage stays alive as
// long as any view of it does.
//
// Storage from allocate() is 64-byte aligned and C-contiguous. view() wraps
// memory that something else owns (the bytes of an NPY file, say) and keeps
// that owner alive.
//
// Thread safety: a Buffer may be copied and read from any thread; writing the
// same elements from two threads needs outside synchronisation.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace feedline {

enum class DType : uint8_t {
  kBool,
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
};

// Size of one element in bytes.
std::size_t dtype_size(DType dtype);
// "uint8", "float32", ... (NumPy's names).
const char* dtype_name(DType dtype);
// The dtype named `name` by dtype_name(). Throws: InvalidArgument if none is.
DType dtype_from_name(std::string_view name);
// NumPy's array-interface typestr: "|u1", "<f4", "<c8", ...
std::string numpy_typestr(DType dtype);
// DLPack's DLDataTypeCode: 0 int, 1 uint, 2 float, 5 complex, 6 bool.
uint8_t dlpack_type_code(DType dtype);

class Buffer {
 public:
  // An empty buffer: no storage, rank 0, no elements.
  Buffer() = default;

  // A new C-contiguous buffer, 64-byte aligned, contents uninitialised.
  // Throws: InvalidArgument on a negative dimension or a size overflow;
  // std::bad_alloc when memory runs out.
  static Buffer allocate(DType dtype, std::vector<int64_t> shape);

  // A view of memory that `owner` keeps alive. `strides` are in bytes; empty
  // means C-contiguous. A view of memory that must not be written (a Python
  // bytes object, a read-only file mapping) is made with writable = false,
  // and views derived from it pass that on.
  static Buffer view(std::shared_ptr<const void> owner, void* data, DType dtype,
                     std::vector<int64_t> shape,
                     std::vector<int64_t> strides = {}, bool writable = true);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  std::size_t nbytes() const {
    return static_cast<std::size_t>(numel()) * dtype_size(dtype_);
  }
  bool contiguous() const;
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  // The bytes of a contiguous buffer.
  std::span<const uint8_t> bytes() const {
    return {data_as<const uint8_t>(), nbytes()};
  }
  // The object that keeps the memory alive (shared by every view).
  const std::shared_ptr<const void>& owner() const { return owner_; }
  bool has_value() const { return owner_ != nullptr; }
  // False when the memory must not be written (NumPy then sees a read-only
  // array).
  bool writable() const { return writable_; }

  // The same memory as `shape` elements of `dtype`, sharing the owner.
  // Throws: InvalidArgument if the buffer is not contiguous or the sizes
  // differ.
  Buffer view_as(DType dtype, std::vector<int64_t> shape) const;

  // "float32[32, 3, 224, 224]".
  std::string to_string() const;

 private:
  std::shared_ptr<const void> owner_;
  void* data_ = nullptr;
  DType dtype_ = DType::kUint8;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  bool writable_ = true;
};

// Buffers of 2 MiB and more are mapped 2 MiB-aligned with transparent huge
// pages, and when freed are kept in a process-wide cache for reuse by later
// buffers of similar size (a loader makes the same few sizes again and
// again). The cache holds at most `bytes` (default: 2 GiB, or 1/16 of
// physical memory if less); 0 disables it and frees what it holds.
void set_buffer_cache_limit(std::size_t bytes);
// Bytes the cache holds now.
std::size_t buffer_cache_size();

// Returns the C-contiguous byte strides of `shape` for elements of `itemsize`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape,
                                        std::size_t itemsize);

}  // namespace feedline
