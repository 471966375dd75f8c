// SPDX-License-Identifier: Apache-2.0
//
// decode_image(): geometry, formats, layouts, dtypes and bad input. The test
// images are encoded here with libjpeg-turbo and libpng themselves.

#include "feedline/media/image.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "testing/test_images.h"

namespace feedline::media {
namespace {

using testing::encode_jpeg;
using testing::encode_png;
using testing::pattern;
using testing::textured;

TEST(ImageTest, PngDecodesLosslessInEveryFormatAndLayout) {
  const int w = 7, h = 5;
  std::vector<uint8_t> rgb = pattern(w, h);
  std::vector<uint8_t> png = encode_png(rgb, w, h);
  Buffer hwc = decode_image(png, {}, "a.png");
  ASSERT_EQ(hwc.shape(), (std::vector<int64_t>{h, w, 3}));
  EXPECT_EQ(std::memcmp(hwc.data(), rgb.data(), rgb.size()), 0);

  Buffer chw = decode_image(
      png, {.pixel_format = PixelFormat::kBgr, .layout = Layout::kCHW},
      "a.png");
  ASSERT_EQ(chw.shape(), (std::vector<int64_t>{3, h, w}));
  const uint8_t* c = chw.data_as<uint8_t>();
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(c[(k * h + y) * w + x], rgb[(y * w + x) * 3 + (2 - k)]);
      }
    }
  }
  Buffer gray =
      decode_image(png, {.pixel_format = PixelFormat::kGray}, "a.png");
  EXPECT_EQ(gray.shape(), (std::vector<int64_t>{h, w, 1}));
}

TEST(ImageTest, Float32IsNormalisedPerChannel) {
  std::vector<uint8_t> rgb = pattern(4, 4);
  std::vector<uint8_t> png = encode_png(rgb, 4, 4);
  ImageOptions o{.dtype = DType::kFloat32,
                 .mean = {0.5f, 0.25f, 0.f},
                 .std = {0.5f, 2.f, 1.f}};
  Buffer f = decode_image(png, o, "a.png");
  ASSERT_EQ(f.dtype(), DType::kFloat32);
  const float* v = f.data_as<float>();
  for (int i = 0; i < 16; ++i) {
    for (int c = 0; c < 3; ++c) {
      float want = (rgb[i * 3 + c] / 255.f - o.mean[c]) / o.std[c];
      EXPECT_NEAR(v[i * 3 + c], want, 1e-5);
    }
  }
}

