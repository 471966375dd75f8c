// SPDX-License-Identifier: Apache-2.0
//
// Antialiased separable resampling of 8-bit interleaved images.
//
// The filter is a triangle widened by the downscale factor (what Pillow
// calls BILINEAR, and what torchvision's Resize does on PIL images), so that
// a downscale averages every source pixel it covers instead of skipping
// some. Only the output pixels inside [x0, x0 + out_w) x [y0, y0 + out_h) of
// the scaled image are computed, which is how a centre crop costs nothing
// extra. Intermediate values are floats; no rounding happens between the
// two passes.

#pragma once

#include <cstddef>
#include <cstdint>

namespace feedline::media {

struct Pixels {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;
  std::ptrdiff_t stride = 0;  // bytes from one row to the next
  // The image's true size in these pixels, when the last column or row only
  // partly belongs to it (a JPEG decoded at a DCT scale: libjpeg rounds
  // W * n/8 up). Zero: width and height.
  double extent_w = 0;
  double extent_h = 0;
};

// Receives the output one row at a time: `values` holds out_w * channels
// floats in [0, 255], interleaved.
class RowSink {
 public:
  virtual void row(int y, const float* values) = 0;

 protected:
  ~RowSink() = default;
};

// Resamples `src` as if scaled to scaled_w x scaled_h and hands the rows of
// the window starting at (x0, y0) of size out_w x out_h to `sink`.
// Requires: the window lies inside the scaled image.
void resample(const Pixels& src, double scaled_w, double scaled_h, int x0,
              int y0, int out_w, int out_h, RowSink& sink);

}  // namespace feedline::media
