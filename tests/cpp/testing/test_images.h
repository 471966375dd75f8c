// SPDX-License-Identifier: Apache-2.0
//
// Test images made in memory with libjpeg-turbo and libpng themselves, so
// that decoder tests need no files: a smooth RGB pattern and its JPEG and PNG
// encodings.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

namespace feedline::testing {

// A smooth RGB pattern of w x h pixels (JPEG-friendly: little ringing).
inline std::vector<uint8_t> pattern(int w, int h) {
  std::vector<uint8_t> px(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &px[(static_cast<std::size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / std::max(1, w - 1));
      p[1] = static_cast<uint8_t>(255 * y / std::max(1, h - 1));
      p[2] = 128;
    }
  }
  return px;
}

// A w x h RGB pattern with fine detail in every channel (a smooth ramp
// plus pseudo-random noise): chroma that differs from pixel to pixel, so
// that any change in how a decoder upsamples it shows.
inline std::vector<uint8_t> textured(int w, int h, uint32_t seed = 1) {
  std::vector<uint8_t> px = pattern(w, h);
  uint32_t state = seed * 2654435761u + 1;
  for (uint8_t& v : px) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    v = static_cast<uint8_t>((v + (state & 127)) / 2 + 32);
  }
  return px;
}

// `rgb` (w x h, packed) as a JPEG of the given quality and chroma
// subsampling (a TJSAMP_* value), baseline or progressive.
inline std::vector<uint8_t> encode_jpeg(const std::vector<uint8_t>& rgb, int w,
                                        int h, int quality = 95,
                                        int subsampling = TJSAMP_444,
                                        bool progressive = false) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(
      tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &buf, &size, subsampling,
                  quality, progressive ? TJFLAG_PROGRESSIVE : 0),
      0);
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// A CMYK JPEG (quality 95) whose C, M, Y planes are `rgb`'s channels and
// whose K is 200 everywhere.
inline std::vector<uint8_t> encode_cmyk_jpeg(const std::vector<uint8_t>& rgb,
                                             int w, int h, int subsampling) {
  std::vector<uint8_t> cmyk(static_cast<std::size_t>(w) * h * 4);
  for (std::size_t i = 0; i < static_cast<std::size_t>(w) * h; ++i) {
    for (int c = 0; c < 3; ++c) cmyk[i * 4 + c] = rgb[i * 3 + c];
    cmyk[i * 4 + 3] = 200;
  }
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(tj, cmyk.data(), w, 0, h, TJPF_CMYK, &buf, &size,
                        subsampling, 95, 0),
            0);
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// `rgb` (w x h, packed) as an 8-bit RGB PNG.
inline std::vector<uint8_t> encode_png(const std::vector<uint8_t>& rgb, int w,
                                       int h) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(w);
  image.height = static_cast<png_uint_32>(h);
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_NE(png_image_write_to_memory(&image, nullptr, &size, 0, rgb.data(), 0,
                                      nullptr),
            0);
  std::vector<uint8_t> out(size);
  EXPECT_NE(png_image_write_to_memory(&image, out.data(), &size, 0, rgb.data(),
                                      0, nullptr),
            0);
  out.resize(size);
  return out;
}

}  // namespace feedline::testing
