// SPDX-License-Identifier: Apache-2.0
//
// PNG through libpng's simplified API, which handles every colour type and
// bit depth and reports errors without longjmp reaching our frames. Images
// are read as 8-bit RGBA and then reduced to the requested format the way
// Pillow's convert() does: alpha dropped, grey as ITU-R 601-2 luma.

#include <cstring>
#include <memory>
#include <string>

#include <png.h>

#include "feedline/base/error.h"
#include "media/codecs.h"

namespace feedline::media {
namespace {

// Frees what libpng allocated for `image` on every path.
struct ImageGuard {
  png_image* image;
  ~ImageGuard() { png_image_free(image); }
};

void begin(png_image* image, std::span<const uint8_t> data,
           std::string_view name) {
  std::memset(image, 0, sizeof(*image));
  image->version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(image, data.data(), data.size()) == 0) {
    throw DecodeError(std::string(name) + ": invalid PNG: " + image->message);
  }
}

uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>(
      (rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

}  // namespace

bool is_png(std::span<const uint8_t> data) {
  static constexpr uint8_t kMagic[8] = {0x89, 'P',  'N',  'G',
                                        '\r', '\n', 0x1A, '\n'};
  return data.size() >= 8 && std::memcmp(data.data(), kMagic, 8) == 0;
}

ImageInfo probe_png(std::span<const uint8_t> data, std::string_view name) {
  png_image image;
  begin(&image, data, name);
  ImageGuard guard{&image};
  return ImageInfo{static_cast<int>(image.width),
                   static_cast<int>(image.height), "png"};
}

DecodedPixels decode_png(std::span<const uint8_t> data, PixelFormat format,
                         int64_t max_pixels, std::string_view name) {
  png_image image;
  begin(&image, data, name);
  ImageGuard guard{&image};
  if (image.width > 0x7FFFFFFF || image.height > 0x7FFFFFFF) {
    check_dimensions(0, 0, max_pixels, name);
  }
  const int w = static_cast<int>(image.width);
  const int h = static_cast<int>(image.height);
  check_dimensions(w, h, max_pixels, name);
  image.format = PNG_FORMAT_RGBA;
  const std::size_t n =
      static_cast<std::size_t>(w) * static_cast<std::size_t>(h);
  std::unique_ptr<uint8_t[]> rgba(new uint8_t[n * 4]);
  if (png_image_finish_read(&image, nullptr, rgba.get(), 0, nullptr) == 0) {
    throw DecodeError(std::string(name) +
                      ": corrupt PNG data: " + image.message);
  }
  DecodedPixels out;
  out.width = w;
  out.height = h;
  out.channels = format == PixelFormat::kGray ? 1 : 3;
  out.stride = static_cast<std::ptrdiff_t>(w) * out.channels;
  out.owned.reset(new uint8_t[n * static_cast<std::size_t>(out.channels)]);
  uint8_t* dst = out.owned.get();
  out.data = dst;
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* px = &rgba[4 * i];
    switch (format) {
      case PixelFormat::kRgb:
        dst[3 * i] = px[0], dst[3 * i + 1] = px[1], dst[3 * i + 2] = px[2];
        break;
      case PixelFormat::kBgr:
        dst[3 * i] = px[2], dst[3 * i + 1] = px[1], dst[3 * i + 2] = px[0];
        break;
      case PixelFormat::kGray:
        dst[i] = luma(px);
        break;
    }
  }
  return out;
}

}  // namespace feedline::media
