// SPDX-License-Identifier: Apache-2.0

#include "media/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace feedline::media {
namespace {

// The taps of one axis: output i reads count[i] inputs from first[i], with
// weights at weights[i * taps].
struct Axis {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;
  int taps = 0;
};

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Output o of the scaled axis (offset by `offset`) is centred on input
// coordinate (o + offset + 0.5) * extent / scaled, where `extent` is how many
// input pixels the image spans (in_size, or less when the last pixel only
// partly belongs to it); the filter is widened by the downscale factor so
// that every input pixel contributes.
Axis make_axis(int in_size, double extent, double scaled, int offset,
               int out_size) {
  const double scale = extent / scaled;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's support is 1
  Axis a;
  a.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.first.resize(static_cast<std::size_t>(out_size));
  a.count.resize(static_cast<std::size_t>(out_size));
  a.weights.assign(
      static_cast<std::size_t>(out_size) * static_cast<std::size_t>(a.taps),
      0.f);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + offset + 0.5) * scale;
    // floor(x + 0.5): round half up; negative values are clamped to 0.
    int lo = std::max(static_cast<int>(std::floor(center - support + 0.5)), 0);
    int hi =
        std::min(static_cast<int>(std::floor(center + support + 0.5)), in_size);
    hi = std::max(hi, lo + 1);
    lo = std::min(lo, in_size - 1);
    hi = std::min(hi, in_size);
    int n = std::min(hi - lo, a.taps);
    float* w = &a.weights[static_cast<std::size_t>(o) *
                          static_cast<std::size_t>(a.taps)];
    double total = 0;
    for (int k = 0; k < n; ++k) {
      double v = triangle((k + lo - center + 0.5) / filter_scale);
      w[k] = static_cast<float>(v);
      total += v;
    }
    if (total > 0) {
      for (int k = 0; k < n; ++k) w[k] = static_cast<float>(w[k] / total);
    } else {
      w[0] = 1.f;  // a degenerate window: take the nearest pixel
      n = std::max(n, 1);
    }
    a.first[static_cast<std::size_t>(o)] = lo;
    a.count[static_cast<std::size_t>(o)] = n;
  }
  return a;
}

// Adds w * src[i] to acc[i] for n values: the vertical pass, contiguous and
// vectorised by the compiler.
void accumulate_row(const uint8_t* src, float w, std::size_t n, float* acc) {
  for (std::size_t i = 0; i < n; ++i) acc[i] += w * static_cast<float>(src[i]);
}

template <int C>
void horizontal(const float* row, const Axis& ax, int out_w, int col_lo,
                float* out) {
  for (int o = 0; o < out_w; ++o) {
    const float* w = &ax.weights[static_cast<std::size_t>(o) *
                                 static_cast<std::size_t>(ax.taps)];
    const float* s = row + static_cast<std::ptrdiff_t>(
                               ax.first[static_cast<std::size_t>(o)] - col_lo) *
                               C;
    const int n = ax.count[static_cast<std::size_t>(o)];
    float acc[C] = {};
    for (int k = 0; k < n; ++k) {
      for (int c = 0; c < C; ++c) acc[c] += w[k] * s[k * C + c];
    }
    for (int c = 0; c < C; ++c) out[o * C + c] = acc[c];
  }
}

// Vertical pass first, then horizontal: the vertical pass runs over whole
// rows (contiguous, vectorised) and leaves the scalar horizontal pass only
// out_h rows instead of every source row.
template <int C>
void resample_channels(const Pixels& src, double scaled_w, double scaled_h,
                       int x0, int y0, int out_w, int out_h, RowSink& sink) {
  Axis hx = make_axis(src.width, src.extent_w > 0 ? src.extent_w : src.width,
                      scaled_w, x0, out_w);
  Axis vy = make_axis(src.height, src.extent_h > 0 ? src.extent_h : src.height,
                      scaled_h, y0, out_h);
  // The source columns the horizontal pass reads.
  int col_lo = src.width;
  int col_hi = 0;
  for (int o = 0; o < out_w; ++o) {
    col_lo = std::min(col_lo, hx.first[static_cast<std::size_t>(o)]);
    col_hi = std::max(col_hi, hx.first[static_cast<std::size_t>(o)] +
                                  hx.count[static_cast<std::size_t>(o)]);
  }
  const std::size_t span =
      static_cast<std::size_t>(std::max(col_hi - col_lo, 0)) * C;
  std::vector<float> column_sums(span);
  std::vector<float> out(static_cast<std::size_t>(out_w) * C);
  for (int o = 0; o < out_h; ++o) {
    const float* w = &vy.weights[static_cast<std::size_t>(o) *
                                 static_cast<std::size_t>(vy.taps)];
    const int first = vy.first[static_cast<std::size_t>(o)];
    const int n = vy.count[static_cast<std::size_t>(o)];
    std::fill(column_sums.begin(), column_sums.end(), 0.f);
    for (int k = 0; k < n; ++k) {
      const uint8_t* row = src.data +
                           static_cast<std::ptrdiff_t>(first + k) * src.stride +
                           static_cast<std::ptrdiff_t>(col_lo) * C;
      accumulate_row(row, w[k], span, column_sums.data());
    }
    horizontal<C>(column_sums.data(), hx, out_w, col_lo, out.data());
    sink.row(o, out.data());
  }
}

}  // namespace

void resample(const Pixels& src, double scaled_w, double scaled_h, int x0,
              int y0, int out_w, int out_h, RowSink& sink) {
  if (src.channels == 1) {
    resample_channels<1>(src, scaled_w, scaled_h, x0, y0, out_w, out_h, sink);
  } else if (src.channels == 3) {
    resample_channels<3>(src, scaled_w, scaled_h, x0, y0, out_w, out_h, sink);
  } else {
    resample_channels<4>(src, scaled_w, scaled_h, x0, y0, out_w, out_h, sink);
  }
}

}  // namespace feedline::media
