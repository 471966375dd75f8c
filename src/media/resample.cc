// SPDX-License-Identifier: Apache-2.0

#include "media/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

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

// The vertical pass of one output row: acc[i] = sum over k of w[k] *
// rows[k][i], for i in [0, n), the taps added in order (w[0] * rows[0][i] +
// w[1] * rows[1][i] + ...) in one pass over the row, the sum kept in a
// register. The AVX2 copy (chosen at run time on x86-64) does the same
// multiplies and adds in the same order, eight values at a time, so the
// results are the same. The plain loop does values [from, n).
inline void vertical_generic(const uint8_t* const* rows, const float* w,
                             int taps, std::size_t from, std::size_t n,
                             float* acc) {
  for (std::size_t i = from; i < n; ++i) {
    float v = w[0] * static_cast<float>(rows[0][i]);
    for (int k = 1; k < taps; ++k)
      v = v + w[k] * static_cast<float>(rows[k][i]);
    acc[i] = v;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FEEDLINE_RESAMPLE_AVX2 1
__attribute__((target("avx2"))) inline __m256 load8(const uint8_t* p) {
  __m128i bytes;
  std::memcpy(&bytes, p, 8);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
}

// Four groups of eight values side by side (four independent chains of
// adds, which keep the adder busy), then eight at a time, then the rest.
__attribute__((target("avx2"))) void vertical_avx2(const uint8_t* const* rows,
                                                   const float* w, int taps,
                                                   std::size_t n, float* acc) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 w0 = _mm256_set1_ps(w[0]);
    __m256 a0 = _mm256_mul_ps(w0, load8(rows[0] + i));
    __m256 a1 = _mm256_mul_ps(w0, load8(rows[0] + i + 8));
    __m256 a2 = _mm256_mul_ps(w0, load8(rows[0] + i + 16));
    __m256 a3 = _mm256_mul_ps(w0, load8(rows[0] + i + 24));
    for (int k = 1; k < taps; ++k) {
      const __m256 wk = _mm256_set1_ps(w[k]);
      const uint8_t* r = rows[k] + i;
      a0 = _mm256_add_ps(a0, _mm256_mul_ps(wk, load8(r)));
      a1 = _mm256_add_ps(a1, _mm256_mul_ps(wk, load8(r + 8)));
      a2 = _mm256_add_ps(a2, _mm256_mul_ps(wk, load8(r + 16)));
      a3 = _mm256_add_ps(a3, _mm256_mul_ps(wk, load8(r + 24)));
    }
    _mm256_storeu_ps(acc + i, a0);
    _mm256_storeu_ps(acc + i + 8, a1);
    _mm256_storeu_ps(acc + i + 16, a2);
    _mm256_storeu_ps(acc + i + 24, a3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_mul_ps(_mm256_set1_ps(w[0]), load8(rows[0] + i));
    for (int k = 1; k < taps; ++k)
      a = _mm256_add_ps(
          a, _mm256_mul_ps(_mm256_set1_ps(w[k]), load8(rows[k] + i)));
    _mm256_storeu_ps(acc + i, a);
  }
  vertical_generic(rows, w, taps, i, n, acc);
}

bool has_avx2() {
  static const bool kHasAvx2 = __builtin_cpu_supports("avx2") != 0;
  return kHasAvx2;
}
#endif

void vertical(const uint8_t* const* rows, const float* w, int taps,
              std::size_t n, float* acc) {
#ifdef FEEDLINE_RESAMPLE_AVX2
  if (has_avx2()) {
    vertical_avx2(rows, w, taps, n, acc);
    return;
  }
#endif
  vertical_generic(rows, w, taps, 0, n, acc);
}

// The column sums of output row o: the vertical pass over the `span`
// values from `column_offset` of each row the axis's taps read. `rows`
// has room for vy.taps pointers.
void vertical_row(const Axis& vy, int o, const Pixels& src,
                  std::ptrdiff_t column_offset, std::size_t span,
                  const uint8_t** rows, float* sums) {
  const auto at = static_cast<std::size_t>(o);
  const int first = vy.first[at];
  const int n = vy.count[at];
  for (int k = 0; k < n; ++k) {
    rows[k] = src.data +
              static_cast<std::ptrdiff_t>(first + k - src.top) * src.stride +
              column_offset;
  }
  vertical(rows, &vy.weights[at * static_cast<std::size_t>(vy.taps)], n, span,
           sums);
}

// Four floats as one SSE/NEON register (a GCC and Clang extension).
using Float4 = float __attribute__((vector_size(16)));

inline Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The horizontal weights laid out for horizontal(): every weight repeated
// four times (one per lane of a pixel's four floats), the outputs in pairs,
// a pair's taps one after the other: the weight of tap k of output o starts
// at ((o / 2) * taps + k) * 8 + (o % 2) * 4. A pair at tap k is then eight
// consecutive floats, one AVX register. An odd last output is paired with
// zeros.
std::vector<float> lane_weights(const Axis& ax) {
  const auto taps = static_cast<std::size_t>(ax.taps);
  const std::size_t out = ax.first.size();
  std::vector<float> lanes((out + 1) / 2 * taps * 8, 0.f);
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t k = 0; k < taps; ++k) {
      const float w = ax.weights[o * taps + k];
      float* to = &lanes[((o / 2) * taps + k) * 8 + (o % 2) * 4];
      for (int lane = 0; lane < 4; ++lane) to[lane] = w;
    }
  }
  return lanes;
}

