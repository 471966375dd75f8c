// SPDX-License-Identifier: Apache-2.0
//
// A PNG writer for encode_image: every row Paeth-filtered (the first, which
// has no row above, Sub-filtered), deflated with zlib, one IDAT chunk per
// 256 KiB of compressed data. The filter loop is branch-free so that the
// compiler vectorises it; FFmpeg's PNG encoder filters byte by byte.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include <zlib.h>

#include "feedline/base/error.h"
#include "media/codecs.h"

namespace feedline::media {
namespace {

void put32(std::vector<uint8_t>& out, uint32_t v) {
  const std::array<uint8_t, 4> b = {
      static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
      static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
  out.insert(out.end(), b.begin(), b.end());
}

void chunk(std::vector<uint8_t>& out, std::string_view type,
           const uint8_t* data, std::size_t size) {
  put32(out, static_cast<uint32_t>(size));
  const std::size_t at = out.size();
  out.insert(out.end(), type.begin(), type.end());
  if (size > 0) out.insert(out.end(), data, data + size);
  const uLong crc =
      crc32(0L, out.data() + at, static_cast<uInt>(out.size() - at));
  put32(out, static_cast<uint32_t>(crc));
}

// Row `cur` Paeth-filtered against `up` into `out`; `bpp` bytes a pixel.
void paeth(const uint8_t* cur, const uint8_t* up, uint8_t* out, std::size_t n,
           std::size_t bpp) {
  for (std::size_t i = 0; i < bpp; ++i)
    out[i] = static_cast<uint8_t>(cur[i] - up[i]);
  for (std::size_t i = bpp; i < n; ++i) {
    const int a = cur[i - bpp];
    const int b = up[i];
    const int c = up[i - bpp];
    const int pa = std::abs(b - c);
    const int pb = std::abs(a - c);
    const int pc = std::abs(a + b - 2 * c);
    const int ab = pa <= pb ? a : b;
    const int pab = pa <= pb ? pa : pb;
    const int pred = pab <= pc ? ab : c;
    out[i] = static_cast<uint8_t>(cur[i] - pred);
  }
}

void sub(const uint8_t* cur, uint8_t* out, std::size_t n, std::size_t bpp) {
  for (std::size_t i = 0; i < bpp && i < n; ++i) out[i] = cur[i];
  for (std::size_t i = bpp; i < n; ++i)
    out[i] = static_cast<uint8_t>(cur[i] - cur[i - bpp]);
}

}  // namespace

std::vector<uint8_t> write_png(const uint8_t* pixels, int width, int height,
                               int channels, int bit_depth, bool swap16,
                               int level) {
  if (width <= 0 || height <= 0 ||
      (channels != 1 && channels != 3 && channels != 4) ||
      (bit_depth != 8 && bit_depth != 16)) {
    throw InvalidArgument("write_png: unsupported image layout");
  }
  const std::size_t bpp = static_cast<std::size_t>(channels) * (bit_depth / 8);
  const std::size_t row = bpp * static_cast<std::size_t>(width);
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  constexpr std::size_t kChunk = std::size_t{256} * 1024;  // IDAT payload
  // Room for incompressible data and every chunk: no reallocation.
  const std::size_t raw = (row + 1) * static_cast<std::size_t>(height);
  out.reserve(raw + raw / 1000 + 1024 + (raw / kChunk + 1) * 12);
  std::vector<uint8_t> ihdr;
  put32(ihdr, static_cast<uint32_t>(width));
  put32(ihdr, static_cast<uint32_t>(height));
  const uint8_t color = channels == 1 ? 0 : channels == 3 ? 2 : 6;
  const std::array<uint8_t, 5> rest = {static_cast<uint8_t>(bit_depth), color,
                                       0, 0, 0};
  ihdr.insert(ihdr.end(), rest.begin(), rest.end());
  chunk(out, "IHDR", ihdr.data(), ihdr.size());

  z_stream z{};
  if (deflateInit2(&z, level < 0 ? Z_DEFAULT_COMPRESSION : std::min(level, 9),
                   Z_DEFLATED, 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::bad_alloc();
  }
  // Frees the stream's state however this function ends.
  const std::unique_ptr<z_stream, int (*)(z_stream*)> end(&z, deflateEnd);
  std::vector<uint8_t> idat(kChunk);
  std::vector<uint8_t> prev(row, 0);
  std::vector<uint8_t> cur(row);
  std::vector<uint8_t> filtered(row + 1);
  // Deflates what z holds; a full output buffer becomes an IDAT chunk.
  auto pump = [&](int flush) {
    for (;;) {
      const int rc = deflate(&z, flush);
      if (rc == Z_STREAM_ERROR) throw std::bad_alloc();
      if (z.avail_out == 0) {
        chunk(out, "IDAT", idat.data(), idat.size());
        z.next_out = idat.data();
        z.avail_out = static_cast<uInt>(idat.size());
        if (rc != Z_STREAM_END) continue;
      }
      if (flush != Z_FINISH || rc == Z_STREAM_END) return;
    }
  };
  z.next_out = idat.data();
  z.avail_out = static_cast<uInt>(idat.size());
  for (int y = 0; y < height; ++y) {
    const uint8_t* src = pixels + static_cast<std::size_t>(y) * row;
    if (swap16) {
      for (std::size_t i = 0; i + 1 < row; i += 2) {
        cur[i] = src[i + 1];
        cur[i + 1] = src[i];
      }
      src = cur.data();
    }
    if (y == 0) {
      filtered[0] = 1;  // Sub: there is no row above
      sub(src, filtered.data() + 1, row, bpp);
    } else {
      filtered[0] = 4;  // Paeth
      paeth(src, prev.data(), filtered.data() + 1, row, bpp);
    }
    std::memcpy(prev.data(), src, row);
    z.next_in = filtered.data();
    z.avail_in = static_cast<uInt>(filtered.size());
    pump(Z_NO_FLUSH);
  }
  pump(Z_FINISH);
  if (z.avail_out < idat.size())
    chunk(out, "IDAT", idat.data(), idat.size() - z.avail_out);
  chunk(out, "IEND", nullptr, 0);
  return out;
}

}  // namespace feedline::media
