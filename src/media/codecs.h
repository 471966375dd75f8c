// SPDX-License-Identifier: Apache-2.0
//
// The JPEG (libjpeg-turbo) and PNG (libpng) decoders behind decode_image().
// Each returns 8-bit interleaved pixels in the requested pixel format.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "feedline/media/image.h"

namespace feedline::media {

struct DecodedPixels {
  std::unique_ptr<uint8_t[]> data;
  int width = 0;
  int height = 0;
  int channels = 0;  // 1 for kGray, else 3
  std::ptrdiff_t stride = 0;
  // The full image's size in these pixels (see media::Pixels): W * n/8 for
  // a JPEG decoded at scale n/8, which libjpeg rounds up to `width`.
  double extent_w = 0;
  double extent_h = 0;
};

bool is_jpeg(std::span<const uint8_t> data);
bool is_png(std::span<const uint8_t> data);

ImageInfo probe_jpeg(std::span<const uint8_t> data, std::string_view name);
ImageInfo probe_png(std::span<const uint8_t> data, std::string_view name);

// Decodes at the smallest DCT scale whose size is at least min_width x
// min_height (with `dct_scaling`; else at full size).
DecodedPixels decode_jpeg(std::span<const uint8_t> data, PixelFormat format,
                          int min_width, int min_height, bool dct_scaling,
                          int64_t max_pixels, std::string_view name);

DecodedPixels decode_png(std::span<const uint8_t> data, PixelFormat format,
                         int64_t max_pixels, std::string_view name);

// Throws DecodeError("<name>: image of W x H pixels exceeds ...") when the
// image is larger than `max_pixels` or has a zero dimension.
void check_dimensions(int width, int height, int64_t max_pixels,
                      std::string_view name);

}  // namespace feedline::media
