// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target for the image decoders: arbitrary bytes through
// probe_image() and decode_image() with a few option sets (full size,
// crop only, resize + crop + float, grey padded, random resized crops with a
// flip, seeded by the input's size; the crops decode only part of a JPEG). Any
// outcome but a result or a feedline exception (a crash, a sanitizer report, an
// unexpected exception type) is a finding. PNG input is also decoded by the
// direct path and by libpng alone, as given and with every chunk's CRC made
// right: a different outcome (other pixels, or an error from only one of
// them, or another message) is a finding too. A JPEG's random crops are
// decoded in part and from the whole image: where both decode, other pixels
// are a finding. A JPEG with a restart index (prepare_jpeg) is compared with
// its scan's CRC made right, so that mutations reach the crops cut from its
// restart intervals.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/media/image.h"
#include "media/codecs.h"
#include "media/jpeg_restart.h"

namespace {

// The pixels a PNG decode gives, or its error message.
struct Outcome {
  std::optional<std::vector<uint8_t>> pixels;
  std::string error;
  bool operator==(const Outcome&) const = default;
};

template <typename Decode>
Outcome outcome(Decode decode) {
  try {
    const feedline::media::DecodedPixels p = decode();
    std::vector<uint8_t> v;
    const std::size_t row = static_cast<std::size_t>(p.width) * p.channels;
    for (int y = 0; y < p.height; ++y) {
      const uint8_t* r = p.data + static_cast<std::ptrdiff_t>(y) * p.stride;
      v.insert(v.end(), r, r + row);
    }
    return {std::move(v), ""};
  } catch (const feedline::DecodeError& e) {
    return {std::nullopt, e.what()};
  }
}

void compare_png_paths(std::span<const uint8_t> bytes, int64_t max_pixels) {
  using feedline::media::PixelFormat;
  for (PixelFormat f :
       {PixelFormat::kRgb, PixelFormat::kBgr, PixelFormat::kGray}) {
    const Outcome direct = outcome([&] {
      return feedline::media::decode_png(bytes, f, max_pixels, "fuzz");
    });
    const Outcome libpng = outcome([&] {
      return feedline::media::decode_png_with_libpng(bytes, f, max_pixels,
                                                     "fuzz");
    });
    if (!(direct == libpng)) std::abort();
  }
}

// The same bytes with every chunk's CRC made right, so that a mutated chunk
// reaches the direct path (which hands any file with a wrong CRC to libpng)
// instead of stopping at its CRC check.
std::vector<uint8_t> with_crcs_made_right(std::span<const uint8_t> bytes) {
  std::vector<uint8_t> v(bytes.begin(), bytes.end());
  std::size_t at = 8;
  while (v.size() >= at + 12) {
    const uint32_t n = (uint32_t{v[at]} << 24) | (uint32_t{v[at + 1]} << 16) |
                       (uint32_t{v[at + 2]} << 8) | v[at + 3];
    if (n > v.size() - at - 12) break;
    uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = at + 4; i < at + 8 + n; ++i) {
      crc ^= v[i];
      for (int k = 0; k < 8; ++k) {
        crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
      }
    }
    crc = ~crc;
    for (int k = 0; k < 4; ++k) {
      v[at + 8 + n + static_cast<std::size_t>(k)] =
          static_cast<uint8_t>(crc >> (24 - 8 * k));
    }
    at += std::size_t{n} + 12;
  }
  return v;
}

// The bytes with the restart index's CRC made right, or nothing when they
// are not a restart-indexed JPEG or the CRC is right already.
std::optional<std::vector<uint8_t>> with_jpeg_crc_made_right(
    std::span<const uint8_t> bytes) {
  feedline::media::RestartLayout layout;
  if (!feedline::media::parse_restart_layout(bytes, &layout)) return {};
  const uint32_t crc = feedline::media::restart_scan_crc(bytes, layout);
  if (crc == layout.stored_crc) return {};
  std::vector<uint8_t> v(bytes.begin(), bytes.end());
  for (int k = 0; k < 4; ++k) {
    v[layout.crc_at + static_cast<std::size_t>(k)] =
        static_cast<uint8_t>(crc >> (24 - 8 * k));
  }
  return v;
}

