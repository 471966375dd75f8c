// SPDX-License-Identifier: Apache-2.0
//
// Augmentation at decode time: the random resized crop's sampling rule, its
// seeded draws, the box decoded from part of a JPEG, and the flip.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/media/image.h"
#include "testing/test_images.h"

namespace feedline::media {
namespace {

using testing::encode_jpeg;
using testing::encode_png;
using testing::textured;

// Hands out `draws` in order and counts them.
struct Draws {
  std::vector<double> values;
  std::size_t used = 0;
  double operator()() { return values.at(used++); }
};

CropBox sample(int w, int h, const RandomResizedCrop& rrc, Draws* d) {
  return sample_resized_crop(w, h, rrc, [d] { return (*d)(); });
}

std::vector<uint8_t> to_vector(const Buffer& b) {
  const auto* p = b.data_as<uint8_t>();
  return {p, p + b.nbytes()};
}

ImageOptions rrc_options(int w, int h, uint64_t seed) {
  ImageOptions o;
  o.random_resized_crop.width = w;
  o.random_resized_crop.height = h;
  o.seed = {.seeded = true, .seed = seed, .epoch = 0};
  return o;
}

TEST(RandomResizedCropTest, BoxIsTorchvisionsFunctionOfTheDraws) {
  // Area share 0.08 + 0.92 * 0.5 = 0.54 of 500 x 400; ratio exp(0) = 1:
  // a side of round(sqrt(108000)) = 329; top floor(0 * 72), left
  // floor(0.999 * 172).
  Draws d{{0.5, 0.5, 0.0, 0.999}};
  CropBox box = sample(500, 400, {}, &d);
  EXPECT_EQ(std::tie(box.top, box.left, box.height, box.width),
            std::make_tuple(0, 171, 329, 329));
  EXPECT_EQ(d.used, 4u);

  // An attempt that does not fit takes two draws and no position: ratio
  // 4/3 at the whole area gives a width over 500; the next one fits.
  Draws e{{1.0 - 1e-12, 1.0 - 1e-12, 0.5, 0.5, 0.5, 0.5}};
  box = sample(500, 400, {}, &e);
  EXPECT_EQ(e.used, 6u);
  EXPECT_EQ(box.width, 329);
}

// An infinite scale is refused; a huge finite one makes sizes past int,
// which fail their attempts (no undefined conversion) and fall back.
TEST(RandomResizedCropTest, ScalesPastAnyImageAreRefusedOrFallBack) {
  ImageOptions o = rrc_options(8, 8, 1);
  o.random_resized_crop.scale = {0.08, INFINITY};
  EXPECT_THROW(check_image_options(o), InvalidArgument);
  RandomResizedCrop huge = o.random_resized_crop;
  huge.scale = {1e300, 1e300};
  huge.ratio = {1.0, 1.0};
  Draws d{std::vector<double>(20, 0.5)};
  const CropBox box = sample(64, 32, huge, &d);
  EXPECT_EQ(d.used, 20u);     // ten attempts of two draws, all too large
  EXPECT_EQ(box.height, 32);  // the centre crop of ratio 1
  EXPECT_EQ(box.width, 32);
}

TEST(RandomResizedCropTest, TenFailedAttemptsFallBackToTheCentre) {
  // An area share over 1 never fits: 20 draws, then the centre crop of the
  // ratio range's nearest ratio, rounded half to even.
  RandomResizedCrop rrc{.scale = {2.0, 3.0}};
  Draws d{std::vector<double>(20, 0.5)};
  CropBox wide = sample(1000, 100, rrc, &d);
  EXPECT_EQ(d.used, 20u);
  EXPECT_EQ(std::tie(wide.top, wide.left, wide.height, wide.width),
            std::make_tuple(0, 433, 100, 133));
  Draws t{std::vector<double>(20, 0.5)};
  CropBox tall = sample(90, 1000, rrc, &t);
  EXPECT_EQ(std::tie(tall.top, tall.left, tall.height, tall.width),
            std::make_tuple(440, 0, 120, 90));
  Draws s{std::vector<double>(20, 0.5)};
  CropBox square = sample(300, 300, rrc, &s);
  EXPECT_EQ(std::tie(square.top, square.left, square.height, square.width),
            std::make_tuple(0, 0, 300, 300));
}

TEST(RandomResizedCropTest, SeededDrawsDependOnSeedEpochAndIndexOnly) {
  auto first = [](uint64_t seed, uint64_t epoch, uint64_t index) {
    UniformDraws u({.seeded = true, .seed = seed, .epoch = epoch}, index, 0);
    return u.next();
  };
  EXPECT_EQ(first(1, 0, 7), first(1, 0, 7));
  std::set<double> distinct = {first(1, 0, 7), first(2, 0, 7), first(1, 1, 7),
                               first(1, 0, 8)};
  EXPECT_EQ(distinct.size(), 4u);
  // Unseeded draws differ from call to call.
  UniformDraws a({}, 7, 0);
  UniformDraws b({}, 7, 0);
  EXPECT_NE(a.next(), b.next());
  // Values lie in [0, 1) and spread over it.
  UniformDraws u({.seeded = true, .seed = 3}, 0, 0);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    double v = u.next();
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    sum += v;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

// At DCT scale 1 and with the box's own size as the output, the crop is a
// window of the full decode, bit for bit, whatever the chroma subsampling.
TEST(RandomResizedCropTest, BoxAtScaleOneIsAWindowOfTheFullDecode) {
  const int w = 203, h = 157;
  std::vector<uint8_t> rgb = textured(w, h);
  // A fixed share and ratio: every box is 89 x 89, placed at random.
  ImageOptions o = rrc_options(89, 89, 5);
  o.random_resized_crop.scale = {0.25, 0.25};
  o.random_resized_crop.ratio = {1.0, 1.0};
  for (int subsampling : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440}) {
    for (bool progressive : {false, true}) {
      std::vector<uint8_t> jpeg =
          encode_jpeg(rgb, w, h, 90, subsampling, progressive);
      Buffer full = decode_image(jpeg, {}, "a.jpg");
      for (uint64_t index = 0; index < 6; ++index) {
        SCOPED_TRACE(::testing::Message()
                     << "subsampling " << subsampling << " progressive "
                     << progressive << " index " << index);
        UniformDraws u(o.seed, index, 0);
        CropBox box = sample_resized_crop(w, h, o.random_resized_crop,
                                          [&u] { return u.next(); });
        ASSERT_EQ(box.width, 89);
        Buffer crop = decode_image(jpeg, o, "a.jpg", index);
        ASSERT_EQ(crop.shape(), (std::vector<int64_t>{89, 89, 3}));
        for (int y = 0; y < 89; ++y) {
          ASSERT_EQ(std::memcmp(crop.data_as<uint8_t>() + y * 89 * 3,
                                full.data_as<uint8_t>() +
                                    ((y + box.top) * w + box.left) * 3,
                                89 * 3),
                    0)
              << "row " << y;
        }
      }
    }
  }
}

// The partial decode of a resized box equals the same box taken from the
// whole image: the JPEG's full decode, stored losslessly as a PNG (which
// decodes whole), must give the same output exactly at DCT scale 1 and
// closely at a reduced scale.
TEST(RandomResizedCropTest, PartialDecodeEqualsFullDecodeThenCrop) {
  const int w = 403, h = 301;
  std::vector<uint8_t> rgb = textured(w, h, 9);
  for (int subsampling : {TJSAMP_444, TJSAMP_420, TJSAMP_GRAY}) {
    std::vector<uint8_t> jpeg = encode_jpeg(rgb, w, h, 92, subsampling);
    Buffer full = decode_image(jpeg, {}, "a.jpg");
    std::vector<uint8_t> png = encode_png(to_vector(full), w, h);
    for (bool dct : {false, true}) {
      ImageOptions o = rrc_options(48, 40, 11);
      o.dct_scaling = dct;
      for (uint64_t index = 0; index < 8; ++index) {
        SCOPED_TRACE(::testing::Message()
                     << "subsampling " << subsampling << " dct " << dct
                     << " index " << index);
        Buffer partial = decode_image(jpeg, o, "a.jpg", index);
        Buffer whole = decode_image(png, o, "a.png", index);
        ASSERT_EQ(partial.shape(), (std::vector<int64_t>{40, 48, 3}));
        std::vector<uint8_t> a = to_vector(partial);
        std::vector<uint8_t> b = to_vector(whole);
        // At any one DCT scale, decoding the whole JPEG first changes
        // nothing.
        ImageOptions all = o;
        all.partial_decode = false;
        ASSERT_EQ(a, to_vector(decode_image(jpeg, all, "a.jpg", index)));
        if (!dct) {
          ASSERT_EQ(a, b);
          continue;
        }
        double err = 0;
        for (std::size_t i = 0; i < a.size(); ++i)
          err += std::abs(int{a[i]} - int{b[i]});
        EXPECT_LT(err / static_cast<double>(a.size()), 6.0);
      }
    }
  }
}

TEST(RandomResizedCropTest, CmykJpegTakesThePartialPathToo) {
  const int w = 120, h = 90;
  std::vector<uint8_t> jpeg =
      testing::encode_cmyk_jpeg(textured(w, h, 4), w, h, TJSAMP_444);
  Buffer full = decode_image(jpeg, {}, "cmyk.jpg");
  std::vector<uint8_t> png = encode_png(to_vector(full), w, h);
  ImageOptions o = rrc_options(32, 32, 2);
  o.dct_scaling = false;
  for (uint64_t index = 0; index < 4; ++index) {
    EXPECT_EQ(to_vector(decode_image(jpeg, o, "cmyk.jpg", index)),
              to_vector(decode_image(png, o, "cmyk.png", index)));
  }
}

TEST(RandomResizedCropTest, FlipMirrorsTheOutput) {
  const int w = 64, h = 48;
  std::vector<uint8_t> png = encode_png(textured(w, h), w, h);
  for (Layout layout : {Layout::kHWC, Layout::kCHW}) {
    ImageOptions plain = rrc_options(20, 16, 1);
    plain.layout = layout;
    ImageOptions flipped = plain;
    flipped.flip_probability = 1.0;
    Buffer a = decode_image(png, plain, "a.png", 3);
    Buffer b = decode_image(png, flipped, "a.png", 3);
    const uint8_t* pa = a.data_as<uint8_t>();
    const uint8_t* pb = b.data_as<uint8_t>();
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 16; ++y) {
        for (int x = 0; x < 20; ++x) {
          auto at = [&](int xx) {
            return layout == Layout::kHWC ? (y * 20 + xx) * 3 + c
                                          : (c * 16 + y) * 20 + xx;
          };
          ASSERT_EQ(pb[at(x)], pa[at(19 - x)]);
        }
      }
    }
  }
  // Without a resize (the pixels are copied, not resampled), and in float.
  for (DType dtype : {DType::kUint8, DType::kFloat32}) {
    ImageOptions copy{.crop_width = 30, .crop_height = 20, .dtype = dtype};
    ImageOptions mirrored = copy;
    mirrored.flip_probability = 1.0;
    Buffer a = decode_image(png, copy, "a.png");
    Buffer b = decode_image(png, mirrored, "a.png");
    const std::size_t size = dtype == DType::kUint8 ? 1 : 4;
    const auto* pa = static_cast<const uint8_t*>(a.data());
    const auto* pb = static_cast<const uint8_t*>(b.data());
    for (int y = 0; y < 20; ++y) {
      for (int x = 0; x < 30; ++x) {
        const std::size_t at = static_cast<std::size_t>(y * 30 + x) * 3 * size;
        const std::size_t from =
            static_cast<std::size_t>(y * 30 + 29 - x) * 3 * size;
        ASSERT_EQ(std::memcmp(pb + at, pa + from, 3 * size), 0)
            << "row " << y << " column " << x;
      }
    }
  }
  // A padded image keeps its padding on the mirrored side.
  ImageOptions pad{.resize_width = 40,
                   .resize_height = 40,
                   .resize_mode = ResizeMode::kPad,
                   .flip_probability = 1.0};
  std::vector<uint8_t> wide = encode_png(textured(80, 50), 80, 50);
  Buffer padded = decode_image(wide, pad, "wide.png");
  pad.flip_probability = 0.0;
  Buffer plain = decode_image(wide, pad, "wide.png");
  for (int y = 0; y < 40; ++y) {
    for (int x = 0; x < 40; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(padded.data_as<uint8_t>()[(y * 40 + x) * 3 + c],
                  plain.data_as<uint8_t>()[(y * 40 + 39 - x) * 3 + c]);
      }
    }
  }
}

