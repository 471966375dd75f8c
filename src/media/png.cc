// SPDX-License-Identifier: Apache-2.0
//
// PNG decoding, to the samples the file stores (no colour management, as
// Pillow, OpenCV and FFmpeg decode). The common cases, non-interlaced
// images of 8-bit palette or 8- or 16-bit grey, grey + alpha, RGB or RGBA
// samples, are decoded directly: CRCs checked, the IDAT stream inflated by
// libdeflate in one call into the exact size the header implies, rows
// unfiltered in place, and 8-bit RGB or grey handed out without a copy.
// Everything else (fewer than 8 bits, interlaced), and any file the direct
// path finds anything unusual in (a CRC mismatch, data that does not
// inflate to exactly the image, an unknown filter or chunk, a palette index
// past the palette), goes through libpng's full API, which handles every
// colour type and bit depth: libpng alone decides what is an error. 16-bit
// samples are cut to their high byte, alpha is dropped and grey computed as
// ITU-R 601-2 luma, as Pillow's convert() does; both paths give the same
// pixels (tested on every filter, colour type and depth, and by the image
// fuzzer).

#include <algorithm>
#include <cctype>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <libdeflate.h>
#include <png.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "feedline/base/error.h"
#include "media/codecs.h"

namespace feedline::media {
namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// libpng allocates and clears a buffer of a chunk's declared length before
// it reads the chunk (text chunks, for one): 71 bytes claiming a 1 GiB
// zTXt chunk cost 1 GiB and seconds, only to end in "read beyond end of
// data". libpng reads every chunk before the first IDAT whole, so each of
// them must fit in the data before libpng sees it; a file where one runs
// past the end is refused here, as libpng would refuse it, but at once.
// (From the image data on, libpng reads only what the rows need, and a file
// cut after the image data still decodes.)
void check_chunk_lengths(std::span<const uint8_t> data, std::string_view name) {
  std::size_t at = 8;
  while (data.size() >= at + 8) {
    const uint32_t length = be32(&data[at]);
    const uint8_t* type = &data[at + 4];
    if (std::memcmp(type, "IDAT", 4) == 0) return;
    const std::size_t left = data.size() - at - 8;
    if (length > 0x7FFFFFFFu || left < std::size_t{length} + 4) {
      std::string shown;
      for (int i = 0; i < 4; ++i) {
        const auto ch = static_cast<char>(type[i]);
        shown += std::isalpha(static_cast<unsigned char>(ch)) != 0 ? ch : '?';
      }
      throw DecodeError(std::string(name) + ": invalid PNG: the '" + shown +
                        "' chunk at byte " + std::to_string(at) + " declares " +
                        std::to_string(length) + " bytes, but only " +
                        std::to_string(left >= 4 ? left - 4 : 0) +
                        " follow (cut short or damaged)");
    }
    at += std::size_t{length} + 12;
  }
}

uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>(
      (rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// Writes one RGB pixel in `format` (grey as Pillow's convert("L") computes
// it); returns the next pixel's place.
uint8_t* put_pixel(const uint8_t* rgb, PixelFormat format, uint8_t* dst) {
  switch (format) {
    case PixelFormat::kRgb:
      dst[0] = rgb[0], dst[1] = rgb[1], dst[2] = rgb[2];
      return dst + 3;
    case PixelFormat::kBgr:
      dst[0] = rgb[2], dst[1] = rgb[1], dst[2] = rgb[0];
      return dst + 3;
    case PixelFormat::kGray:
      *dst = luma(rgb);
      return dst + 1;
  }
  return dst;
}

bool is_type(const uint8_t* type, const char (&name)[5]) {
  return std::memcmp(type, name, 4) == 0;
}

// Ancillary chunks that do not change a decoded sample: text, time,
// physical size, colour information (gAMA, cHRM, iCCP, sRGB, sBIT, bKGD:
// samples are given as stored), EXIF, and tRNS (alpha is dropped).
bool ignorable(const uint8_t* type) {
  static constexpr const char* kNames[] = {
      "tEXt", "zTXt", "iTXt", "tIME", "pHYs", "sRGB", "gAMA",
      "cHRM", "iCCP", "sBIT", "bKGD", "eXIf", "tRNS"};
  for (const char* n : kNames) {
    if (std::memcmp(type, n, 4) == 0) return true;
  }
  return false;
}

// One decompressor per thread (libdeflate's are not thread-safe and cost
// a few KiB to set up).
libdeflate_decompressor* inflater() {
  struct Free {
    void operator()(libdeflate_decompressor* d) const {
      libdeflate_free_decompressor(d);
    }
  };
  thread_local std::unique_ptr<libdeflate_decompressor, Free> d(
      libdeflate_alloc_decompressor());
  return d.get();
}

uint8_t paeth_predictor(int a, int b, int c) {
  const int pa = std::abs(b - c);
  const int pb = std::abs(a - c);
  const int pc = std::abs(a + b - 2 * c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  return static_cast<uint8_t>(pb <= pc ? b : c);
}

#if defined(__SSE2__)
// Paeth for 3- or 4-byte pixels, one pixel per step in 16-bit lanes. Reads
// four bytes at each pixel (the row must be followed by a readable byte)
// and writes back only `bpp`.
void paeth_sse2(uint8_t* row, const uint8_t* prev, std::size_t n, int bpp) {
  const __m128i zero = _mm_setzero_si128();
  auto load = [&](const uint8_t* p) {
    int32_t v = 0;
    std::memcpy(&v, p, 4);
    return _mm_unpacklo_epi8(_mm_cvtsi32_si128(v), zero);
  };
  auto abs16 = [&](__m128i v) {
    return _mm_max_epi16(v, _mm_sub_epi16(zero, v));
  };
  __m128i a = zero;  // the pixel to the left (reconstructed)
  __m128i c = zero;  // the one above that
  for (std::size_t i = 0; i < n; i += static_cast<std::size_t>(bpp)) {
    const __m128i b = load(prev + i);
    const __m128i x = load(row + i);
    const __m128i pa_s = _mm_sub_epi16(b, c);
    const __m128i pb_s = _mm_sub_epi16(a, c);
    const __m128i pa = abs16(pa_s);
    const __m128i pb = abs16(pb_s);
    const __m128i pc = abs16(_mm_add_epi16(pa_s, pb_s));
    const __m128i smallest = _mm_min_epi16(pa, _mm_min_epi16(pb, pc));
    const __m128i use_a = _mm_cmpeq_epi16(pa, smallest);
    const __m128i use_b = _mm_cmpeq_epi16(pb, smallest);
    const __m128i b_or_c =
        _mm_or_si128(_mm_and_si128(use_b, b), _mm_andnot_si128(use_b, c));
    const __m128i pred =
        _mm_or_si128(_mm_and_si128(use_a, a), _mm_andnot_si128(use_a, b_or_c));
    a = _mm_and_si128(_mm_add_epi16(x, pred), _mm_set1_epi16(0xFF));
    c = b;
    const int32_t out = _mm_cvtsi128_si32(_mm_packus_epi16(a, zero));
    std::memcpy(row + i, &out, static_cast<std::size_t>(bpp));
  }
}
#endif

// Undoes one row's filter in place; `prev` is the row above (reconstructed)
// or zeros. False for a filter type PNG does not define.
bool unfilter(uint8_t filter, uint8_t* row, const uint8_t* prev, std::size_t n,
              int bpp) {
  const auto step = static_cast<std::size_t>(bpp);
  switch (filter) {
    case 0:
      return true;
    case 1:
      for (std::size_t i = step; i < n; ++i) row[i] += row[i - step];
      return true;
    case 2:
      for (std::size_t i = 0; i < n; ++i) row[i] += prev[i];
      return true;
    case 3:
      for (std::size_t i = 0; i < step; ++i) row[i] += prev[i] >> 1;
      for (std::size_t i = step; i < n; ++i)
        row[i] += static_cast<uint8_t>((row[i - step] + prev[i]) >> 1);
      return true;
    case 4:
#if defined(__SSE2__)
      if (bpp == 3 || bpp == 4) {
        paeth_sse2(row, prev, n, bpp);
        return true;
      }
#endif
      for (std::size_t i = 0; i < step; ++i) row[i] += prev[i];
      for (std::size_t i = step; i < n; ++i)
        row[i] += paeth_predictor(row[i - step], prev[i], prev[i - step]);
      return true;
    default:
      return false;
  }
}

// The direct path (see the file comment): the pixels, or nothing when
// libpng should decode this file.
std::optional<DecodedPixels> decode_direct(std::span<const uint8_t> data,
                                           PixelFormat format,
                                           int64_t max_pixels) {
  const uint8_t* p = data.data();
  const std::size_t size = data.size();
  std::size_t at = 8;
  int width = 0;
  int height = 0;
  int colour = 0;
  int channels = 0;      // samples per pixel in the file
  int sample_bytes = 0;  // 1 or 2 (16-bit samples, high byte first)
  int bpp = 0;
  std::span<const uint8_t> palette;
  bool seen_idat = false;
  bool idat_ended = false;
  bool ended = false;
  std::vector<std::span<const uint8_t>> idat;
  while (!ended) {
    if (size - at < 12) return std::nullopt;
    const uint32_t length = be32(p + at);
    const uint8_t* type = p + at + 4;
    if (length > 0x7FFFFFFFu || size - at - 12 < length) return std::nullopt;
    const uint8_t* body = type + 4;
    if (libdeflate_crc32(0, type, std::size_t{length} + 4) !=
        be32(body + length)) {
      return std::nullopt;
    }
    at += std::size_t{length} + 12;
    const bool first = width == 0;
    if (first != is_type(type, "IHDR")) return std::nullopt;
    if (seen_idat && !is_type(type, "IDAT")) idat_ended = true;
    if (is_type(type, "IHDR")) {
      if (length != 13) return std::nullopt;
      const uint32_t w = be32(body);
      const uint32_t h = be32(body + 4);
      const uint8_t depth = body[8];
      colour = body[9];
      if (w == 0 || h == 0 || w > PNG_USER_WIDTH_MAX ||
          h > PNG_USER_HEIGHT_MAX || (depth != 8 && depth != 16) ||
          (colour == 3 && depth != 8) || body[10] != 0 || body[11] != 0 ||
          body[12] != 0) {
        return std::nullopt;
      }
      channels = colour == 0   ? 1
                 : colour == 2 ? 3
                 : colour == 3 ? 1
                 : colour == 4 ? 2
                 : colour == 6 ? 4
                               : 0;
      if (channels == 0) return std::nullopt;
      sample_bytes = depth / 8;
      bpp = channels * sample_bytes;
      width = static_cast<int>(w);
      height = static_cast<int>(h);
    } else if (is_type(type, "PLTE")) {
      // One palette, before the image data, of 1 to 256 entries; a
      // suggested palette of an RGB image goes to libpng.
      if (colour != 3 || seen_idat || !palette.empty() || length == 0 ||
          length % 3 != 0 || length > 768) {
        return std::nullopt;
      }
      palette = {body, length};
    } else if (is_type(type, "IDAT")) {
      if (idat_ended || (colour == 3 && palette.empty())) return std::nullopt;
      seen_idat = true;
      idat.emplace_back(body, length);
    } else if (is_type(type, "IEND")) {
      if (length != 0 || !seen_idat) return std::nullopt;
      ended = true;
    } else if (!ignorable(type)) {
      return std::nullopt;
    }
  }
  // Too large: libpng's path says so, after its own header checks.
  if (int64_t{width} * height > max_pixels) return std::nullopt;

  std::vector<uint8_t> joined;
  std::span<const uint8_t> stream = idat.front();
  if (idat.size() > 1) {
    for (const auto& part : idat)
      joined.insert(joined.end(), part.begin(), part.end());
    stream = joined;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(width) * bpp;
  const std::size_t stride = row_bytes + 1;
  if (static_cast<std::size_t>(height) > (SIZE_MAX - 16) / stride)
    return std::nullopt;
  const std::size_t raw_size = stride * static_cast<std::size_t>(height);
  // 16 bytes to spare: the SSE2 Paeth reads a byte past each pixel.
  auto raw = std::make_unique_for_overwrite<uint8_t[]>(raw_size + 16);
  std::size_t in_used = 0;
  if (libdeflate_zlib_decompress_ex(inflater(), stream.data(), stream.size(),
                                    raw.get(), raw_size, &in_used,
                                    nullptr) != LIBDEFLATE_SUCCESS ||
      in_used != stream.size()) {
    return std::nullopt;
  }
  std::memset(raw.get() + raw_size, 0, 16);
  const std::vector<uint8_t> zeros(row_bytes + 4, 0);
  for (int y = 0; y < height; ++y) {
    uint8_t* row = raw.get() + static_cast<std::size_t>(y) * stride;
    const uint8_t* prev = y == 0 ? zeros.data() : row - stride + 1;
    if (!unfilter(row[0], row + 1, prev, row_bytes, bpp)) return std::nullopt;
  }

  DecodedPixels out;
  out.width = width;
  out.height = height;
  out.channels = format == PixelFormat::kGray ? 1 : 3;
  if ((colour == 2 && bpp == 3 && format == PixelFormat::kRgb) ||
      (colour == 0 && bpp == 1 && format == PixelFormat::kGray)) {
    // The rows as they are, each after its filter byte.
    out.data = raw.get() + 1;
    out.stride = static_cast<std::ptrdiff_t>(stride);
    out.owned = std::move(raw);
    return out;
  }
  const std::size_t n = static_cast<std::size_t>(width) * height;
  out.stride = static_cast<std::ptrdiff_t>(width) * out.channels;
  out.owned = std::make_unique_for_overwrite<uint8_t[]>(
      n * static_cast<std::size_t>(out.channels));
  uint8_t* dst = out.owned.get();
  out.data = dst;
  // Every index of a palette image, looked up in a table of 256 entries;
  // an index past the file's palette sends the file to libpng.
  uint8_t table[256][3] = {};
  if (!palette.empty()) std::memcpy(table, palette.data(), palette.size());
  unsigned largest_index = 0;
  const auto s = static_cast<std::size_t>(sample_bytes);
  for (int y = 0; y < height; ++y) {
    const uint8_t* src = raw.get() + static_cast<std::size_t>(y) * stride + 1;
    for (int x = 0; x < width; ++x, src += bpp) {
      uint8_t rgb[3];
      if (colour == 3) {
        largest_index = std::max(largest_index, unsigned{src[0]});
        std::memcpy(rgb, table[src[0]], 3);
      } else if (channels >= 3) {
        rgb[0] = src[0], rgb[1] = src[s], rgb[2] = src[2 * s];
      } else {
        rgb[0] = rgb[1] = rgb[2] = src[0];
      }
      dst = put_pixel(rgb, format, dst);
    }
  }
  if (colour == 3 && std::size_t{largest_index} * 3 >= palette.size()) {
    return std::nullopt;
  }
  return out;
}

// libpng's full API, for every PNG the direct path does not take. It
// reports errors by longjmp, so the two functions that call setjmp below
// hold only plain data, and nothing between them and libpng has a
// destructor; the caller owns every allocation.
struct FullReader {
  std::span<const uint8_t> data;
  std::size_t at = 0;
  char message[160] = "unknown error";
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* reader = static_cast<FullReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", message);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp /*png*/, png_const_charp /*message*/) {}

void read_from_span(png_structp png, png_bytep out, std::size_t n) {
  auto* reader = static_cast<FullReader*>(png_get_io_ptr(png));
  if (reader->data.size() - reader->at < n) {
    png_error(png, "read beyond end of data");
  }
  std::memcpy(out, reader->data.data() + reader->at, n);
  reader->at += n;
}

struct ReadGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~ReadGuard() { png_destroy_read_struct(&png, &info, nullptr); }
};

struct Header {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  int depth = 0;
  int colour = 0;
};

// Reads the chunks up to the image data; false when libpng refuses them.
bool read_header(png_structp png, png_infop info, Header* header) {
  if (setjmp(png_jmpbuf(png)) != 0) return false;
  png_read_info(png, info);
  png_get_IHDR(png, info, &header->width, &header->height, &header->depth,
               &header->colour, nullptr, nullptr, nullptr);
  return true;
}

// Sets libpng up to read `data` (held by `reader`) and reads its header;
// throws DecodeError, naming `name`, when libpng refuses it.
Header start_reading(std::span<const uint8_t> data, std::string_view name,
                     FullReader* reader, ReadGuard* guard) {
  check_chunk_lengths(data, name);
  guard->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, reader,
                                      on_png_error, on_png_warning);
  if (guard->png == nullptr) throw std::bad_alloc();
  guard->info = png_create_info_struct(guard->png);
  if (guard->info == nullptr) throw std::bad_alloc();
  png_set_read_fn(guard->png, reader, read_from_span);
  // Damaged ancillary chunks are warnings, not errors.
  png_set_benign_errors(guard->png, 1);
  Header header;
  if (!read_header(guard->png, guard->info, &header)) {
    throw DecodeError(std::string(name) + ": invalid PNG: " + reader->message);
  }
  return header;
}

// Decodes the image as 8-bit RGB into `rows` (`row_bytes` each), the
// samples as the file stores them: palettes looked up, grey of 1, 2 or 4
// bits widened to 8 (0..255) and repeated, 16-bit samples cut to their
// high byte (as Pillow and OpenCV do), alpha and tRNS left out, Adam7
// interlacing undone. No colour management: gAMA, cHRM, iCCP and sBIT do
// not change a sample, as in Pillow, OpenCV and FFmpeg (libpng's simplified
// API would convert 16-bit and gAMA-tagged images to sRGB).
bool read_rgb_rows(png_structp png, png_infop info, const Header& header,
                   std::size_t row_bytes, png_bytep* rows) {
  if (setjmp(png_jmpbuf(png)) != 0) return false;
  if (header.colour == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (header.colour == PNG_COLOR_TYPE_GRAY && header.depth < 8) {
    png_set_expand_gray_1_2_4_to_8(png);
  }
  if (header.depth == 16) png_set_strip_16(png);
  png_set_strip_alpha(png);
  if ((header.colour & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != row_bytes ||
      png_get_bit_depth(png, info) != 8 || png_get_channels(png, info) != 3) {
    png_error(png, "libpng did not give 8-bit RGB rows");
  }
  png_read_image(png, rows);
  return true;
}

}  // namespace

bool is_png(std::span<const uint8_t> data) {
  static constexpr uint8_t kMagic[8] = {0x89, 'P',  'N',  'G',
                                        '\r', '\n', 0x1A, '\n'};
  return data.size() >= 8 && std::memcmp(data.data(), kMagic, 8) == 0;
}

ImageInfo probe_png(std::span<const uint8_t> data, std::string_view name) {
  FullReader reader{data};
  ReadGuard guard;
  const Header header = start_reading(data, name, &reader, &guard);
  return ImageInfo{static_cast<int>(header.width),
                   static_cast<int>(header.height), "png"};
}

std::optional<DecodedPixels> decode_png_direct(std::span<const uint8_t> data,
                                               PixelFormat format,
                                               int64_t max_pixels) {
  if (!is_png(data)) return std::nullopt;
  return decode_direct(data, format, max_pixels);
}

DecodedPixels decode_png(std::span<const uint8_t> data, PixelFormat format,
                         int64_t max_pixels, std::string_view name) {
  std::optional<DecodedPixels> direct =
      decode_png_direct(data, format, max_pixels);
  if (direct) return std::move(*direct);
  return decode_png_with_libpng(data, format, max_pixels, name);
}

DecodedPixels decode_png_with_libpng(std::span<const uint8_t> data,
                                     PixelFormat format, int64_t max_pixels,
                                     std::string_view name) {
  FullReader reader{data};
  ReadGuard guard;
  const Header header = start_reading(data, name, &reader, &guard);
  if (header.width > 0x7FFFFFFF || header.height > 0x7FFFFFFF) {
    check_dimensions(0, 0, max_pixels, name);
  }
  const int w = static_cast<int>(header.width);
  const int h = static_cast<int>(header.height);
  check_dimensions(w, h, max_pixels, name);
  const std::size_t row = static_cast<std::size_t>(w) * 3;
  auto rgb = std::make_unique_for_overwrite<uint8_t[]>(
      row * static_cast<std::size_t>(h));
  std::vector<png_bytep> rows(static_cast<std::size_t>(h));
  for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = rgb.get() + y * row;
  if (!read_rgb_rows(guard.png, guard.info, header, row, rows.data())) {
    throw DecodeError(std::string(name) +
                      ": corrupt PNG data: " + reader.message);
  }
  DecodedPixels out;
  out.width = w;
  out.height = h;
  out.channels = format == PixelFormat::kGray ? 1 : 3;
  out.stride = static_cast<std::ptrdiff_t>(w) * out.channels;
  if (format == PixelFormat::kRgb) {
    out.data = rgb.get();
    out.owned = std::move(rgb);
    return out;
  }
  const std::size_t n =
      static_cast<std::size_t>(w) * static_cast<std::size_t>(h);
  out.owned = std::make_unique_for_overwrite<uint8_t[]>(
      n * static_cast<std::size_t>(out.channels));
  uint8_t* dst = out.owned.get();
  out.data = dst;
  for (std::size_t i = 0; i < n; ++i) dst = put_pixel(&rgb[3 * i], format, dst);
  return out;
}

}  // namespace feedline::media