// The widest of outputs [o, o + n): how many taps a group of them reads
// together.
int group_taps(const int* count, int o, int n) {
  int taps = 0;
  for (int j = 0; j < n; ++j) taps = std::max(taps, count[o + j]);
  return taps;
}

// What horizontal() reads: `row` holds the inputs from column col_lo on,
// followed by at least (ax.taps + 1) * C zeros: an RGB pixel is read as
// four floats, the fourth ignored, and a group of outputs reads as many
// taps as its widest member (the others' weights are zero there).
template <int C>
struct HorizontalPass {
  const float* row;
  int col_lo;
  const int* first;    // the axis's
  const int* count;    // the axis's
  int taps;            // the axis's
  const float* lanes;  // lane_weights(axis)

  const float* source(int o) const {
    return row + static_cast<std::ptrdiff_t>(first[o] - col_lo) * C;
  }
  const float* weights(int o, int k) const {
    const std::ptrdiff_t pair = o / 2;
    const std::ptrdiff_t half = o % 2;
    return lanes + ((pair * taps + k) * 8 + half * 4);
  }

  // Outputs [o, out_w), four at a time with an accumulator each (a single
  // output's taps form one chain of dependent adds, which would leave the
  // adder waiting on its own latency), then one at a time. Each store's
  // fourth float is overwritten by the next output (the output row has one
  // float to spare).
  void run4(int o, int out_w, float* out) const {
    for (; o + 4 <= out_w; o += 4) {
      const float* s0 = source(o);
      const float* s1 = source(o + 1);
      const float* s2 = source(o + 2);
      const float* s3 = source(o + 3);
      const int n = group_taps(count, o, 4);
      Float4 a0 = {0.f, 0.f, 0.f, 0.f};
      Float4 a1 = a0;
      Float4 a2 = a0;
      Float4 a3 = a0;
      for (int k = 0; k < n; ++k) {
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(k) * C;
        a0 += load4(weights(o, k)) * load4(s0 + at);
        a1 += load4(weights(o + 1, k)) * load4(s1 + at);
        a2 += load4(weights(o + 2, k)) * load4(s2 + at);
        a3 += load4(weights(o + 3, k)) * load4(s3 + at);
      }
      std::memcpy(out + static_cast<std::ptrdiff_t>(o) * C, &a0, sizeof a0);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o + 1) * C, &a1, sizeof a1);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o + 2) * C, &a2, sizeof a2);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o + 3) * C, &a3, sizeof a3);
    }
    for (; o < out_w; ++o) {
      const float* s = source(o);
      const int n = count[o];
      Float4 acc = {0.f, 0.f, 0.f, 0.f};
      for (int k = 0; k < n; ++k)
        acc += load4(weights(o, k)) *
               load4(s + static_cast<std::ptrdiff_t>(k) * C);
      std::memcpy(out + static_cast<std::ptrdiff_t>(o) * C, &acc, sizeof acc);
    }
  }
};

