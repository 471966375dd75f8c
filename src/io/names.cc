// SPDX-License-Identifier: Apache-2.0
//
// Names fit for messages: valid UTF-8 kept, anything else escaped.

#include <cstdint>
#include <string>
#include <string_view>

#include "feedline/io/formats.h"
#include "io/reader.h"

namespace feedline {
namespace {

// The length of the valid UTF-8 sequence of two or more bytes at `i`, or 0
// (Unicode 15, table 3-7: no overlong forms, no surrogates, <= U+10FFFF).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto in = [&](std::size_t k, uint8_t lo, uint8_t hi) {
    return k < s.size() && static_cast<uint8_t>(s[k]) >= lo &&
           static_cast<uint8_t>(s[k]) <= hi;
  };
  const auto b = static_cast<uint8_t>(s[i]);
  if (b >= 0xC2 && b <= 0xDF) return in(i + 1, 0x80, 0xBF) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const uint8_t lo = b == 0xE0 ? 0xA0 : 0x80;
    const uint8_t hi = b == 0xED ? 0x9F : 0xBF;
    return in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const uint8_t lo = b == 0xF0 ? 0x90 : 0x80;
    const uint8_t hi = b == 0xF4 ? 0x8F : 0xBF;
    return in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF)
               ? 4
               : 0;
  }
  return 0;
}

std::string escape(std::string_view text, bool quote) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  for (std::size_t i = 0; i < text.size();) {
    if (std::size_t n = utf8_length(text, i); n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    const auto b = static_cast<uint8_t>(text[i++]);
    if (quote && (b == '\\' || b == '\'')) {
      out += '\\';
      out += static_cast<char>(b);
    } else if (b >= 0x20 && b < 0x7f) {
      out += static_cast<char>(b);
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    }
  }
  return out;
}

}  // namespace

std::string display_name(std::string_view name) { return escape(name, false); }

std::string io::quoted(std::string_view text) {
  return "'" + escape(text, true) + "'";
}

}  // namespace feedline
