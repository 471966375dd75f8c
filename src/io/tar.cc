// SPDX-License-Identifier: Apache-2.0
//
// TAR: 512-byte headers, each followed by its data padded to 512 bytes, and
// a zero block at the end. A member's name is ustar's prefix + "/" + name,
// or the name a preceding GNU 'L' record or pax 'x' record ("path=") gives;
// a pax "size=" record overrides the size of the next member (files over
// 8 GiB). Sizes may be octal or GNU base-256. Every header's checksum is
// verified.

#include <string>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/reader.h"

namespace feedline {
namespace {

constexpr uint64_t kBlock = 512;

std::string field(std::span<const uint8_t> b, std::size_t at, std::size_t len) {
  std::size_t n = 0;
  while (n < len && b[at + n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(&b[at]), n);
}

uint64_t number(std::span<const uint8_t> b, std::size_t at, std::size_t len,
                const io::Reader& r, uint64_t where) {
  if (b[at] & 0x80) {  // GNU base-256
    uint64_t v = b[at] & 0x7F;
    for (std::size_t i = 1; i < len; ++i) {
      if (v >> 55) r.fail(where, "numeric field overflows");
      v = (v << 8) | b[at + i];
    }
    return v;
  }
  uint64_t v = 0;
  std::size_t i = 0;
  while (i < len && (b[at + i] == ' ' || b[at + i] == 0)) ++i;
  for (; i < len && b[at + i] >= '0' && b[at + i] <= '7'; ++i) {
    if (v >> 60) r.fail(where, "numeric field overflows");
    v = v * 8 + (b[at + i] - '0');
  }
  return v;
}

bool zero_block(std::span<const uint8_t> b) {
  for (uint8_t c : b) {
    if (c != 0) return false;
  }
  return true;
}

// Applies the "path" and "size" records of a pax header.
void read_pax(std::span<const uint8_t> data, const io::Reader& r,
              uint64_t where, std::string* path, uint64_t* size,
              bool* has_size) {
  std::size_t i = 0;
  while (i < data.size()) {
    std::size_t len = 0;
    std::size_t j = i;
    while (j < data.size() && data[j] >= '0' && data[j] <= '9') {
      len = len * 10 + (data[j] - '0');
      if (len > data.size()) r.fail(where, "pax record overruns its header");
      ++j;
    }
    // "<len> <key>=<value>\n": the length covers its own digits, the space
    // and the newline.
    if (len < j - i + 2 || i + len > data.size() || j >= data.size() ||
        data[j] != ' ' || data[i + len - 1] != '\n') {
      r.fail(where, "malformed pax record");
    }
    std::string record(reinterpret_cast<const char*>(&data[j + 1]),
                       i + len - j - 2);
    std::size_t eq = record.find('=');
    if (eq != std::string::npos) {
      std::string key = record.substr(0, eq);
      std::string value = record.substr(eq + 1);
      if (key == "path") *path = value;
      if (key == "size") {
        uint64_t v = 0;
        for (char c : value) {
          if (c < '0' || c > '9' || (v >> 59))
            r.fail(where, "malformed pax size");
          v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        *size = v;
        *has_size = true;
      }
    }
    i += len;
  }
}

}  // namespace

std::vector<TarMember> list_tar(std::span<const uint8_t> data,
                                std::string_view name) {
  io::Reader r(data, name);
  std::vector<TarMember> members;
  std::string next_name;
  uint64_t next_size = 0;
  bool has_next_size = false;
  uint64_t at = 0;
  while (r.has(at, kBlock)) {
    std::span<const uint8_t> h = r.bytes(at, kBlock);
    if (zero_block(h)) break;
    uint64_t stored = number(h, 148, 8, r, at + 148);
    uint64_t sum = 0;
    for (std::size_t i = 0; i < kBlock; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : h[i];
    if (sum != stored) r.fail(at, "bad tar header checksum");
    char type = static_cast<char>(h[156]);
    uint64_t size = number(h, 124, 12, r, at + 124);
    if (has_next_size && type != 'x' && type != 'L') size = next_size;
    const uint64_t body = at + kBlock;
    if (!r.has(body, size)) r.fail(body, "member data overruns the archive");
    std::span<const uint8_t> content = r.bytes(body, size);
    if (type == 'L') {
      next_name = field(content, 0, content.size());
    } else if (type == 'x') {
      read_pax(content, r, body, &next_name, &next_size, &has_next_size);
    } else if (type == 'g') {
      // Global pax records: nothing feedline uses.
    } else {
      if (type == '0' || type == '\0' || type == '7') {
        std::string member = next_name;
        if (member.empty()) {
          member = field(h, 0, 100);
          if (std::string(reinterpret_cast<const char*>(&h[257]), 5) ==
              "ustar") {
            std::string prefix = field(h, 345, 155);
            if (!prefix.empty()) member = prefix.append("/").append(member);
          }
        }
        members.push_back({std::move(member), body, size});
      }
      next_name.clear();
      has_next_size = false;
    }
    uint64_t padded = (size + kBlock - 1) / kBlock * kBlock;
    if (padded < size) r.fail(body, "member size overflows");
    at = body + padded;
  }
  return members;
}

}  // namespace feedline
