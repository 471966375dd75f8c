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
// Training augmentation (random_resized_crop, flip_probability) happens in
// the same pass: the crop box is sampled with torchvision's
// RandomResizedCrop rule, and only the part of the JPEG the box covers is
// decoded (whole iMCU columns, rows skipped by entropy decoding only), at
// the smallest DCT scale that still covers the output.
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
#include <functional>
#include <optional>
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

// torchvision's RandomResizedCrop: a box of a random share of the image's
// area (scale) and aspect ratio (ratio, sampled log-uniformly), resized to
// width x height. Zero width: off.
struct RandomResizedCrop {
  int width = 0;
  int height = 0;
  std::array<double, 2> scale{0.08, 1.0};
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
};

// A rectangle of the source image, in its own pixels (as torchvision's
// get_params returns it: top, left, height, width).
struct CropBox {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
};

// Where an image's random draws come from. With a seed, they are a function
// of (seed, epoch, the image's index): the same on any number of threads and
// in any order. Without one, every decode draws afresh.
struct AugmentSeed {
  bool seeded = false;
  uint64_t seed = 0;
  uint64_t epoch = 0;
};

// A stream of uniform numbers in [0, 1) for one image, derived from
// (seed, epoch, index, stream) with a counter-based mix (SplitMix64): no
// state is shared between images or threads. `stream` separates the crop's
// draws from the flip's.
class UniformDraws {
 public:
  UniformDraws(const AugmentSeed& seed, uint64_t index, uint64_t stream);
  double next();

 private:
  uint64_t state_;
};

// torchvision's RandomResizedCrop.get_params as a function of its uniform
// draws: up to 10 attempts, each taking four numbers (area share, log
// aspect ratio, top, left; top = floor(u * (height - h + 1))), then the
// centre crop of the ratio range's nearest ratio. Widths and heights round
// half to even, as Python's round().
// `uniform` gives the next number in [0, 1).
CropBox sample_resized_crop(int width, int height, const RandomResizedCrop& rrc,
                            const std::function<double()>& uniform);

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
  // Decode only the JPEG rows and iMCU columns the output reads. False
  // decodes the whole image first (the same pixels, more work): a reference
  // for measuring what partial decoding saves.
  bool partial_decode = true;
  // Images with more pixels are rejected before any allocation.
  int64_t max_pixels = kDefaultMaxPixels;
  // Training augmentation: a random resized crop instead of a resize (not
  // with resize_* or crop_*), then a horizontal flip with this probability.
  RandomResizedCrop random_resized_crop;
  double flip_probability = 0.0;
  AugmentSeed seed;
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

// The index a seeded augmentation keys an image by when the caller gives
// none: a hash (FNV-1a) of its name, the path or archive member, which
// identifies a sample wherever and whenever it is decoded.
uint64_t sample_index_of(std::string_view name);
// The same for an image that has no name (bytes handed over in memory): a
// hash of its bytes, so images of one size draw apart and the same image
// draws alike wherever it is decoded.
uint64_t sample_index_of_bytes(std::span<const uint8_t> data);

// Decodes `data` into a new Buffer (see the file comment). `index` keys a
// seeded augmentation (default: sample_index_of(name)).
Buffer decode_image(std::span<const uint8_t> data, const ImageOptions& options,
                    std::string_view name,
                    std::optional<uint64_t> index = std::nullopt);

// Applies the same geometry, augmentation, pixel format, layout and dtype
// to pixels decoded elsewhere (an FFmpeg image format, a user's own
// decoder): `pixels` is contiguous uint8 of shape (H, W, 3) (RGB), (H, W, 1)
// or (H, W) (grey). Throws: InvalidArgument for other pixels or bad options,
// DecodeError over max_pixels.
Buffer transform_image(const Buffer& pixels, const ImageOptions& options,
                       std::string_view name,
                       std::optional<uint64_t> index = std::nullopt);

// Decodes into `out`, which must have exactly the output shape and dtype
// (for example one slot of a batch). Throws as decode_image(), and
// InvalidArgument naming the image when its output shape differs from `out`.
void decode_image_into(std::span<const uint8_t> data,
                       const ImageOptions& options, std::string_view name,
                       const Buffer& out,
                       std::optional<uint64_t> index = std::nullopt);

// One encoded image of a batch: its name (for errors), its bytes, and the
// index that keys a seeded augmentation (default: from the name).
struct EncodedImage {
  std::string_view name;
  std::span<const uint8_t> data;
  std::optional<uint64_t> index;
};

// Why one image of a batch was left out.
struct ImageFailure {
  std::size_t index;
  std::string message;
};

// Decodes `images` straight into one batch Buffer of shape (N, ...), N being
// the number that decoded; each failure is appended to `*failures` (in
// input order) and its image left out. The options must give every image one
// size (a resize to width x height, or a crop); without that, images whose
// shape differs from the first good one fail. Returns an empty (N = 0) batch
// when none decoded. Throws: InvalidArgument for bad options.
Buffer decode_image_batch(std::span<const EncodedImage> images,
                          const ImageOptions& options,
                          std::vector<ImageFailure>* failures);

// Rewrites a JPEG for cropped decoding without changing a pixel: the same
// DCT coefficients in one baseline scan, with a restart marker every few
// MCUs (at least 8 to a row where the row's MCU count allows) and a CRC-32
// of the scan in an APP15 segment. decode_image() then decodes a crop of
// it (a random resized crop, a centre crop) from only the rows and
// restart intervals the crop covers, instead of entropy-decoding every
// row above it. Every decode of it checks the CRC: damage anywhere in the
// scan is a DecodeError, outside the crop too. APP1-APP13 and COM segments
// (EXIF, ICC profiles) are kept; the file grows by 1-3%. A one-time step, like
// writing a dataset's shards. Throws: UnsupportedFormat for input that is
// not a JPEG or cannot take the layout (more than 4 components),
// DecodeError naming `name` for a JPEG libjpeg-turbo cannot read or one of
// more than `max_pixels` pixels (checked from the header).
std::vector<uint8_t> prepare_jpeg(std::span<const uint8_t> data,
                                  std::string_view name,
                                  int64_t max_pixels = kDefaultMaxPixels);

}  // namespace feedline::media