TEST(RandomResizedCropTest, FlipIsDrawnPerImageWithItsProbability) {
  std::vector<uint8_t> png = encode_png(textured(16, 8), 16, 8);
  ImageOptions o;
  o.seed = {.seeded = true, .seed = 9};
  o.flip_probability = 0.5;
  ImageOptions never = o;
  never.flip_probability = 0.0;
  int flipped = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    std::vector<uint8_t> a = to_vector(decode_image(png, o, "a.png", i));
    ASSERT_EQ(a, to_vector(decode_image(png, o, "a.png", i)));
    if (a != to_vector(decode_image(png, never, "a.png", i))) ++flipped;
  }
  EXPECT_GT(flipped, 150);
  EXPECT_LT(flipped, 250);
}

TEST(RandomResizedCropTest, NameKeysTheDrawsWhenNoIndexIsGiven) {
  std::vector<uint8_t> png = encode_png(textured(100, 80), 100, 80);
  ImageOptions o = rrc_options(24, 24, 4);
  Buffer a = decode_image(png, o, "dir/a.png");
  EXPECT_EQ(to_vector(a), to_vector(decode_image(png, o, "dir/a.png")));
  EXPECT_EQ(to_vector(a), to_vector(decode_image(
                              png, o, "other", sample_index_of("dir/a.png"))));
  int differ = 0;
  for (int i = 0; i < 8; ++i) {
    Buffer b = decode_image(png, o, "dir/b" + std::to_string(i) + ".png");
    if (to_vector(a) != to_vector(b)) ++differ;
  }
  EXPECT_GE(differ, 7);
}

