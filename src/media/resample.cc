// SPDX-License-Identifier: Apache-2.0

#include "media/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace feedline::media {
namespace {

using Axis = Resampler::Axis;

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Output o of the scaled axis (offset by `offset`) is centred on input
// coordinate (o + offset + 0.5) * extent / scaled + origin, where `extent` is
// how many input pixels the image spans (in_size, or less when the last
// pixel only partly belongs to it); the filter is widened by the downscale
// factor so that every input pixel contributes. Inputs are counted from
// `base`: the axis reads inputs base + [0, in_size).
Axis make_axis(int in_size, double extent, double scaled, int offset,
               int out_size, double origin = 0.0, int base = 0) {
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
    const double center = (o + offset + 0.5) * scale + origin;
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
    a.first[static_cast<std::size_t>(o)] = lo + base;
    a.count[static_cast<std::size_t>(o)] = n;
  }
  return a;
}

// The axis of a box [lo, lo + size) of an image's in_size pixels, resized to
// out_size: computed relative to the box's first whole pixel, so that at an
// integer `lo` it is exactly the axis of the cropped pixels alone.
Axis make_box_axis(int in_size, double lo, double size, int out_size) {
  const int base = std::clamp(static_cast<int>(std::floor(lo)), 0, in_size - 1);
  const int end =
      std::clamp(static_cast<int>(std::ceil(lo + size)), base + 1, in_size);
  return make_axis(end - base, size, out_size, 0, out_size, lo - base, base);
}

// The inputs [lo, hi) an axis reads. `first` grows with the output index,
// and so does first + count.
void axis_span(const Axis& a, int* lo, int* hi) {
  *lo = a.first.empty() ? 0 : a.first.front();
  *hi = a.first.empty() ? 0 : a.first.back() + a.count.back();
}

// acc[i] = w * src[i] (first) or acc[i] += w * src[i], for n values: the
// vertical pass, contiguous and vectorised by the compiler. The AVX2 copy
// (8 floats a step) is chosen at run time on x86-64; it multiplies and adds
// separately, as the baseline does, so the results are the same.
template <bool First>
inline void accumulate_row_generic(const uint8_t* src, float w, std::size_t n,
                                   float* acc) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = w * static_cast<float>(src[i]);
    acc[i] = First ? v : acc[i] + v;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FEEDLINE_RESAMPLE_AVX2 1
template <bool First>
__attribute__((target("avx2"))) void accumulate_row_avx2(const uint8_t* src,
                                                         float w, std::size_t n,
                                                         float* acc) {
  accumulate_row_generic<First>(src, w, n, acc);
}

bool has_avx2() {
  static const bool kHasAvx2 = __builtin_cpu_supports("avx2") != 0;
  return kHasAvx2;
}
#endif

template <bool First>
void accumulate_row(const uint8_t* src, float w, std::size_t n, float* acc) {
#ifdef FEEDLINE_RESAMPLE_AVX2
  if (has_avx2()) {
    accumulate_row_avx2<First>(src, w, n, acc);
    return;
  }
#endif
  accumulate_row_generic<First>(src, w, n, acc);
}

// Four floats as one SSE/NEON register (a GCC and Clang extension).
using Float4 = float __attribute__((vector_size(16)));

inline Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The horizontal pass over one row of column sums. `row` holds the inputs
// from column col_lo on, followed by at least (ax.taps + 1) * C zeros: an RGB
// pixel is read as four floats, the fourth ignored, and a group of outputs
// reads as many taps as its widest member (the others' weights are zero
// there).
//
// Four outputs are computed side by side, each with its own accumulator: a
// single output's taps form one chain of dependent adds, which would leave
// the adder waiting on its own latency.
template <int C>
void horizontal(const float* row, const Axis& ax, int out_w, int col_lo,
                float* out) {
  auto source = [&](int o) {
    return row + static_cast<std::ptrdiff_t>(
                     ax.first[static_cast<std::size_t>(o)] - col_lo) *
                     C;
  };
  auto weights = [&](int o) {
    return &ax.weights[static_cast<std::size_t>(o) *
                       static_cast<std::size_t>(ax.taps)];
  };
  int o = 0;
  if constexpr (C == 3 || C == 4) {
    for (; o + 4 <= out_w; o += 4) {
      const float* s0 = source(o);
      const float* s1 = source(o + 1);
      const float* s2 = source(o + 2);
      const float* s3 = source(o + 3);
      const float* w0 = weights(o);
      const float* w1 = weights(o + 1);
      const float* w2 = weights(o + 2);
      const float* w3 = weights(o + 3);
      int n = 0;
      for (int j = 0; j < 4; ++j)
        n = std::max(n, ax.count[static_cast<std::size_t>(o) +
                                 static_cast<std::size_t>(j)]);
      Float4 a0 = {0.f, 0.f, 0.f, 0.f};
      Float4 a1 = a0;
      Float4 a2 = a0;
      Float4 a3 = a0;
      for (int k = 0; k < n; ++k) {
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(k) * C;
        a0 += w0[k] * load4(s0 + at);
        a1 += w1[k] * load4(s1 + at);
        a2 += w2[k] * load4(s2 + at);
        a3 += w3[k] * load4(s3 + at);
      }
      // Each store's fourth float is overwritten by the next output (the
      // output row has one float to spare).
      std::memcpy(out + static_cast<std::ptrdiff_t>(o) * C, &a0, sizeof a0);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o + 1) * C, &a1, sizeof a1);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o + 2) * C, &a2, sizeof a2);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o + 3) * C, &a3, sizeof a3);
    }
  }
  for (; o < out_w; ++o) {
    const float* w = weights(o);
    const float* s = source(o);
    const int n = ax.count[static_cast<std::size_t>(o)];
    if constexpr (C == 3 || C == 4) {
      Float4 acc = {0.f, 0.f, 0.f, 0.f};
      for (int k = 0; k < n; ++k)
        acc += w[k] * load4(s + static_cast<std::ptrdiff_t>(k) * C);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o) * C, &acc, sizeof acc);
    } else {
      float acc = 0.f;
      for (int k = 0; k < n; ++k) acc += w[k] * s[k];
      out[o] = acc;
    }
  }
}

}  // namespace