TEST(ImageTest, GeometryFollowsResizeShorterThenCenterCrop) {
  // 500x375 -> shorter side 256 -> 341x256 -> centre 224x224.
  EXPECT_EQ(image_output_shape(500, 375, {.resize_shorter = 256}),
            (std::vector<int64_t>{256, 341, 3}));
  ImageOptions o{.resize_shorter = 256,
                 .crop_width = 224,
                 .crop_height = 224,
                 .layout = Layout::kCHW};
  EXPECT_EQ(image_output_shape(500, 375, o),
            (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(
      image_output_shape(300, 400, {.resize_width = 64, .resize_height = 32}),
      (std::vector<int64_t>{32, 64, 3}));
  EXPECT_THROW(
      image_output_shape(100, 100, {.crop_width = 200, .crop_height = 10}),
      InvalidArgument);
  // A longer side past int (40000 x 65500 = 2.6e9): refused, not wrapped to
  // a negative size.
  try {
    image_output_shape(1, 65500, {.resize_shorter = 40000});
    FAIL() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("longer side of a 1x65500 image "
                                         "2620000000 pixels"),
              std::string::npos)
        << e.what();
  }
}

TEST(ImageTest, PadAndCropModesKeepTheAspectRatio) {
  // 200x100 into 64x64: pad fits 64x32 centred on black; crop covers with
  // 128x64 and keeps the middle.
  std::vector<uint8_t> png =
      encode_png(std::vector<uint8_t>(200 * 100 * 3, 200), 200, 100);
  Buffer pad = decode_image(png,
                            {.resize_width = 64,
                             .resize_height = 64,
                             .resize_mode = ResizeMode::kPad},
                            "a.png");
  ASSERT_EQ(pad.shape(), (std::vector<int64_t>{64, 64, 3}));
  const uint8_t* p = pad.data_as<uint8_t>();
  auto at = [&](int y, int x) { return p[(y * 64 + x) * 3]; };
  EXPECT_EQ(at(0, 10), 0);
  EXPECT_EQ(at(15, 10), 0);
  EXPECT_EQ(at(16, 10), 200);
  EXPECT_EQ(at(47, 63), 200);
  EXPECT_EQ(at(48, 10), 0);
  EXPECT_EQ(image_output_shape(200, 100,
                               {.resize_width = 64,
                                .resize_height = 64,
                                .resize_mode = ResizeMode::kCrop}),
            (std::vector<int64_t>{64, 64, 3}));
  Buffer crop = decode_image(png,
                             {.resize_width = 64,
                              .resize_height = 64,
                              .resize_mode = ResizeMode::kCrop},
                             "a.png");
  const uint8_t* c = crop.data_as<uint8_t>();
  for (int i = 0; i < 64 * 64 * 3; ++i) ASSERT_EQ(c[i], 200);
}

TEST(ImageTest, ResizedJpegKeepsTheContent) {
  const int w = 640, h = 480;
  std::vector<uint8_t> rgb = pattern(w, h);
  std::vector<uint8_t> jpeg = encode_jpeg(rgb, w, h);
  for (bool dct : {false, true}) {
    Buffer out = decode_image(
        jpeg, {.resize_width = 160, .resize_height = 120, .dct_scaling = dct},
        "a.jpg");
    ASSERT_EQ(out.shape(), (std::vector<int64_t>{120, 160, 3}));
    // The gradient survives: compare with the pattern at output resolution.
    std::vector<uint8_t> want = pattern(160, 120);
    const uint8_t* got = out.data_as<uint8_t>();
    double err = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      err += std::abs(int{got[i]} - int{want[i]});
    EXPECT_LT(err / static_cast<double>(want.size()), 3.0)
        << "dct_scaling=" << dct;
  }
}

// A resize or crop decodes only the part of a JPEG it reads (cropped and
// skipped scanlines); the pixels must be those of a full decode, at every
// chroma subsampling, baseline or progressive, at full and at a reduced DCT
// scale. Chroma upsampling at the edges of a cropped decode is where they
// would differ.
TEST(ImageTest, PartialJpegDecodeGivesTheFullDecodesPixels) {
  const int w = 203, h = 157;
  std::vector<uint8_t> rgb = textured(w, h);
  for (int subsampling : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440}) {
    for (bool progressive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "subsampling " << subsampling
                                        << (progressive ? " progressive" : ""));
      std::vector<uint8_t> jpeg =
          encode_jpeg(rgb, w, h, 90, subsampling, progressive);
      // Crop only: a window of the full decode, bit for bit.
      Buffer full = decode_image(jpeg, {}, "a.jpg");
      Buffer crop =
          decode_image(jpeg, {.crop_width = 61, .crop_height = 37}, "a.jpg");
      ASSERT_EQ(crop.shape(), (std::vector<int64_t>{37, 61, 3}));
      const int x0 = (w - 61) / 2, y0 = (h - 37) / 2;
      for (int y = 0; y < 37; ++y) {
        ASSERT_EQ(std::memcmp(crop.data_as<uint8_t>() + y * 61 * 3,
                              full.data_as<uint8_t>() + ((y + y0) * w + x0) * 3,
                              61 * 3),
                  0)
            << "row " << y;
      }
      // Resize then crop: a window of the resized image (which decodes all
      // of the JPEG), at full scale (shorter side 120) and at DCT scale 1/2
      // (shorter side 64).
      for (int shorter : {120, 64}) {
        SCOPED_TRACE(::testing::Message() << "resize_shorter " << shorter);
        Buffer resized =
            decode_image(jpeg, {.resize_shorter = shorter}, "a.jpg");
        const auto rw = static_cast<int>(resized.shape()[1]);
        const auto rh = static_cast<int>(resized.shape()[0]);
        const int c = shorter / 2 + 1;
        Buffer window = decode_image(
            jpeg,
            {.resize_shorter = shorter, .crop_width = c, .crop_height = c},
            "a.jpg");
        ASSERT_EQ(window.shape(), (std::vector<int64_t>{c, c, 3}));
        const int cx = static_cast<int>(std::nearbyint((rw - c) / 2.0));
        const int cy = static_cast<int>(std::nearbyint((rh - c) / 2.0));
        for (int y = 0; y < c; ++y) {
          ASSERT_EQ(
              std::memcmp(window.data_as<uint8_t>() + y * c * 3,
                          resized.data_as<uint8_t>() + ((y + cy) * rw + cx) * 3,
                          static_cast<std::size_t>(c) * 3),
              0)
              << "row " << y;
        }
      }
    }
  }
}