TEST(RandomResizedCropTest, BytesKeyIsAFunctionOfEveryByte) {
  std::vector<uint8_t> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = i * 31 % 251;
  const uint64_t key = sample_index_of_bytes(data);
  EXPECT_EQ(key, sample_index_of_bytes(data));
  std::set<uint64_t> keys{key};
  // A change anywhere (the word lanes, the tail) or of the length moves it.
  for (std::size_t at : {0, 7, 8, 31, 32, 500, 991, 998, 999}) {
    std::vector<uint8_t> other = data;
    other[at] ^= 1;
    EXPECT_TRUE(keys.insert(sample_index_of_bytes(other)).second) << at;
  }
  std::vector<uint8_t> longer = data;
  longer.push_back(0);
  EXPECT_TRUE(keys.insert(sample_index_of_bytes(longer)).second);
  EXPECT_TRUE(keys.insert(sample_index_of_bytes({})).second);
}

TEST(RandomResizedCropTest, BatchOfMixedSizesHasOneShape) {
  std::vector<std::vector<uint8_t>> files = {
      encode_png(textured(100, 80), 100, 80),
      encode_jpeg(textured(300, 200), 300, 200),
      {1, 2, 3},
      encode_jpeg(textured(57, 211), 57, 211, 90, TJSAMP_420, true)};
  std::vector<EncodedImage> images;
  for (std::size_t i = 0; i < files.size(); ++i)
    images.push_back({"img", files[i], i * 10});
  ImageOptions o = rrc_options(32, 24, 6);
  o.layout = Layout::kCHW;
  o.dtype = DType::kFloat32;
  std::vector<ImageFailure> failures;
  Buffer batch = decode_image_batch(images, o, &failures);
  EXPECT_EQ(batch.shape(), (std::vector<int64_t>{3, 3, 24, 32}));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].index, 2u);
  // Slot 2 holds image 3, keyed by its own index.
  Buffer alone = decode_image(files[3], o, "img", 30);
  const std::size_t slot = alone.nbytes();
  EXPECT_EQ(
      std::memcmp(batch.data_as<uint8_t>() + 2 * slot, alone.data(), slot), 0);
}