#ifdef FEEDLINE_RESAMPLE_AVX2
// Eight outputs at a time, two to an AVX register (two pixels of four
// floats side by side): the same multiplies and adds, lane for lane and in
// the same order, as run4(), so the results are equal. Then run4() for the
// rest.
template <int C>
__attribute__((target("avx2"))) void horizontal_avx2(const HorizontalPass<C>& h,
                                                     int out_w, float* out) {
  int o = 0;
  for (; o + 8 <= out_w; o += 8) {
    const int n = group_taps(h.count, o, 8);
    __m256 a[4];
    const float* even[4];  // outputs o, o + 2, o + 4, o + 6
    const float* odd[4];   // and the ones after them
    for (__m256& v : a) v = _mm256_setzero_ps();
    for (int p = 0; p < 4; ++p) {
      even[p] = h.source(o + (2 * p));
      odd[p] = h.source(o + (2 * p) + 1);
    }
    for (int k = 0; k < n; ++k) {
      const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(k) * C;
      for (int p = 0; p < 4; ++p) {
        const __m256 px = _mm256_loadu2_m128(odd[p] + at, even[p] + at);
        const __m256 w = _mm256_loadu_ps(h.weights(o + 2 * p, k));
        a[p] = _mm256_add_ps(a[p], _mm256_mul_ps(w, px));
      }
    }
    for (int p = 0; p < 4; ++p) {
      _mm256_storeu2_m128(out + static_cast<std::ptrdiff_t>(o + 2 * p + 1) * C,
                          out + static_cast<std::ptrdiff_t>(o + 2 * p) * C,
                          a[p]);
    }
  }
  h.run4(o, out_w, out);
}
#endif

