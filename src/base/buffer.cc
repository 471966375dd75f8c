// SPDX-License-Identifier: Apache-2.0

#include "feedline/base/buffer.h"

#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "feedline/base/error.h"

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
  std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) throw std::bad_alloc();
  Buffer b;
  b.owner_ = std::shared_ptr<void>(p, AlignedFree());
  b.data_ = p;
  b.dtype_ = dtype;
  b.strides_ = contiguous_strides(shape, dtype_size(dtype));
  b.shape_ = std::move(shape);
  return b;
}

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
