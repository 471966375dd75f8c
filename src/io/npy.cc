// SPDX-License-Identifier: Apache-2.0
//
// NPY: "\x93NUMPY", major, minor, a little-endian header length (2 bytes in
// version 1, 4 in versions 2 and 3), then a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } and the data.

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/reader.h"

namespace feedline {
namespace {

struct Descr {
  DType dtype = DType::kUint8;
  bool big_endian = false;
};

Descr parse_descr(const std::string& d, const io::Reader& r, uint64_t at) {
  if (d.size() < 3) r.fail(at, "unsupported dtype '" + d + "'");
  char order = d[0];
  char kind = d[1];
  int size = 0;
  for (std::size_t i = 2; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9' || size > 64)
      r.fail(at, "unsupported dtype '" + d + "'");
    size = size * 10 + (d[i] - '0');
  }
  Descr out;
  if (order == '>') {
    out.big_endian = true;
  } else if (order != '<' && order != '|' && order != '=') {
    r.fail(at, "unsupported byte order in dtype '" + d + "'");
  }
  struct Kind {
    char kind;
    int size;
    DType dtype;
  };
  static constexpr Kind kKinds[] = {
      {'b', 1, DType::kBool},      {'i', 1, DType::kInt8},
      {'u', 1, DType::kUint8},     {'i', 2, DType::kInt16},
      {'u', 2, DType::kUint16},    {'i', 4, DType::kInt32},
      {'u', 4, DType::kUint32},    {'i', 8, DType::kInt64},
      {'u', 8, DType::kUint64},    {'f', 2, DType::kFloat16},
      {'f', 4, DType::kFloat32},   {'f', 8, DType::kFloat64},
      {'c', 8, DType::kComplex64}, {'c', 16, DType::kComplex128},
  };
  for (const Kind& k : kKinds) {
    if (k.kind == kind && k.size == size) {
      out.dtype = k.dtype;
      if (size == 1) out.big_endian = false;
      return out;
    }
  }
  r.fail(at, "unsupported dtype '" + d + "' (numeric dtypes only)");
}

// The value after 'key': in the header dict, as raw text up to the next
// top-level comma or closing brace.
std::string field(const std::string& header, const std::string& key,
                  const io::Reader& r, uint64_t at) {
  std::size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) r.fail(at, "NPY header has no '" + key + "'");
  std::size_t colon = header.find(':', k);
  if (colon == std::string::npos) r.fail(at, "malformed NPY header");
  std::size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  if (i < header.size() && header[i] == '(') {
    std::size_t close = header.find(')', i);
    if (close == std::string::npos) r.fail(at, "malformed shape in NPY header");
    return header.substr(i, close - i + 1);
  }
  if (i < header.size() && (header[i] == '\'' || header[i] == '"')) {
    std::size_t close = header.find(header[i], i + 1);
    if (close == std::string::npos) r.fail(at, "malformed NPY header");
    return header.substr(i + 1, close - i - 1);
  }
  std::size_t end = header.find_first_of(",}", i);
  if (end == std::string::npos) r.fail(at, "malformed NPY header");
  return header.substr(i, end - i);
}

std::vector<int64_t> parse_shape(const std::string& text, const io::Reader& r,
                                 uint64_t at) {
  std::vector<int64_t> shape;
  std::size_t i = 1;  // after '('
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size() || text[i] == ')') break;
    if (text[i] == '-') r.fail(at, "negative dimension in NPY shape " + text);
    if (text[i] < '0' || text[i] > '9')
      r.fail(at, "malformed NPY shape " + text);
    int64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) {
        r.fail(at, "NPY dimension overflows in shape " + text);
      }
      v = v * 10 + (text[i] - '0');
      ++i;
    }
    shape.push_back(v);
    if (shape.size() > 64) r.fail(at, "NPY shape has too many dimensions");
  }
  return shape;
}

void byteswap(uint8_t* p, std::size_t count, std::size_t itemsize,
              bool complex) {
  std::size_t unit = complex ? itemsize / 2 : itemsize;
  for (std::size_t i = 0; i < count * itemsize; i += unit)
    std::reverse(p + i, p + i + unit);
}

}  // namespace

Buffer load_npy(const Buffer& bytes, std::string_view name) {
  io::Reader r(bytes.bytes(), name);
  static constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (std::memcmp(r.bytes(0, 6).data(), kMagic, 6) != 0)
    r.fail(0, "not an NPY file (bad magic)");
  uint8_t major = r.u8(6);
  uint64_t header_len = 0;
  uint64_t header_at = 0;
  if (major == 1) {
    header_len = r.u16(8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    header_len = r.u32(8);
    header_at = 12;
  } else {
    r.fail(6, "unsupported NPY format version " + std::to_string(major));
  }
  std::span<const uint8_t> raw = r.bytes(header_at, header_len);
  std::string header(raw.begin(), raw.end());
  Descr descr = parse_descr(field(header, "descr", r, header_at), r, header_at);
  std::string fortran = field(header, "fortran_order", r, header_at);
  bool fortran_order = fortran.find("True") != std::string::npos;
  std::vector<int64_t> shape =
      parse_shape(field(header, "shape", r, header_at), r, header_at);

  const std::size_t itemsize = dtype_size(descr.dtype);
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / itemsize /
                              static_cast<uint64_t>(d)) {
      r.fail(header_at, "NPY shape overflows");
    }
    count *= static_cast<uint64_t>(d);
  }
  const uint64_t data_at = header_at + header_len;
  std::span<const uint8_t> data = r.bytes(data_at, count * itemsize);

  // Strides, checked on their own: an array with a zero dimension has no
  // bytes, but its other dimensions can still be absurd.
  std::vector<int64_t> strides(shape.size());
  int64_t stride = static_cast<int64_t>(itemsize);
  auto step = [&](std::size_t i) {
    strides[i] = stride;
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1),
                               &stride)) {
      r.fail(header_at, "NPY shape overflows");
    }
  };
  if (fortran_order) {
    for (std::size_t i = 0; i < shape.size(); ++i) step(i);
  } else {
    for (std::size_t i = shape.size(); i-- > 0;) step(i);
  }
  if (!descr.big_endian) {
    return Buffer::view(bytes.owner(), const_cast<uint8_t*>(data.data()),
                        descr.dtype, shape, strides, bytes.writable());
  }
  // Big-endian data: one copy, swapped to native order, same layout.
  Buffer native =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(data.size())});
  std::memcpy(native.data(), data.data(), data.size());
  bool complex =
      descr.dtype == DType::kComplex64 || descr.dtype == DType::kComplex128;
  byteswap(native.data_as<uint8_t>(), count, itemsize, complex);
  return Buffer::view(native.owner(), native.data(), descr.dtype, shape,
                      strides);
}

}  // namespace feedline
