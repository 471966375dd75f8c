// SPDX-License-Identifier: Apache-2.0
//
// JPEG and PNG decoding straight to the array a model takes.
//
// decode_image() turns encoded bytes into a Buffer of the requested size,
// pixel format, layout and dtype in one pass:
//   1. JPEG: libjpeg-turbo decodes at the smallest DCT scale (n/8) whose
//      result still covers the resize target, so a 2000x1500 photo bound for
//      256 pixels is decoded at 1/4 size. PNG: libpng.
//   2. An antialiased (triangle filter, as Pillow's BILINEAR) separable
//      resize computes only the pixels inside the centre crop.
//   3. The result is written in HWC or CHW order, as uint8 or as float32
//      normalised with per-channel mean and std, straight into the output
//      (which may be one slot of a batch: decode_image_into()).
// The geometry follows torchvision: Resize(shorter) keeps the aspect ratio
// and truncates the longer side; CenterCrop rounds the offset half to even.
//
// Errors: DecodeError naming the input (`name`) for bytes that are not a
// JPEG or PNG, corrupt or truncated data (libjpeg-turbo warnings count as
// errors: no partially grey image is ever returned), and images over
// `max_pixels`; InvalidArgument for options that do not fit the image (a
// crop larger than the resized image).
//
// Thread safety: every function may run concurrently; none keeps state.

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/base/buffer.h"

namespace feedline::media {

enum class PixelFormat { kRgb, kBgr, kGray };
enum class Layout { kHWC, kCHW };

// How resize_width x resize_height is reached.
enum class ResizeMode {
  kStretch,  // to exactly that size, whatever the aspect ratio
  kPad,      // fit inside, keeping the aspect ratio; centred on black
  kCrop,     // cover it, keeping the aspect ratio; centre-cropped
};

// The default pixel limit of every image decoder (JPEG, PNG, and FFmpeg's
// image and video decoders): 2^27, an 11585 x 11585 image. An image over it
// is refused from its header, before any pixel memory is allocated.
inline constexpr int64_t kDefaultMaxPixels = int64_t{1} << 27;

struct ImageOptions {
  // Resize to exactly resize_width x resize_height, or (resize_shorter > 0)
  // so that the shorter side is resize_shorter, keeping the aspect ratio.
  // All zero: no resize.
  int resize_width = 0;
  int resize_height = 0;
  ResizeMode resize_mode = ResizeMode::kStretch;
  int resize_shorter = 0;
  // Centre crop after resizing; zero: none.
  int crop_width = 0;
  int crop_height = 0;
  PixelFormat pixel_format = PixelFormat::kRgb;
  Layout layout = Layout::kHWC;
  // kUint8, or kFloat32 for (value / 255 - mean[c]) / std[c].
  DType dtype = DType::kUint8;
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> std{1.f, 1.f, 1.f};
  // Use libjpeg-turbo's DCT-domain downscaling when it covers the target.
  bool dct_scaling = true;
  // Images with more pixels are rejected before any allocation.
  int64_t max_pixels = kDefaultMaxPixels;
};

struct ImageInfo {
  int width = 0;
  int height = 0;
  const char* format = "";  // "jpeg" or "png"
};

// Validates `options`. Throws: InvalidArgument.
void check_image_options(const ImageOptions& options);

// Reads the header. Throws: DecodeError naming `name`.
ImageInfo probe_image(std::span<const uint8_t> data, std::string_view name);

// The shape decode_image() gives an image of `width` x `height`.
// Throws: InvalidArgument if the crop does not fit.
std::vector<int64_t> image_output_shape(int width, int height,
                                        const ImageOptions& options);

// Decodes `data` into a new Buffer (see the file comment).
Buffer decode_image(std::span<const uint8_t> data, const ImageOptions& options,
                    std::string_view name);

// Decodes into `out`, which must have exactly the output shape and dtype
// (for example one slot of a batch). Throws as decode_image(), and
// InvalidArgument naming the image when its output shape differs from `out`.
void decode_image_into(std::span<const uint8_t> data,
                       const ImageOptions& options, std::string_view name,
                       const Buffer& out);

// One encoded image of a batch: its name (for errors) and its bytes.
struct EncodedImage {
  std::string_view name;
  std::span<const uint8_t> data;
};

// Why one image of a batch was left out.
struct ImageFailure {
  std::size_t index;
  std::string message;
};

// Decodes `images` straight into one batch Buffer of shape (N, ...), N being
// the number that decoded; each failure is appended to `*failures` and its
// image left out. The options must give every image one size (a resize to
// width x height, or a crop); without that, images whose shape differs from
// the first good one fail. Returns an empty (N = 0) batch when none decoded.
// Throws: InvalidArgument for bad options.
Buffer decode_image_batch(std::span<const EncodedImage> images,
                          const ImageOptions& options,
                          std::vector<ImageFailure>* failures);

}  // namespace feedline::media