#ifdef FEEDLINE_RESAMPLE_AVX2
// Transposes the 8x8 block of floats in v: afterwards v[i] holds what was
// element i of v[0], ..., v[7].
__attribute__((target("avx2"))) inline void transpose8(__m256 v[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]);
  const __m256 t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]);
  const __m256 t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]);
  const __m256 t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]);
  const __m256 t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  v[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  v[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  v[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  v[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  v[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  v[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  v[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  v[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Transposes `n8` (a multiple of 8) values of 8 rows, row r at
// from[r * stride]: to[i * 8 + r] = from[r * stride + i].
__attribute__((target("avx2"))) void transpose_rows8(const float* from,
                                                     std::size_t stride,
                                                     std::size_t n8,
                                                     float* to) {
  __m256 v[8];
  for (std::size_t i = 0; i < n8; i += 8) {
    for (std::size_t r = 0; r < 8; ++r)
      v[r] = _mm256_loadu_ps(from + r * stride + i);
    transpose8(v);
    for (std::size_t j = 0; j < 8; ++j)
      _mm256_storeu_ps(to + (i + j) * 8, v[j]);
  }
}

// The inverse of transpose_rows8 into rows of `n8` values:
// to[r * n8 + i] = from[i * 8 + r].
__attribute__((target("avx2"))) void transpose_rows8_back(const float* from,
                                                          std::size_t n8,
                                                          float* to) {
  __m256 v[8];
  for (std::size_t i = 0; i < n8; i += 8) {
    for (std::size_t j = 0; j < 8; ++j)
      v[j] = _mm256_loadu_ps(from + (i + j) * 8);
    transpose8(v);
    for (std::size_t r = 0; r < 8; ++r) _mm256_storeu_ps(to + r * n8 + i, v[r]);
  }
}

// RGB on AVX2, eight output rows at a time. The vertical pass gives each
// row's column sums as run_channels() does; they are transposed so that a
// register holds one column sum of the eight rows, and the horizontal pass
// then gives eight rows' output at once, a tap's weight broadcast to every
// lane: no lane idle (a pixel's fourth float) and one weight load where
// the per-row pass makes eight. Each output adds the same products in the
// same order as horizontal_gray() (from zero, tap 0 first; the taps past
// an output's count have weight zero, and adding zero changes no sum of
// these non-negative values), so the results are the same bit for bit.
__attribute__((target("avx2"))) void run_rgb_avx2(const Axis& hx,
                                                  const Axis& vy,
                                                  const Region& region,
                                                  const Pixels& src,
                                                  RowSink& sink) {
  constexpr int kC = 3;
  const int out_w = static_cast<int>(hx.first.size());
  const int out_h = static_cast<int>(vy.first.size());
  const std::size_t span = static_cast<std::size_t>(region.w) * kC;
  const std::size_t span8 = (span + 7) / 8 * 8;
  const std::size_t values = static_cast<std::size_t>(out_w) * kC;
  const std::size_t values8 = (values + 7) / 8 * 8;
  const auto taps = static_cast<std::size_t>(hx.taps);
  // Rows of column sums (zero past span), the same transposed (with zeros
  // for the taps past the last column), the outputs with rows in lanes,
  // and the output rows.
  std::vector<float> sums(8 * span8, 0.f);
  std::vector<float> columns((span8 + (taps + 1) * kC) * 8, 0.f);
  std::vector<float> lanes(values8 * 8, 0.f);
  std::vector<float> out(8 * values8);
  const std::ptrdiff_t column_offset =
      static_cast<std::ptrdiff_t>(region.x - src.left) * kC;
  std::vector<const uint8_t*> rows(static_cast<std::size_t>(vy.taps));
  for (int o0 = 0; o0 < out_h; o0 += 8) {
    const int block = std::min(8, out_h - o0);
    // A last block of fewer rows leaves the other rows' sums as they were:
    // their lanes are computed and not used.
    for (int r = 0; r < block; ++r) {
      vertical_row(vy, o0 + r, src, column_offset, span, rows.data(),
                   &sums[static_cast<std::size_t>(r) * span8]);
    }
    transpose_rows8(sums.data(), span8, span8, columns.data());
    int o = 0;
    // Two outputs at a time: six chains of adds in flight.
    for (; o + 2 <= out_w; o += 2) {
      const auto u = static_cast<std::size_t>(o);
      const float* w0 = &hx.weights[u * taps];
      const float* w1 = &hx.weights[(u + 1) * taps];
      const float* p0 =
          &columns[static_cast<std::size_t>(hx.first[u] - region.x) * kC * 8];
      const float* p1 =
          &columns[static_cast<std::size_t>(hx.first[u + 1] - region.x) * kC *
                   8];
      const int n = std::max(hx.count[u], hx.count[u + 1]);
      __m256 a0 = _mm256_setzero_ps();
      __m256 a1 = a0;
      __m256 a2 = a0;
      __m256 b0 = a0;
      __m256 b1 = a0;
      __m256 b2 = a0;
      for (int k = 0; k < n; ++k) {
        const std::size_t at = static_cast<std::size_t>(k) * kC * 8;
        const __m256 wa = _mm256_broadcast_ss(w0 + k);
        const __m256 wb = _mm256_broadcast_ss(w1 + k);
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(wa, _mm256_loadu_ps(p0 + at)));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(wa, _mm256_loadu_ps(p0 + at + 8)));
        a2 =
            _mm256_add_ps(a2, _mm256_mul_ps(wa, _mm256_loadu_ps(p0 + at + 16)));
        b0 = _mm256_add_ps(b0, _mm256_mul_ps(wb, _mm256_loadu_ps(p1 + at)));
        b1 = _mm256_add_ps(b1, _mm256_mul_ps(wb, _mm256_loadu_ps(p1 + at + 8)));
        b2 =
            _mm256_add_ps(b2, _mm256_mul_ps(wb, _mm256_loadu_ps(p1 + at + 16)));
      }
      float* to = &lanes[u * kC * 8];
      _mm256_storeu_ps(to, a0);
      _mm256_storeu_ps(to + 8, a1);
      _mm256_storeu_ps(to + 16, a2);
      _mm256_storeu_ps(to + 24, b0);
      _mm256_storeu_ps(to + 32, b1);
      _mm256_storeu_ps(to + 40, b2);
    }
    for (; o < out_w; ++o) {
      const auto u = static_cast<std::size_t>(o);
      const float* w = &hx.weights[u * taps];
      const float* p =
          &columns[static_cast<std::size_t>(hx.first[u] - region.x) * kC * 8];
      __m256 a[kC] = {_mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()};
      for (int k = 0; k < hx.count[u]; ++k) {
        const __m256 wk = _mm256_broadcast_ss(w + k);
        for (int c = 0; c < kC; ++c) {
          a[c] = _mm256_add_ps(
              a[c],
              _mm256_mul_ps(
                  wk, _mm256_loadu_ps(p + (static_cast<std::size_t>(k) * kC +
                                           static_cast<std::size_t>(c)) *
                                              8)));
        }
      }
      for (int c = 0; c < kC; ++c)
        _mm256_storeu_ps(&lanes[(u * kC + static_cast<std::size_t>(c)) * 8],
                         a[c]);
    }
    transpose_rows8_back(lanes.data(), values8, out.data());
    for (int r = 0; r < block; ++r)
      sink.row(o0 + r, &out[static_cast<std::size_t>(r) * values8]);
  }
}
#endif

// The horizontal pass over one row of column sums (see HorizontalPass).
template <int C>
void horizontal(const HorizontalPass<C>& h, int out_w, float* out) {
#ifdef FEEDLINE_RESAMPLE_AVX2
  if (has_avx2()) {
    horizontal_avx2<C>(h, out_w, out);
    return;
  }
#endif
  h.run4(0, out_w, out);
}

// One channel: a plain dot product per output.
void horizontal_gray(const float* row, const Axis& ax, int out_w, int col_lo,
                     float* out) {
  for (int o = 0; o < out_w; ++o) {
    const float* w = &ax.weights[static_cast<std::size_t>(o) *
                                 static_cast<std::size_t>(ax.taps)];
    const float* s = row + (ax.first[static_cast<std::size_t>(o)] - col_lo);
    const int n = ax.count[static_cast<std::size_t>(o)];
    float acc = 0.f;
    for (int k = 0; k < n; ++k) acc += w[k] * s[k];
    out[o] = acc;
  }
}

// store_planes3() for pixels [from, n), one value at a time.
void store_planes3_generic(const float* v, int from, int n, const float* scale,
                           const float* bias, float* const planes[3]) {
  for (int c = 0; c < 3; ++c) {
    for (int x = from; x < n; ++x)
      planes[c][x] = v[x * 3 + c] * scale[c] + bias[c];
  }
}

// Eight pixels (24 floats in three registers) to one register per channel:
// two blends gather a channel's eight values, out of order, and one
// permute puts them in order.
#ifdef FEEDLINE_RESAMPLE_AVX2
__attribute__((target("avx2"))) void store_planes3_avx2(
    const float* v, int n, const float* scale, const float* bias,
    float* const planes[3]) {
  const __m256i order_r = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
  const __m256i order_g = _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6);
  const __m256i order_b = _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7);
  const __m256 sr = _mm256_set1_ps(scale[0]);
  const __m256 sg = _mm256_set1_ps(scale[1]);
  const __m256 sb = _mm256_set1_ps(scale[2]);
  const __m256 br = _mm256_set1_ps(bias[0]);
  const __m256 bg = _mm256_set1_ps(bias[1]);
  const __m256 bb = _mm256_set1_ps(bias[2]);
  int x = 0;
  for (; x + 8 <= n; x += 8) {
    const float* p = v + static_cast<std::ptrdiff_t>(x) * 3;
    const __m256 v0 = _mm256_loadu_ps(p);
    const __m256 v1 = _mm256_loadu_ps(p + 8);
    const __m256 v2 = _mm256_loadu_ps(p + 16);
    const __m256 r = _mm256_permutevar8x32_ps(
        _mm256_blend_ps(_mm256_blend_ps(v0, v1, 0x92), v2, 0x24), order_r);
    const __m256 g = _mm256_permutevar8x32_ps(
        _mm256_blend_ps(_mm256_blend_ps(v0, v1, 0x24), v2, 0x49), order_g);
    const __m256 b = _mm256_permutevar8x32_ps(
        _mm256_blend_ps(_mm256_blend_ps(v0, v1, 0x49), v2, 0x92), order_b);
    _mm256_storeu_ps(planes[0] + x, _mm256_add_ps(_mm256_mul_ps(r, sr), br));
    _mm256_storeu_ps(planes[1] + x, _mm256_add_ps(_mm256_mul_ps(g, sg), bg));
    _mm256_storeu_ps(planes[2] + x, _mm256_add_ps(_mm256_mul_ps(b, sb), bb));
  }
  store_planes3_generic(v, x, n, scale, bias, planes);
}
#endif

}  // namespace

void store_planes3(const float* v, int n, const float* scale, const float* bias,
                   float* const planes[3]) {
#ifdef FEEDLINE_RESAMPLE_AVX2
  if (has_avx2()) {
    store_planes3_avx2(v, n, scale, bias, planes);
    return;
  }
#endif
  store_planes3_generic(v, 0, n, scale, bias, planes);
}

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

void Resampler::mirror() {
  std::reverse(hx_.first.begin(), hx_.first.end());
  std::reverse(hx_.count.begin(), hx_.count.end());
  const auto taps = static_cast<std::size_t>(hx_.taps);
  const std::size_t n = hx_.first.size();
  for (std::size_t i = 0; i < n / 2; ++i) {
    std::swap_ranges(
        hx_.weights.begin() + static_cast<std::ptrdiff_t>(i * taps),
        hx_.weights.begin() + static_cast<std::ptrdiff_t>((i + 1) * taps),
        hx_.weights.begin() + static_cast<std::ptrdiff_t>((n - 1 - i) * taps));
  }
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
#ifdef FEEDLINE_RESAMPLE_AVX2
  if constexpr (C == 3) {
    if (has_avx2()) {
      run_rgb_avx2(hx_, vy_, region_, src, sink);
      return;
    }
  }
#endif
  const int out_w = static_cast<int>(hx_.first.size());
  const int out_h = static_cast<int>(vy_.first.size());
  const std::size_t span = static_cast<std::size_t>(region_.w) * C;
  // Zeros after the sums and after the output row: see horizontal().
  std::vector<float> column_sums(
      span + static_cast<std::size_t>(hx_.taps + 1) * C, 0.f);
  std::vector<float> out(static_cast<std::size_t>(out_w) * C + 1);
  const std::ptrdiff_t column_offset =
      static_cast<std::ptrdiff_t>(region_.x - src.left) * C;
  const std::vector<float> lanes =
      C == 1 ? std::vector<float>() : lane_weights(hx_);
  const HorizontalPass<C> pass{column_sums.data(), region_.x, hx_.first.data(),
                               hx_.count.data(),   hx_.taps,  lanes.data()};
  std::vector<const uint8_t*> rows(static_cast<std::size_t>(vy_.taps));
  for (int o = 0; o < out_h; ++o) {
    vertical_row(vy_, o, src, column_offset, span, rows.data(),
                 column_sums.data());
    if constexpr (C == 1) {
      horizontal_gray(column_sums.data(), hx_, out_w, region_.x, out.data());
    } else {
      horizontal<C>(pass, out_w, out.data());
    }
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
