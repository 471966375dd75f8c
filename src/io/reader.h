// SPDX-License-Identifier: Apache-2.0
//
// Reader: bounds-checked little-endian reads over untrusted bytes. Every
// accessor checks its range first and throws FormatError naming the input and
// the offset, so a parser built on it cannot read out of bounds.

#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"

namespace feedline::io {

// `text` in single quotes, as Python's repr() shows a str: printable ASCII
// and valid UTF-8 as they are, a backslash or quote escaped, and any other
// byte (a NUL, a control character, a byte of a Latin-1 name) as \xNN, so a
// message naming a path or member is valid UTF-8 and shows what was there.
std::string quoted(std::string_view text);

class Reader {
 public:
  Reader(std::span<const uint8_t> data, std::string_view name)
      : data_(data), name_(name) {}

  uint64_t size() const { return data_.size(); }
  bool has(uint64_t offset, uint64_t n) const {
    return offset <= data_.size() && n <= data_.size() - offset;
  }

  // The n bytes at `offset`. Throws: FormatError if they are not all there.
  std::span<const uint8_t> bytes(uint64_t offset, uint64_t n) const {
    if (!has(offset, n)) {
      fail(offset, "truncated: needs " + std::to_string(n) +
                       " bytes at offset " + std::to_string(offset) +
                       ", the input has " + std::to_string(data_.size()));
    }
    return data_.subspan(static_cast<std::size_t>(offset),
                         static_cast<std::size_t>(n));
  }
  uint8_t u8(uint64_t offset) const { return bytes(offset, 1)[0]; }
  uint16_t u16(uint64_t offset) const {
    auto b = bytes(offset, 2);
    return static_cast<uint16_t>(b[0] | (b[1] << 8));
  }
  uint32_t u32(uint64_t offset) const {
    auto b = bytes(offset, 4);
    return static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
           (static_cast<uint32_t>(b[2]) << 16) |
           (static_cast<uint32_t>(b[3]) << 24);
  }
  uint64_t u64(uint64_t offset) const {
    return static_cast<uint64_t>(u32(offset)) |
           (static_cast<uint64_t>(u32(offset + 4)) << 32);
  }
  bool tag(uint64_t offset, const char (&four)[5]) const {
    return has(offset, 4) &&
           std::string_view(reinterpret_cast<const char*>(&data_[offset]), 4) ==
               std::string_view(four, 4);
  }

  // Throws FormatError("<name>: <what> (at byte <offset>)"), with the
  // bytes of <name> that are not UTF-8 escaped (display_name()).
  [[noreturn]] void fail(uint64_t offset, const std::string& what) const {
    throw FormatError(display_name(name_) + ": " + what + " (at byte " +
                      std::to_string(offset) + ")");
  }

 private:
  std::span<const uint8_t> data_;
  std::string_view name_;
};

}  // namespace feedline::io
