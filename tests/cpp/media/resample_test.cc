// SPDX-License-Identifier: Apache-2.0

#include "media/resample.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace feedline::media {
namespace {

// Collects every row a Resampler gives.
class Rows final : public RowSink {
 public:
  explicit Rows(int height) : rows_(static_cast<std::size_t>(height)) {}
  void row(int y, const float* values) override {
    const std::size_t n = width_ * channels_;
    rows_[static_cast<std::size_t>(y)].assign(values, values + n);
  }
  void shape(std::size_t width, std::size_t channels) {
    width_ = width;
    channels_ = channels;
  }
  const std::vector<float>& at(int y) const {
    return rows_[static_cast<std::size_t>(y)];
  }

 private:
  std::vector<std::vector<float>> rows_;
  std::size_t width_ = 0;
  std::size_t channels_ = 0;
};

std::vector<uint8_t> noise(std::size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(gen());
  return v;
}

// Each channel of an RGB resample equals the same resample of that channel
// alone, bit for bit: the RGB passes (eight values a step, the horizontal
// taps in pixel lanes) add the same products in the same order as the
// one-channel ones. Sizes cover the vectorised loops' tails, and a
// downscale by 40 gives 83 vertical taps.
TEST(ResampleTest, AnRgbResampleIsItsChannelsResampledAlone) {
  struct Case {
    int w, h, out_w, out_h;
  };
  for (const Case c : {Case{500, 375, 224, 224}, Case{37, 29, 101, 7},
                       Case{333, 4000, 9, 100}, Case{61, 13, 61, 13}}) {
    const auto rgb = noise(static_cast<std::size_t>(c.w) * c.h * 3, 7);
    Resampler r(c.w, c.h, 0, 0, c.out_w, c.out_h, 0, 0, c.out_w, c.out_h);
    ASSERT_EQ(r.region().w, c.w);
    Rows got(c.out_h);
    got.shape(static_cast<std::size_t>(c.out_w), 3);
    r.run(Pixels{rgb.data(), c.w, c.h, 3, c.w * 3}, got);
    for (int ch = 0; ch < 3; ++ch) {
      std::vector<uint8_t> plane(static_cast<std::size_t>(c.w) * c.h);
      for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = rgb[i * 3 + ch];
      Rows alone(c.out_h);
      alone.shape(static_cast<std::size_t>(c.out_w), 1);
      r.run(Pixels{plane.data(), c.w, c.h, 1, c.w}, alone);
      for (int y = 0; y < c.out_h; ++y) {
        for (int x = 0; x < c.out_w; ++x) {
          const float a = got.at(y)[static_cast<std::size_t>(x) * 3 + ch];
          const float b = alone.at(y)[static_cast<std::size_t>(x)];
          ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0)
              << c.w << "x" << c.h << " -> " << c.out_w << "x" << c.out_h
              << ", channel " << ch << " at " << x << "," << y << ": " << a
              << " vs " << b;
        }
      }
    }
  }
}

// The same for a fractional box (the random-resized-crop path) and its
// mirror image, at output heights on either side of the RGB pass's blocks
// of eight rows.
TEST(ResampleTest, AnRgbBoxResampleIsItsChannelsResampledAlone) {
  constexpr int kW = 320;
  constexpr int kH = 240;
  const auto rgb = noise(static_cast<std::size_t>(kW) * kH * 3, 11);
  for (const int out_h : {1, 8, 9, 224}) {
    for (const bool flip : {false, true}) {
      Resampler r =
          Resampler::for_box(kW, kH, 3.4, 5.7, 200.2, 150.9, 67, out_h);
      if (flip) r.mirror();
      Rows got(out_h);
      got.shape(67, 3);
      r.run(Pixels{rgb.data(), kW, kH, 3, kW * 3}, got);
      for (int ch = 0; ch < 3; ++ch) {
        std::vector<uint8_t> plane(static_cast<std::size_t>(kW) * kH);
        for (std::size_t i = 0; i < plane.size(); ++i)
          plane[i] = rgb[i * 3 + ch];
        Rows alone(out_h);
        alone.shape(67, 1);
        r.run(Pixels{plane.data(), kW, kH, 1, kW}, alone);
        for (int y = 0; y < out_h; ++y) {
          for (int x = 0; x < 67; ++x) {
            const float a = got.at(y)[static_cast<std::size_t>(x) * 3 + ch];
            const float b = alone.at(y)[static_cast<std::size_t>(x)];
            ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0)
                << "out_h " << out_h << (flip ? ", flipped" : "")
                << ", channel " << ch << " at " << x << "," << y;
          }
        }
      }
    }
  }
}

// store_planes3 gives what the plain loop gives, bit for bit, at every
// length around the eight-pixel step, and writes nothing past n.
TEST(ResampleTest, StorePlanes3IsThePlainLoop) {
  const float scale[3] = {1 / (255 * 0.229f), 1 / (255 * 0.224f),
                          1 / (255 * 0.225f)};
  const float bias[3] = {-0.485f / 0.229f, -0.456f / 0.224f, -0.406f / 0.225f};
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> value(0.f, 255.f);
  for (const int n : {0, 1, 7, 8, 9, 23, 224, 225}) {
    std::vector<float> v(static_cast<std::size_t>(n) * 3);
    for (float& f : v) f = value(gen);
    std::vector<float> out(static_cast<std::size_t>(n + 1) * 3, -1.f);
    float* const planes[3] = {out.data(), out.data() + n + 1,
                              out.data() + 2 * (n + 1)};
    store_planes3(v.data(), n, scale, bias, planes);
    for (int c = 0; c < 3; ++c) {
      for (int x = 0; x < n; ++x) {
        const float want =
            v[static_cast<std::size_t>(x) * 3 + c] * scale[c] + bias[c];
        ASSERT_EQ(std::memcmp(&planes[c][x], &want, sizeof want), 0)
            << "n " << n << ", channel " << c << ", pixel " << x;
      }
      EXPECT_EQ(planes[c][n], -1.f) << "n " << n << ": wrote past the end";
    }
  }
}

}  // namespace
}  // namespace feedline::media