// A partial decode still reads the whole file: damage in rows it does not
// keep, above or below the crop, is an error, not a silently good image.
TEST(ImageTest, DamageOutsideTheCropIsStillAnError) {
  const int w = 64, h = 1024;
  std::vector<uint8_t> jpeg = encode_jpeg(textured(w, h), w, h, 90, TJSAMP_420);
  const ImageOptions centre{.crop_width = 32, .crop_height = 32};
  ASSERT_NO_THROW(decode_image(jpeg, centre, "whole.jpg"));
  // Cut off the last 30%: the centre rows are all there.
  std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + jpeg.size() * 7 / 10);
  EXPECT_THROW(decode_image(cut, centre, "cut.jpg"), DecodeError);
  // Garbage in the first rows' entropy data (after the ~600-byte header).
  std::vector<uint8_t> damaged = jpeg;
  for (std::size_t i = jpeg.size() / 10; i < jpeg.size() / 10 + 64; ++i)
    damaged[i] = 0xFF;
  ASSERT_THROW(decode_image(damaged, {}, "damaged.jpg"), DecodeError);
  try {
    decode_image(damaged, centre, "damaged.jpg");
    ADD_FAILURE() << "damage above the crop went unnoticed";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("damaged.jpg"), std::string::npos);
  }
}

TEST(ImageTest, BadInputIsADecodeErrorNamingTheInput) {
  std::vector<uint8_t> jpeg = encode_jpeg(pattern(64, 64), 64, 64);
  std::vector<uint8_t> png = encode_png(pattern(64, 64), 64, 64);
  auto expect_decode_error = [](std::vector<uint8_t> bytes,
                                const std::string& what) {
    try {
      decode_image(bytes, {}, "bad.img");
      ADD_FAILURE() << what << ": no error";
    } catch (const DecodeError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.img"), std::string::npos)
          << e.what();
    }
  };
  expect_decode_error({}, "empty");
  expect_decode_error({'h', 'e', 'l', 'l', 'o'}, "not an image");
  expect_decode_error(
      std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() / 2),
      "truncated jpeg");
  expect_decode_error(
      std::vector<uint8_t>(png.begin(), png.begin() + png.size() / 2),
      "truncated png");
  std::vector<uint8_t> corrupt = jpeg;
  for (std::size_t i = corrupt.size() / 2; i < corrupt.size() / 2 + 64; ++i)
    corrupt[i] = 0xFF;
  expect_decode_error(corrupt, "corrupt jpeg");
  // Dimensions over the limit are refused before decoding.
  EXPECT_THROW(decode_image(jpeg, {.max_pixels = 100}, "big.jpg"), DecodeError);
  // A failure leaves nothing behind: the next good image decodes.
  EXPECT_EQ(decode_image(jpeg, {}, "good.jpg").shape(),
            (std::vector<int64_t>{64, 64, 3}));
}

