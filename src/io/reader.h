// SPDX-License-Identifier: Apache-2.0
//
// Reader: bounds-checked little-endian reads over untrusted bytes, in memory
// or in a file. Every accessor checks its range first and throws FormatError
// naming the input and the offset, so a parser built on it cannot read out
// of bounds.

#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/io/file.h"
#include "feedline/io/formats.h"

namespace feedline::io {

// `text` in single quotes, as Python's repr() shows a str: printable ASCII
// and valid UTF-8 as they are, a backslash or quote escaped, and any other
// byte (a NUL, a control character, a byte of a Latin-1 name) as \xNN, so a
// message naming a path or member is valid UTF-8 and shows what was there.
std::string quoted(std::string_view text);

// Reads bytes held in memory, or a file (FileReader) a window at a time:
// the spans a file-backed Reader returns stay valid until forget(), which
// drops every window but the pinned ones, so a parser's memory is what it
// pins plus what one step of it reads.
class Reader {
 public:
  Reader(std::span<const uint8_t> data, std::string_view name)
      : data_(data), size_(data.size()), name_(name) {}
  Reader(const FileReader& file, std::string_view name)
      : file_(&file), size_(file.size()), name_(name) {}
  // Reads what `source` reads, naming it `name`, with the windows it has
  // read (so a rewriter keeps what its parse pinned).
  Reader(Reader&& source, std::string_view name)
      : data_(source.data_),
        file_(source.file_),
        size_(source.size_),
        name_(name),
        windows_(std::move(source.windows_)),
        retired_(std::move(source.retired_)) {}

  uint64_t size() const { return size_; }
  bool has(uint64_t offset, uint64_t n) const {
    return offset <= size_ && n <= size_ - offset;
  }

  // The n bytes at `offset`. Throws: FormatError if they are not all there;
  // IoError if a file-backed Reader's read fails.
  std::span<const uint8_t> bytes(uint64_t offset, uint64_t n) const {
    if (!has(offset, n)) {
      fail(offset, "truncated: needs " + std::to_string(n) +
                       " bytes at offset " + std::to_string(offset) +
                       ", the input has " + std::to_string(size_));
    }
    if (file_ != nullptr) return window(offset, n, false);
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
    if (!has(offset, 4)) return false;
    const auto b = bytes(offset, 4);
    return std::string_view(reinterpret_cast<const char*>(b.data()), 4) ==
           std::string_view(four, 4);
  }

  // Keeps the n bytes at `offset` (which must be there) until the Reader
  // goes: a region read again and again (a ZIP's central directory).
  void pin(uint64_t offset, uint64_t n) const {
    if (file_ != nullptr && n > 0) (void)window(offset, n, true);
  }
  // Drops what bytes() read since the last forget(), except pinned bytes:
  // the spans it returned are invalid then. Nothing, in memory.
  void forget() const;

  // Hands the bytes [begin, end) to `out`, a piece at a time for a file.
  void copy(uint64_t begin, uint64_t end,
            const std::function<void(std::span<const uint8_t>)>& out) const;

  // Throws FormatError("<name>: <what> (at byte <offset>)"), with the
  // bytes of <name> that are not UTF-8 escaped (display_name()).
  [[noreturn]] void fail(uint64_t offset, const std::string& what) const {
    throw FormatError(display_name(name_) + ": " + what + " (at byte " +
                      std::to_string(offset) + ")");
  }

 private:
  struct Window {
    std::vector<uint8_t> bytes;
    bool pinned = false;
  };
  // The n bytes at `offset` from a window that holds them, read if none
  // does (at least kWindow bytes, so that neighbouring fields come along).
  std::span<const uint8_t> window(uint64_t offset, uint64_t n, bool pin) const;
  static constexpr uint64_t kWindow = 4096;

  std::span<const uint8_t> data_;
  const FileReader* file_ = nullptr;
  uint64_t size_ = 0;
  std::string_view name_;
  mutable std::map<uint64_t, Window> windows_;  // by where they start
  mutable std::vector<Window> retired_;         // replaced by longer ones
};

}  // namespace feedline::io
