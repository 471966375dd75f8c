// SPDX-License-Identifier: Apache-2.0
//
// prepare_jpeg() and the cropped decode of the files it writes: the same
// pixels as the source, crops cut from only the restart intervals they
// cover, and damage anywhere still an error.

#include "media/jpeg_restart.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/media/image.h"
#include "testing/test_images.h"

namespace feedline::media {
namespace {

using testing::encode_jpeg;
using testing::textured;

std::vector<uint8_t> to_vector(const Buffer& b) {
  const auto* p = b.data_as<uint8_t>();
  return {p, p + b.nbytes()};
}

ImageOptions rrc_options(int w, int h, uint64_t seed, bool dct) {
  ImageOptions o;
  o.random_resized_crop.width = w;
  o.random_resized_crop.height = h;
  o.seed = {.seeded = true, .seed = seed, .epoch = 0};
  o.dct_scaling = dct;
  return o;
}

void store_crc(std::vector<uint8_t>* jpeg) {
  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(*jpeg, &layout));
  const uint32_t crc = restart_scan_crc(*jpeg, layout);
  for (int i = 0; i < 4; ++i)
    (*jpeg)[layout.crc_at + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
}

struct Source {
  int subsampling;
  bool progressive;
};

class PrepareJpegTest : public ::testing::TestWithParam<Source> {};

TEST_P(PrepareJpegTest, SamePixelsAndIndexedIntervals) {
  const int w = 403, h = 301;
  std::vector<uint8_t> jpeg =
      encode_jpeg(textured(w, h, 3), w, h, 90, GetParam().subsampling,
                  GetParam().progressive);
  std::vector<uint8_t> prepared = prepare_jpeg(jpeg, "a.jpg");
  EXPECT_EQ(to_vector(decode_image(prepared, {}, "p.jpg")),
            to_vector(decode_image(jpeg, {}, "a.jpg")));
  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(prepared, &layout));
  EXPECT_EQ(layout.stored_crc, restart_scan_crc(prepared, layout));
  EXPECT_GE(layout.intervals_per_row, 8);
  EXPECT_EQ(layout.mcus_per_row % layout.interval, 0);
  // Preparing a prepared file changes nothing.
  EXPECT_EQ(prepare_jpeg(prepared, "p.jpg"), prepared);
}

// A random resized crop, a centre crop and a flip of the prepared file
// decode to what they decode to from the source, at DCT scale 1 and below.
TEST_P(PrepareJpegTest, CropsEqualThoseOfTheSource) {
  const int w = 403, h = 301;
  std::vector<uint8_t> jpeg =
      encode_jpeg(textured(w, h, 7), w, h, 92, GetParam().subsampling,
                  GetParam().progressive);
  std::vector<uint8_t> prepared = prepare_jpeg(jpeg, "a.jpg");
  for (bool dct : {false, true}) {
    for (uint64_t index = 0; index < 40; ++index) {
      SCOPED_TRACE(::testing::Message() << "dct " << dct << " index " << index);
      ImageOptions o = rrc_options(48, 40, 11, dct);
      o.flip_probability = 0.5;
      ASSERT_EQ(to_vector(decode_image(prepared, o, "p.jpg", index)),
                to_vector(decode_image(jpeg, o, "a.jpg", index)));
    }
    ImageOptions eval;
    eval.resize_shorter = 128;
    eval.crop_width = eval.crop_height = 112;
    eval.dct_scaling = dct;
    eval.layout = Layout::kCHW;
    eval.dtype = DType::kFloat32;
    EXPECT_EQ(to_vector(decode_image(prepared, eval, "p.jpg")),
              to_vector(decode_image(jpeg, eval, "a.jpg")));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Subsamplings, PrepareJpegTest,
    ::testing::Values(Source{TJSAMP_444, false}, Source{TJSAMP_422, false},
                      Source{TJSAMP_420, false}, Source{TJSAMP_440, false},
                      Source{TJSAMP_GRAY, false}, Source{TJSAMP_420, true},
                      Source{TJSAMP_GRAY, true}));

// A cut is a JPEG of its own: at 4:4:4 (no chroma upsampling reaching
// across its edges) every pixel of it is the source's.
TEST(CutRestartLayoutTest, CutIsThatPartOfTheImage) {
  const int w = 403, h = 301;
  std::vector<uint8_t> prepared = prepare_jpeg(
      encode_jpeg(textured(w, h, 5), w, h, 90, TJSAMP_444), "a.jpg");
  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(prepared, &layout));
  const std::vector<uint8_t> full = to_vector(decode_image(prepared, {}, "p"));
  struct Cut {
    int row0, row1, col0, col1;
  };
  const int rows = layout.mcu_rows;
  const int cols = layout.intervals_per_row;
  for (Cut c : {Cut{0, 1, 0, 1}, Cut{3, 9, 2, 5}, Cut{rows - 2, rows, 1, cols},
                Cut{0, rows, cols - 1, cols}}) {
    std::vector<uint8_t> cut;
    cut_restart_layout(prepared, layout, c.row0, c.row1, c.col0, c.col1, &cut);
    const std::vector<uint8_t> part = to_vector(decode_image(cut, {}, "cut"));
    const int x0 = c.col0 * layout.interval * layout.mcu_w;
    const int x1 = std::min(w, c.col1 * layout.interval * layout.mcu_w);
    const int y0 = c.row0 * layout.mcu_h;
    const int y1 = std::min(h, c.row1 * layout.mcu_h);
    ASSERT_EQ(part.size(), static_cast<std::size_t>((x1 - x0) * (y1 - y0) * 3));
    for (int y = y0; y < y1; ++y) {
      ASSERT_EQ(std::memcmp(&part[((y - y0) * (x1 - x0)) * 3],
                            &full[(y * w + x0) * 3], (x1 - x0) * 3),
                0)
          << "row " << y;
    }
  }
}

// An interval that cannot decode (0xFF bytes: no Huffman code is all ones)
// far from the crop: with the CRC updated to match, the crop decodes
// without reading it; as damage (the CRC left alone) it is an error, as it
// is in a JPEG without the index.
TEST(CutRestartLayoutTest, IntervalsOutsideTheCropAreNotRead) {
  const int w = 403, h = 301;
  std::vector<uint8_t> prepared = prepare_jpeg(
      encode_jpeg(textured(w, h, 6), w, h, 90, TJSAMP_420), "a.jpg");
  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(prepared, &layout));
  // The last interval of the last row, and crops in the top-left quarter.
  std::vector<uint8_t> damaged = prepared;
  const std::size_t at = layout.starts.back();
  ASSERT_GT(layout.eoi_at - at, 4U);
  for (std::size_t i = at; i + 1 < layout.eoi_at; i += 2) {
    damaged[i] = 0xFF;
    damaged[i + 1] = 0x00;
  }
  EXPECT_THROW(decode_image(damaged, {}, "damaged.jpg"), DecodeError);
  ImageOptions crop = rrc_options(64, 64, 0, true);
  crop.random_resized_crop.scale = {0.1, 0.1};
  crop.random_resized_crop.ratio = {1.0, 1.0};
  // Find an index whose crop stays in the top half of the image.
  int tried = 0;
  for (uint64_t index = 0; tried < 3 && index < 200; ++index) {
    UniformDraws u(crop.seed, index, 0);
    CropBox b = sample_resized_crop(w, h, crop.random_resized_crop,
                                    [&u] { return u.next(); });
    if (b.top + b.height > h / 2 || b.left + b.width > w / 2) continue;
    ++tried;
    SCOPED_TRACE(::testing::Message() << "index " << index);
    EXPECT_THROW(decode_image(damaged, crop, "damaged.jpg", index),
                 DecodeError);
    std::vector<uint8_t> matching = damaged;
    store_crc(&matching);
    EXPECT_EQ(to_vector(decode_image(matching, crop, "m.jpg", index)),
              to_vector(decode_image(prepared, crop, "p.jpg", index)));
  }
  EXPECT_EQ(tried, 3);
}