TEST(ImageTest, DecodeIntoChecksTheSlot) {
  std::vector<uint8_t> png = encode_png(pattern(8, 8), 8, 8);
  Buffer batch = Buffer::allocate(DType::kUint8, {2, 4, 4, 3});
  Buffer slot = Buffer::view(batch.owner(), batch.data_as<uint8_t>() + 48,
                             DType::kUint8, {4, 4, 3});
  decode_image_into(png, {.resize_width = 4, .resize_height = 4}, "a.png",
                    slot);
  EXPECT_THROW(decode_image_into(png, {}, "a.png", slot), InvalidArgument);
}

TEST(ImageTest, BatchDecodesIntoDenseSlotsAndReportsFailures) {
  std::vector<uint8_t> a = encode_png(pattern(20, 10), 20, 10);
  std::vector<uint8_t> b = encode_jpeg(pattern(30, 40), 30, 40);
  std::vector<uint8_t> bad = {0xFF, 0xD8, 0xFF, 0x00};
  std::vector<EncodedImage> images = {{"a", a}, {"bad", bad}, {"b", b}};
  std::vector<ImageFailure> failures;
  ImageOptions o{.resize_width = 8, .resize_height = 6};
  Buffer batch = decode_image_batch(images, o, &failures);
  ASSERT_EQ(batch.shape(), (std::vector<int64_t>{2, 6, 8, 3}));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].index, 1u);
  EXPECT_NE(failures[0].message.find("bad"), std::string::npos);
  Buffer second = decode_image(b, o, "b");
  EXPECT_EQ(std::memcmp(batch.data_as<uint8_t>() + second.nbytes(),
                        second.data(), second.nbytes()),
            0);
  // Without one output size, a different-sized image fails instead.
  failures.clear();
  Buffer own = decode_image_batch(images, {}, &failures);
  EXPECT_EQ(own.shape(), (std::vector<int64_t>{1, 10, 20, 3}));
  EXPECT_EQ(failures.size(), 2u);
}

TEST(BufferTest, AllocatesAlignedContiguousStorage) {
  Buffer b = Buffer::allocate(DType::kFloat32, {2, 3, 4});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  EXPECT_EQ(b.strides(), (std::vector<int64_t>{48, 16, 4}));
  EXPECT_EQ(b.nbytes(), 96u);
  EXPECT_TRUE(b.contiguous());
  EXPECT_EQ(b.to_string(), "float32[2, 3, 4]");
  EXPECT_THROW(Buffer::allocate(DType::kUint8, {-1}), InvalidArgument);
}

TEST(BufferTest, LargeBuffersAreHugePageAlignedAndReused) {
  set_buffer_cache_limit(std::size_t{64} << 20);
  void* first = nullptr;
  {
    Buffer big = Buffer::allocate(DType::kUint8, {5 << 20});
    first = big.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (2 << 20), 0u);
    std::memset(big.data(), 1, big.nbytes());  // the memory is usable
  }
  EXPECT_EQ(buffer_cache_size(), std::size_t{6} << 20);  // rounded to 2 MiB
  {
    // A similar size reuses the freed block; a view keeps it alive.
    Buffer again = Buffer::allocate(DType::kUint8, {4 << 20});
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(buffer_cache_size(), 0u);
    Buffer view = Buffer::view(again.owner(), again.data(), DType::kUint8, {8});
    again = Buffer();
    EXPECT_EQ(buffer_cache_size(), 0u);
  }
  EXPECT_EQ(buffer_cache_size(), std::size_t{6} << 20);
  {
    // Far smaller requests do not take a large block.
    Buffer small = Buffer::allocate(DType::kUint8, {2 << 20});
    EXPECT_NE(small.data(), first);
  }
  set_buffer_cache_limit(0);  // frees what it holds and caches no more
  EXPECT_EQ(buffer_cache_size(), 0u);
  { Buffer b = Buffer::allocate(DType::kUint8, {3 << 20}); }
  EXPECT_EQ(buffer_cache_size(), 0u);
  set_buffer_cache_limit(std::size_t{1} << 30);
}

}  // namespace
}  // namespace feedline::media
