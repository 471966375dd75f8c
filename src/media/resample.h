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
//
// A Resampler is planned from the source's size alone, before any pixel
// exists, and says which source region it reads (region()): a decoder that
// can decode part of an image (libjpeg-turbo's cropped and skipped
// scanlines) decodes only that.

#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace feedline::media {

// A rectangle of an image: columns [x, x + w), rows [y, y + h).
struct Region {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
};

// Pixels of an image of width x height, of which `data` holds the region
// starting at column `left`, row `top` (the whole image when both are 0).
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
  int left = 0;
  int top = 0;
};

class RowSink {
 public:
  virtual void row(int y, const float* values) = 0;

 protected:
  ~RowSink() = default;
};

// Scales an image of width x height (true extent extent_w x extent_h, 0 for
// the same) to scaled_w x scaled_h and computes the window [x0, x0 + out_w)
// x [y0, y0 + out_h) of the result.
class Resampler {
 public:
  Resampler(int width, int height, double extent_w, double extent_h,
            double scaled_w, double scaled_h, int x0, int y0, int out_w,
            int out_h);

  // Resamples the box [box_x, box_x + box_w) x [box_y, box_y + box_h) (in
  // source pixels; fractional at a DCT scale) of an image of width x height
  // to exactly out_w x out_h, reading nothing outside the box's pixels: the
  // result equals cropping those pixels out first and resizing the crop
  // (Pillow's crop() then resize(), torchvision's resized_crop()).
  static Resampler for_box(int width, int height, double box_x, double box_y,
                           double box_w, double box_h, int out_w, int out_h);

  // The source pixels run() reads.
  Region region() const { return region_; }

  // Makes run() give every row mirrored left to right (output column x
  // becomes out_w - 1 - x): the horizontal taps are put in reverse order,
  // so a flip costs nothing. Calling it again undoes it.
  void mirror();

  // Passes each output row, top to bottom, to `sink` as out_w * channels
  // floats in [0, 255]. `src` must hold region() of an image of the size
  // given to the constructor, with 1, 3 or 4 channels.
  void run(const Pixels& src, RowSink& sink) const;

  // The taps of one axis: output i reads count[i] inputs from first[i], with
  // weights at weights[i * taps] (zero past count[i]).
  struct Axis {
    std::vector<int> first;
    std::vector<int> count;
    std::vector<float> weights;
    int taps = 0;
  };

 private:
  Resampler(Axis hx, Axis vy);

  template <int C>
  void run_channels(const Pixels& src, RowSink& sink) const;

  Axis hx_;
  Axis vy_;
  Region region_;
};

// Splits n interleaved RGB pixels (3n floats, as a Resampler's rows) into
// three planes: plane c gets v * scale[c] + bias[c] (a multiply, then an
// add, as the plain loop does, so that the AVX2 path gives the same
// values).
void store_planes3(const float* v, int n, const float* scale, const float* bias,
                   float* const planes[3]);

}  // namespace feedline::media