// Pixels decoded elsewhere take the same path: the same output as the PNG
// of those pixels, for every option set, from RGB and from grey.
TEST(TransformImageTest, GivesWhatDecodingThePixelsWould) {
  const int w = 90, h = 70;
  std::vector<uint8_t> rgb = textured(w, h, 3);
  std::vector<uint8_t> png = encode_png(rgb, w, h);
  Buffer pixels = Buffer::allocate(DType::kUint8, {h, w, 3});
  std::memcpy(pixels.data(), rgb.data(), rgb.size());
  std::vector<ImageOptions> all = {
      {},
      {.resize_shorter = 40, .crop_width = 32, .crop_height = 30},
      {.resize_width = 50,
       .resize_height = 20,
       .resize_mode = ResizeMode::kPad,
       .pixel_format = PixelFormat::kBgr,
       .layout = Layout::kCHW,
       .dtype = DType::kFloat32},
      {.pixel_format = PixelFormat::kGray},
  };
  ImageOptions rrc = rrc_options(24, 24, 8);
  rrc.flip_probability = 0.5;
  all.push_back(rrc);
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "option set " << i);
    for (uint64_t index = 0; index < 3; ++index) {
      EXPECT_EQ(to_vector(transform_image(pixels, all[i], "px", index)),
                to_vector(decode_image(png, all[i], "a.png", index)));
    }
  }
  // Grey pixels (H, W) and (H, W, 1) become RGB by repeating the value.
  Buffer grey = Buffer::allocate(DType::kUint8, {h, w});
  for (int i = 0; i < w * h; ++i) grey.data_as<uint8_t>()[i] = rgb[i * 3];
  Buffer as_rgb = transform_image(grey, {}, "grey");
  ASSERT_EQ(as_rgb.shape(), (std::vector<int64_t>{h, w, 3}));
  for (int i = 0; i < w * h; ++i) {
    for (int c = 0; c < 3; ++c)
      ASSERT_EQ(as_rgb.data_as<uint8_t>()[i * 3 + c], rgb[i * 3]);
  }
  Buffer grey1 =
      Buffer::view(grey.owner(), grey.data(), DType::kUint8, {h, w, 1});
  EXPECT_EQ(to_vector(transform_image(grey1, rrc, "g", 1)),
            to_vector(transform_image(grey, rrc, "g", 1)));
}

