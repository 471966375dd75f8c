// SPDX-License-Identifier: Apache-2.0
//
// The random draws of training augmentation (feedline/media/image.h): the
// per-image streams of uniform numbers (seeded or fresh), the random resized
// crop as a function of them, and the keys that name an image to its seed.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string_view>

#include "feedline/media/image.h"

namespace feedline::media {

namespace {

// SplitMix64's output function: a bijection that spreads every input bit.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// Keys of unseeded draws: a process-wide counter from a random start.
uint64_t fresh_key() {
  static std::atomic<uint64_t> counter{
      mix64(static_cast<uint64_t>(std::random_device{}()) << 32 |
            std::random_device{}())};
  return mix64(counter.fetch_add(kGolden, std::memory_order_relaxed));
}

// Python's round(): half to even (the default rounding mode).
// Sizes past INT_MAX (a huge scale) read as INT_MAX: larger than any image,
// so the attempt fails, instead of an undefined conversion.
int round_half_even(double v) {
  const double r = std::nearbyint(v);
  return r >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(r);
}

}  // namespace

UniformDraws::UniformDraws(const AugmentSeed& seed, uint64_t index,
                           uint64_t stream) {
  const uint64_t key =
      seed.seeded
          ? mix64(mix64(mix64(seed.seed + kGolden) + seed.epoch) + index)
          : fresh_key();
  state_ = mix64(key + stream * kGolden);
}

double UniformDraws::next() {
  state_ += kGolden;
  return static_cast<double>(mix64(state_) >> 11) * 0x1.0p-53;
}

CropBox sample_resized_crop(int width, int height, const RandomResizedCrop& rrc,
                            const std::function<double()>& uniform) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(rrc.ratio[0]);
  const double log_hi = std::log(rrc.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area =
        area * (rrc.scale[0] + (rrc.scale[1] - rrc.scale[0]) * uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * uniform());
    const int w = round_half_even(std::sqrt(target_area * aspect));
    const int h = round_half_even(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(uniform() * (height - h + 1));
      const int left = static_cast<int>(uniform() * (width - w + 1));
      return {top, left, h, w};
    }
  }
  // The centre crop of the ratio range's nearest ratio.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < rrc.ratio[0]) {
    h = round_half_even(w / rrc.ratio[0]);
  } else if (in_ratio > rrc.ratio[1]) {
    w = round_half_even(h * rrc.ratio[1]);
  }
  h = std::clamp(h, 1, height);
  w = std::clamp(w, 1, width);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

uint64_t sample_index_of(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t sample_index_of_bytes(std::span<const uint8_t> data) {
  // Four independent multiply-xor lanes over 8-byte words (a hash of a
  // 100 KB JPEG costs ~10 us, against milliseconds to decode it), the tail
  // and the length, then one SplitMix64 finish of the lanes.
  std::array<uint64_t, 4> lane{0x9e3779b97f4a7c15ULL, 0xbf58476d1ce4e5b9ULL,
                               0x94d049bb133111ebULL, 0xcbf29ce484222325ULL};
  constexpr uint64_t kPrime = 0x100000001b3ULL * 0x9e3779b1ULL | 1;
  const uint8_t* p = data.data();
  const std::size_t n = data.size();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (std::size_t k = 0; k < 4; ++k) {
      uint64_t w = 0;
      std::memcpy(&w, p + i + 8 * k, 8);
      if constexpr (std::endian::native == std::endian::big)
        w = __builtin_bswap64(w);
      lane[k] = (lane[k] ^ w) * kPrime;
    }
  }
  uint64_t tail = n;
  for (; i < n; ++i) tail = (tail ^ p[i]) * 0x100000001b3ULL;
  uint64_t h = mix64(tail);
  for (uint64_t l : lane) h = mix64(h ^ mix64(l));
  return h;
}

}  // namespace feedline::media