std::optional<std::vector<uint8_t>> decoded(
    std::span<const uint8_t> bytes,
    const feedline::media::ImageOptions& options) {
  try {
    const feedline::Buffer b =
        feedline::media::decode_image(bytes, options, "fuzz");
    const auto* p = b.data_as<uint8_t>();
    return std::vector<uint8_t>(p, p + b.nbytes());
  } catch (const feedline::DecodeError&) {
  } catch (const feedline::InvalidArgument&) {
  }
  return {};
}

void compare_cut_and_whole(std::span<const uint8_t> bytes,
                           feedline::media::ImageOptions options) {
  const auto cut = decoded(bytes, options);
  options.partial_decode = false;
  const auto whole = decoded(bytes, options);
  if (cut && whole && *cut != *whole) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using feedline::DType;
  using feedline::media::ImageOptions;
  std::span<const uint8_t> bytes(data, size);
  // Keep allocations bounded: at most 4 Mpixel images.
  const int64_t max_pixels = int64_t{1} << 22;
  const ImageOptions options[] = {
      {.max_pixels = max_pixels},
      {.resize_shorter = 40,
       .crop_width = 32,
       .crop_height = 32,
       .layout = feedline::media::Layout::kCHW,
       .dtype = DType::kFloat32,
       .max_pixels = max_pixels},
      {.crop_width = 16, .crop_height = 8, .max_pixels = max_pixels},
      {.resize_width = 17,
       .resize_height = 9,
       .resize_mode = feedline::media::ResizeMode::kPad,
       .pixel_format = feedline::media::PixelFormat::kGray,
       .max_pixels = max_pixels},
      {.pixel_format = feedline::media::PixelFormat::kBgr,
       .max_pixels = max_pixels,
       .random_resized_crop = {.width = 24, .height = 20},
       .flip_probability = 1.0,
       .seed = {.seeded = true, .seed = size}},
      {.layout = feedline::media::Layout::kCHW,
       .dtype = DType::kFloat32,
       .max_pixels = max_pixels,
       .random_resized_crop = {.width = 7,
                               .height = 31,
                               .scale = {0.01, 1.0},
                               .ratio = {0.1, 10.0}},
       .flip_probability = 0.5,
       .seed = {.seeded = true, .seed = size + 1}},
  };
  try {
    feedline::media::probe_image(bytes, "fuzz");
  } catch (const feedline::DecodeError&) {
  }
  if (feedline::media::is_png(bytes)) {
    compare_png_paths(bytes, max_pixels);
    const std::vector<uint8_t> fixed = with_crcs_made_right(bytes);
    if (!std::equal(fixed.begin(), fixed.end(), bytes.begin())) {
      compare_png_paths(fixed, max_pixels);
    }
  }
  if (feedline::media::is_jpeg(bytes)) {
    const auto fixed = with_jpeg_crc_made_right(bytes);
    for (std::size_t i = 4; i < std::size(options); ++i) {
      compare_cut_and_whole(fixed ? std::span<const uint8_t>(*fixed) : bytes,
                            options[i]);
    }
  }
  for (const ImageOptions& o : options) {
    try {
      feedline::Buffer b = feedline::media::decode_image(bytes, o, "fuzz");
      volatile uint8_t sink =
          b.nbytes() > 0 ? b.data_as<uint8_t>()[b.nbytes() - 1] : 0;
      (void)sink;
    } catch (const feedline::DecodeError&) {
    } catch (const feedline::InvalidArgument&) {
      // A crop that does not fit this image.
    }
  }
  return 0;
}