TEST(CutRestartLayoutTest, TruncatedOrAlteredFilesAreErrors) {
  const int w = 240, h = 180;
  std::vector<uint8_t> prepared = prepare_jpeg(
      encode_jpeg(textured(w, h, 8), w, h, 90, TJSAMP_420), "a.jpg");
  ImageOptions o = rrc_options(32, 32, 4, true);
  for (std::size_t keep :
       {prepared.size() - 2, prepared.size() / 2, prepared.size() / 4}) {
    std::vector<uint8_t> cut(prepared.begin(), prepared.begin() + keep);
    RestartLayout layout;
    EXPECT_FALSE(parse_restart_layout(cut, &layout));
    for (uint64_t index = 0; index < 4; ++index)
      EXPECT_THROW(decode_image(cut, o, "short.jpg", index), DecodeError);
  }
  // The RST markers out of order: the index no longer describes the scan.
  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(prepared, &layout));
  // One bit of the scan changed (in the last bits of an interval, which
  // libjpeg-turbo decodes without a complaint): the CRC finds it, whether
  // the image is decoded whole or cropped anywhere.
  std::vector<uint8_t> flipped = prepared;
  flipped[layout.starts[5] - 3] ^= 0x01;
  try {
    decode_image(flipped, {}, "flipped.jpg");
    ADD_FAILURE() << "no error";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("flipped.jpg"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("CRC-32"), std::string::npos);
  }
  for (uint64_t index = 0; index < 8; ++index)
    EXPECT_THROW(decode_image(flipped, o, "flipped.jpg", index), DecodeError);
  std::vector<uint8_t> swapped = prepared;
  swapped[layout.starts[3] - 1] = 0xD7;
  EXPECT_FALSE(parse_restart_layout(swapped, &layout));
  EXPECT_THROW(prepare_jpeg(std::vector<uint8_t>{1, 2, 3}, "x.bin"),
               UnsupportedFormat);
  std::vector<uint8_t> header_only(prepared.begin(), prepared.begin() + 40);
  EXPECT_THROW(prepare_jpeg(header_only, "h.jpg"), DecodeError);
  // A header claiming 60000 x 60000 pixels: refused before the
  // coefficients are allocated (14 GB at 4:2:0), as is one over a limit.
  std::vector<uint8_t> huge = prepared;
  for (std::size_t at : {layout.sof_at + 5, layout.sof_at + 7}) {
    huge[at] = 60000 >> 8;
    huge[at + 1] = 60000 & 0xFF;
  }
  try {
    prepare_jpeg(huge, "huge.jpg");
    ADD_FAILURE() << "no error";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("huge.jpg: image of 60000 x 60000"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(prepare_jpeg(prepared, "a.jpg", int64_t{w} * h - 1),
               DecodeError);
  EXPECT_EQ(prepare_jpeg(prepared, "a.jpg", int64_t{w} * h), prepared);
}

TEST(CutRestartLayoutTest, CmykCropsEqualThoseOfTheSource) {
  const int w = 200, h = 150;
  std::vector<uint8_t> jpeg =
      testing::encode_cmyk_jpeg(textured(w, h, 4), w, h, TJSAMP_420);
  std::vector<uint8_t> prepared = prepare_jpeg(jpeg, "cmyk.jpg");
  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(prepared, &layout));
  for (uint64_t index = 0; index < 6; ++index) {
    ImageOptions o = rrc_options(32, 32, 2, index % 2 == 0);
    EXPECT_EQ(to_vector(decode_image(prepared, o, "p.jpg", index)),
              to_vector(decode_image(jpeg, o, "cmyk.jpg", index)));
  }
}

}  // namespace
}  // namespace feedline::media
