// SPDX-License-Identifier: Apache-2.0
//
// A PNG writer for encode_image: every row Paeth-filtered (the first, which
// has no row above, Sub-filtered), the filtered image deflated in one call
// with libdeflate, one IDAT chunk per 256 KiB of compressed data. The
// filter loop is branch-free so that the compiler vectorises it; FFmpeg's
// PNG encoder filters byte by byte, and zlib's streaming deflate at the
// same level takes about twice libdeflate's time for a slightly larger
// stream (bench/README.md, "encoding").

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include <libdeflate.h>

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
  put32(out, libdeflate_crc32(0, out.data() + at, out.size() - at));
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

struct FreeCompressor {
  void operator()(libdeflate_compressor* c) const {
    libdeflate_free_compressor(c);
  }
};
using CompressorPtr = std::unique_ptr<libdeflate_compressor, FreeCompressor>;

// This thread's compressor for `level` (0-9), made on first use: making one
// allocates several hundred KiB, which a batch of small images would pay
// once per image.
libdeflate_compressor* compressor(int level) {
  thread_local std::array<CompressorPtr, 10> by_level;
  CompressorPtr& c = by_level.at(static_cast<std::size_t>(level));
  if (!c) {
    c.reset(libdeflate_alloc_compressor(level));
    if (!c) throw std::bad_alloc();
  }
  return c.get();
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
  const std::size_t raw = (row + 1) * static_cast<std::size_t>(height);

  // The filtered image: a filter-type byte, then the row. Every byte is
  // written below, so neither buffer is cleared first.
  auto filtered = std::make_unique_for_overwrite<uint8_t[]>(raw);
  std::vector<uint8_t> swapped(swap16 ? 2 * row : 0);
  const uint8_t* prev = nullptr;
  for (int y = 0; y < height; ++y) {
    const uint8_t* src = pixels + static_cast<std::size_t>(y) * row;
    if (swap16) {
      // Two rows in turn: this one, and the one above it for Paeth.
      uint8_t* dst = swapped.data() + (y % 2) * row;
      for (std::size_t i = 0; i + 1 < row; i += 2) {
        dst[i] = src[i + 1];
        dst[i + 1] = src[i];
      }
      src = dst;
    }
    uint8_t* out = filtered.get() + static_cast<std::size_t>(y) * (row + 1);
    if (prev == nullptr) {
      out[0] = 1;  // Sub: there is no row above
      sub(src, out + 1, row, bpp);
    } else {
      out[0] = 4;  // Paeth
      paeth(src, prev, out + 1, row, bpp);
    }
    prev = src;
  }

  libdeflate_compressor* c = compressor(level < 0 ? 6 : std::min(level, 9));
  const std::size_t bound = libdeflate_zlib_compress_bound(c, raw);
  auto z = std::make_unique_for_overwrite<uint8_t[]>(bound);
  const std::size_t zsize =
      libdeflate_zlib_compress(c, filtered.get(), raw, z.get(), bound);
  if (zsize == 0) {
    // The bound always suffices; 0 would mean it did not.
    throw Internal("write_png: libdeflate's output exceeded its own bound");
  }
  filtered.reset();  // free the filtered image before the file grows

  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  constexpr std::size_t kChunk = std::size_t{256} * 1024;  // IDAT payload
  out.reserve(8 + 25 + zsize + (zsize / kChunk + 1) * 12 + 12);
  std::vector<uint8_t> ihdr;
  put32(ihdr, static_cast<uint32_t>(width));
  put32(ihdr, static_cast<uint32_t>(height));
  const uint8_t color = channels == 1 ? 0 : channels == 3 ? 2 : 6;
  const std::array<uint8_t, 5> rest = {static_cast<uint8_t>(bit_depth), color,
                                       0, 0, 0};
  ihdr.insert(ihdr.end(), rest.begin(), rest.end());
  chunk(out, "IHDR", ihdr.data(), ihdr.size());
  for (std::size_t at = 0; at < zsize; at += kChunk)
    chunk(out, "IDAT", z.get() + at, std::min(kChunk, zsize - at));
  chunk(out, "IEND", nullptr, 0);
  return out;
}

}  // namespace feedline::media