TEST(TransformImageTest, RefusesPixelsItCannotRead) {
  ImageOptions o;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{4, 4, 4}, std::vector<int64_t>{16},
        std::vector<int64_t>{0, 4, 3}}) {
    Buffer b = Buffer::allocate(DType::kUint8, shape);
    try {
      transform_image(b, o, "odd");
      FAIL() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("odd"), std::string::npos);
    }
  }
  EXPECT_THROW(
      transform_image(Buffer::allocate(DType::kFloat32, {4, 4, 3}), o, "f"),
      InvalidArgument);
  o.max_pixels = 10;
  EXPECT_THROW(
      transform_image(Buffer::allocate(DType::kUint8, {4, 4, 3}), o, "big"),
      DecodeError);
}

TEST(RandomResizedCropTest, BadOptionsAreInvalidArguments) {
  std::vector<uint8_t> png = encode_png(textured(16, 16), 16, 16);
  auto fails = [&](ImageOptions o) {
    EXPECT_THROW(decode_image(png, o, "a.png", 0), InvalidArgument);
  };
  ImageOptions o = rrc_options(8, 8, 0);
  o.resize_width = o.resize_height = 4;
  fails(o);
  o = rrc_options(8, 8, 0);
  o.crop_width = o.crop_height = 4;
  fails(o);
  o = rrc_options(8, 0, 0);
  fails(o);
  o = rrc_options(8, 8, 0);
  o.random_resized_crop.scale = {0.5, 0.1};
  fails(o);
  o = rrc_options(8, 8, 0);
  o.random_resized_crop.scale = {0.0, 0.1};
  fails(o);
  o = rrc_options(8, 8, 0);
  o.random_resized_crop.ratio = {2.0, 1.0};
  fails(o);
  o = rrc_options(8, 8, 0);
  o.flip_probability = 1.5;
  fails(o);
  o.flip_probability = std::nan("");
  fails(o);
  // Bad bytes are still a DecodeError naming them.
  std::vector<uint8_t> truncated = encode_jpeg(textured(64, 64), 64, 64);
  truncated.resize(truncated.size() / 2);
  try {
    decode_image(truncated, rrc_options(8, 8, 0), "half.jpg", 0);
    FAIL() << "no error";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("half.jpg"), std::string::npos);
  }
}

}  // namespace
}  // namespace feedline::media