Resampler::Resampler(int width, int height, double extent_w, double extent_h,
                     double scaled_w, double scaled_h, int x0, int y0,
                     int out_w, int out_h)
    : hx_(make_axis(width, extent_w > 0 ? extent_w : width, scaled_w, x0,
                    out_w)),
      vy_(make_axis(height, extent_h > 0 ? extent_h : height, scaled_h, y0,
                    out_h)) {
  int x1 = 0;
  int y1 = 0;
  axis_span(hx_, &region_.x, &x1);
  axis_span(vy_, &region_.y, &y1);
  region_.w = x1 - region_.x;
  region_.h = y1 - region_.y;
}

Resampler::Resampler(Axis hx, Axis vy)
    : hx_(std::move(hx)), vy_(std::move(vy)) {
  int x1 = 0;
  int y1 = 0;
  axis_span(hx_, &region_.x, &x1);
  axis_span(vy_, &region_.y, &y1);
  region_.w = x1 - region_.x;
  region_.h = y1 - region_.y;
}

Resampler Resampler::for_box(int width, int height, double box_x, double box_y,
                             double box_w, double box_h, int out_w, int out_h) {
  return Resampler(make_box_axis(width, box_x, box_w, out_w),
                   make_box_axis(height, box_y, box_h, out_h));
}

// Vertical pass first, then horizontal: the vertical pass runs over whole
// rows (contiguous, vectorised) and leaves the horizontal pass only out_h
// rows instead of every source row.
template <int C>
void Resampler::run_channels(const Pixels& src, RowSink& sink) const {
  const int out_w = static_cast<int>(hx_.first.size());
  const int out_h = static_cast<int>(vy_.first.size());
  const std::size_t span = static_cast<std::size_t>(region_.w) * C;
  // Zeros after the sums and after the output row: see horizontal().
  std::vector<float> column_sums(
      span + static_cast<std::size_t>(hx_.taps + 1) * C, 0.f);
  std::vector<float> out(static_cast<std::size_t>(out_w) * C + 1);
  const std::ptrdiff_t column_offset =
      static_cast<std::ptrdiff_t>(region_.x - src.left) * C;
  for (int o = 0; o < out_h; ++o) {
    const float* w = &vy_.weights[static_cast<std::size_t>(o) *
                                  static_cast<std::size_t>(vy_.taps)];
    const int first = vy_.first[static_cast<std::size_t>(o)];
    const int n = vy_.count[static_cast<std::size_t>(o)];
    for (int k = 0; k < n; ++k) {
      const uint8_t* row =
          src.data +
          static_cast<std::ptrdiff_t>(first + k - src.top) * src.stride +
          column_offset;
      if (k == 0) {
        accumulate_row<true>(row, w[k], span, column_sums.data());
      } else {
        accumulate_row<false>(row, w[k], span, column_sums.data());
      }
    }
    horizontal<C>(column_sums.data(), hx_, out_w, region_.x, out.data());
    sink.row(o, out.data());
  }
}

void Resampler::run(const Pixels& src, RowSink& sink) const {
  if (src.channels == 1) {
    run_channels<1>(src, sink);
  } else if (src.channels == 3) {
    run_channels<3>(src, sink);
  } else {
    run_channels<4>(src, sink);
  }
}

}  // namespace feedline::media
