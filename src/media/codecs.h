// SPDX-License-Identifier: Apache-2.0
//
// The JPEG (libjpeg-turbo) and PNG (libpng) decoders behind decode_image().
// Each returns 8-bit interleaved pixels in the requested pixel format.

#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "feedline/media/image.h"
#include "media/resample.h"

namespace feedline::media {

// Decoded 8-bit interleaved pixels: `data` holds the rows and columns of
// the image starting at (left, top), `stride` bytes apart. It points into
// `owned`, or into the decoding thread's scratch memory, which stays valid
// until that thread decodes its next image.
struct DecodedPixels {
  const uint8_t* data = nullptr;
  std::unique_ptr<uint8_t[]> owned;
  int width = 0;  // the whole image, at the decode scale
  int height = 0;
  int channels = 0;  // 1 for kGray, else 3
  std::ptrdiff_t stride = 0;
  // The full image's size in these pixels (see media::Pixels): W * n/8 for
  // a JPEG decoded at scale n/8, which libjpeg rounds up to `width`.
  double extent_w = 0;
  double extent_h = 0;
  int left = 0;
  int top = 0;
};

// The part of an image of width x height (at the decode scale; true extent
// extent_w x extent_h) that the caller reads. A decoder may decode more.
using RegionFor = std::function<Region(int width, int height, double extent_w,
                                       double extent_h)>;

bool is_jpeg(std::span<const uint8_t> data);
bool is_png(std::span<const uint8_t> data);

ImageInfo probe_jpeg(std::span<const uint8_t> data, std::string_view name);
ImageInfo probe_png(std::span<const uint8_t> data, std::string_view name);

// Decodes at scale 1/scale_denom (1, 2, 4 or 8), and only the rows and, to
// the iMCU, columns that region_for asks for (all of them when it is
// empty); the rest of the image is still entropy-decoded, so corrupt data
// anywhere is an error.
DecodedPixels decode_jpeg(std::span<const uint8_t> data, PixelFormat format,
                          unsigned scale_denom, int64_t max_pixels,
                          std::string_view name, const RegionFor& region_for);

// The samples as stored (no colour management; 16-bit samples cut to their
// high byte). Non-interlaced PNGs of 8-bit palette or 8- or 16-bit grey,
// grey + alpha, RGB or RGBA samples are decoded directly (libdeflate,
// in-place unfiltering); every other PNG, and any the direct path finds
// unusual, by libpng (decode_png_with_libpng), which alone decides what is
// an error. Both give the same pixels.
DecodedPixels decode_png(std::span<const uint8_t> data, PixelFormat format,
                         int64_t max_pixels, std::string_view name);

// The direct path alone: the pixels, or nothing when the file is one for
// libpng (for tests and fuzzing).
std::optional<DecodedPixels> decode_png_direct(std::span<const uint8_t> data,
                                               PixelFormat format,
                                               int64_t max_pixels);

// libpng's full API alone (for any PNG; for tests and fuzzing, the
// reference the direct path is compared with).
DecodedPixels decode_png_with_libpng(std::span<const uint8_t> data,
                                     PixelFormat format, int64_t max_pixels,
                                     std::string_view name);

// A PNG file of one image: `channels` 1 (grey), 3 (RGB) or 4 (RGBA) of
// `bit_depth` 8 or 16, rows packed from `pixels` (16-bit samples big-endian
// as PNG stores them, or byte-swapped when `swap16`); every row
// Paeth-filtered, deflated by libdeflate at `level` 0-9 on zlib's scale
// (-1: 6, the default).
std::vector<uint8_t> write_png(const uint8_t* pixels, int width, int height,
                               int channels, int bit_depth, bool swap16,
                               int level);

// Throws DecodeError("<name>: image of W x H pixels exceeds ...") when the
// image is larger than `max_pixels` or has a zero dimension.
void check_dimensions(int width, int height, int64_t max_pixels,
                      std::string_view name);

}  // namespace feedline::media
