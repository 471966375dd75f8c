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

// numpy.lib.format's default max_header_size.
constexpr uint64_t kMaxHeaderSize = 10000;

struct Descr {
  DType dtype = DType::kUint8;
  bool big_endian = false;
};

Descr parse_descr(const std::string& d, const io::Reader& r, uint64_t at) {
  if (d.size() < 3 || d[2] == '0') r.fail(at, "unsupported dtype '" + d + "'");
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

// The header dict, parsed strictly: numpy.load reads it with
// ast.literal_eval, so anything that is not exactly a Python literal is
// refused there, and a lenient parser here would read arrays numpy refuses
// (or read them differently). This accepts a subset of what literal_eval
// takes, the subset every NPY writer produces: ASCII; blanks (space, tab,
// newline) between tokens; quoted strings without escapes; True and False;
// tuples of decimal integers without sign, underscores or leading zeros. The
// keys must be 'descr' (a string), 'fortran_order' (a bool) and 'shape' (a
// tuple), each exactly once: numpy refuses other and missing keys; it takes
// the last of duplicated keys, which are refused here as no writer makes
// them. Trailing blanks (the padding) are allowed; anything else after the
// dict is not. Files of versions 1.0 and 2.0 written by Python 2 may suffix a
// dimension with 'L' (a long, as `(2L, 3L)` on Windows): numpy reads those
// versions with the suffix removed, and so does this; version 3.0 postdates
// Python 2 and numpy refuses the suffix there.
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const io::Reader& r, uint64_t at,
               bool long_suffix)
      : text_(text), r_(r), at_(at), long_suffix_(long_suffix) {}

  Header parse() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t'))
      ++pos_;
    expect('{');
    Header h;
    bool seen[3] = {false, false, false};
    blanks();
    while (peek() != '}') {
      const std::size_t key_at = pos_;
      std::string key = string();
      blanks();
      expect(':');
      blanks();
      if (key == "descr" && !seen[0]) {
        h.descr = string();
        seen[0] = true;
      } else if (key == "fortran_order" && !seen[1]) {
        h.fortran_order = boolean();
        seen[1] = true;
      } else if (key == "shape" && !seen[2]) {
        h.shape = tuple();
        seen[2] = true;
      } else if (key == "descr" || key == "fortran_order" || key == "shape") {
        fail(key_at, "NPY header repeats the key '" + key + "'");
      } else {
        fail(key_at,
             "NPY header has a key other than 'descr', "
             "'fortran_order' and 'shape'");
      }
      blanks();
      if (peek() != ',') break;
      ++pos_;
      blanks();
    }
    expect('}');
    blanks();
    if (pos_ != text_.size()) fail(pos_, "NPY header has more after its dict");
    static constexpr const char* kKeys[] = {"descr", "fortran_order", "shape"};
    for (int i = 0; i < 3; ++i) {
      if (!seen[i])
        fail(0, std::string("NPY header has no '") + kKeys[i] + "'");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(std::size_t pos, const std::string& what) const {
    r_.fail(at_ + pos, what);
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c) {
    if (peek() != c) {
      fail(pos_, std::string("malformed NPY header: expected '") + c +
                     "' at header byte " + std::to_string(pos_));
    }
    ++pos_;
  }
  void blanks() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n') ++pos_;
  }
  std::string string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"')
      fail(pos_, "malformed NPY header: expected a quoted string");
    const std::size_t begin = ++pos_;
    while (peek() != quote) {
      const char c = peek();
      if (c < 0x20 || c > 0x7e || c == '\\')
        fail(pos_, "malformed NPY header: unsupported character in a string");
      ++pos_;
    }
    ++pos_;
    return std::string(text_.substr(begin, pos_ - 1 - begin));
  }
  bool boolean() {
    for (std::string_view word : {"True", "False"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return word == "True";
      }
    }
    fail(pos_, "malformed NPY header: 'fortran_order' must be True or False");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> shape;
    blanks();
    bool comma = false;  // (n) is an int, not a tuple: one element needs ','
    while (peek() != ')') {
      shape.push_back(integer());
      if (shape.size() > 64) fail(pos_, "NPY shape has too many dimensions");
      blanks();
      comma = peek() == ',';
      if (!comma) break;
      ++pos_;
      blanks();
    }
    if (shape.size() == 1 && !comma)
      fail(pos_, "malformed NPY header: 'shape' is not a tuple");
    expect(')');
    return shape;
  }
  int64_t integer() {
    const std::size_t begin = pos_;
    if (peek() == '-') fail(pos_, "negative dimension in NPY shape");
    if (peek() < '0' || peek() > '9')
      fail(pos_, "malformed NPY shape: expected a non-negative integer");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10)
        fail(begin, "NPY dimension overflows");
      v = v * 10 + (peek() - '0');
      ++pos_;
    }
    if (text_[begin] == '0' && pos_ - begin > 1)
      fail(begin, "malformed NPY shape: an integer with a leading zero");
    if (long_suffix_ && peek() == 'L') ++pos_;
    return v;
  }

  std::string_view text_;
  const io::Reader& r_;
  uint64_t at_;
  bool long_suffix_;
  std::size_t pos_ = 0;
};

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
  const uint8_t major = r.u8(6);
  const uint8_t minor = r.u8(7);
  uint64_t header_len = 0;
  uint64_t header_at = 0;
  // numpy reads (1, 0), (2, 0) and (3, 0) only.
  if (minor != 0 || major < 1 || major > 3) {
    r.fail(6, "unsupported NPY format version " + std::to_string(major) + "." +
                  std::to_string(minor));
  }
  if (major == 1) {
    header_len = r.u16(8);
    header_at = 10;
  } else {
    header_len = r.u32(8);
    header_at = 12;
  }
  // numpy.load refuses longer headers (its max_header_size) as unsafe.
  if (header_len > kMaxHeaderSize) {
    r.fail(8, "NPY header of " + std::to_string(header_len) +
                  " bytes is over numpy's limit of " +
                  std::to_string(kMaxHeaderSize));
  }
  std::span<const uint8_t> raw = r.bytes(header_at, header_len);
  const Header header =
      HeaderParser(std::string_view(reinterpret_cast<const char*>(raw.data()),
                                    raw.size()),
                   r, header_at, /*long_suffix=*/major <= 2)
          .parse();
  const Descr descr = parse_descr(header.descr, r, header_at);
  const bool fortran_order = header.fortran_order;
  const std::vector<int64_t>& shape = header.shape;

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
