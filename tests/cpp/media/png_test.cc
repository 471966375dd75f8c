// SPDX-License-Identifier: Apache-2.0
//
// The direct PNG path (media::decode_png) against libpng's full API
// (media::decode_png_with_libpng) on files written by libpng with every
// row filter, colour type, bit depth and colour chunk, and on damaged
// files, where both must fail alike; both must give the samples as stored.

#include <csetjmp>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <png.h>

#include "feedline/base/error.h"
#include "media/codecs.h"

namespace feedline::media {
namespace {

struct PngSpec {
  int width = 33;
  int height = 17;
  int colour = PNG_COLOR_TYPE_RGB;
  int depth = 8;
  int filters = PNG_ALL_FILTERS;
  int level = 6;
  bool interlaced = false;
  bool linear_gamma = false;  // a gAMA chunk of 1.0
  bool text = false;          // tEXt, pHYs and sRGB chunks
  bool transparency = false;  // a tRNS chunk
  int palette_size = 16;      // entries (the samples index up to 15)
};

int bytes_per_sample(const PngSpec& s) { return s.depth == 16 ? 2 : 1; }

int channels_of(int colour) {
  switch (colour) {
    case PNG_COLOR_TYPE_GRAY:
    case PNG_COLOR_TYPE_PALETTE:
      return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return 2;
    case PNG_COLOR_TYPE_RGB:
      return 3;
    default:
      return 4;
  }
}

// Samples with edges, gradients and wrap-around, so that every filter has
// work to do.
std::vector<uint8_t> samples(const PngSpec& s) {
  const int bytes = channels_of(s.colour) * bytes_per_sample(s);
  std::vector<uint8_t> v(static_cast<std::size_t>(s.width) * s.height * bytes);
  uint32_t state = 12345;
  for (std::size_t i = 0; i < v.size(); ++i) {
    state = state * 1103515245u + 12345u;
    const auto x = static_cast<uint32_t>(i % (s.width * bytes));
    const auto y = static_cast<uint32_t>(i / (s.width * bytes));
    v[i] = static_cast<uint8_t>(((x * 7 + y * 13) ^ (state >> 24) % 8) +
                                (y > 8 ? 200 : 0));
  }
  if (s.colour == PNG_COLOR_TYPE_PALETTE)
    for (auto& b : v) b %= 16;
  if (s.depth < 8)
    for (auto& b : v) b &= static_cast<uint8_t>((1 << s.depth) - 1);
  return v;
}

void append(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

void no_flush(png_structp /*png*/) {}

void quiet(png_structp /*png*/, png_const_charp /*warning*/) {}

// Writes `pixels` with libpng's full API (which the simplified one does not
// offer: filter choice, gAMA, text).
std::vector<uint8_t> write(const PngSpec& s, const std::vector<uint8_t>& px) {
  std::vector<uint8_t> out;
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, quiet);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng could not write the test image";
    return {};
  }
  png_set_write_fn(png, &out, append, no_flush);
  png_set_benign_errors(png, 1);  // indices past a short palette
  png_set_user_limits(png, 0x7FFFFFFF, 0x7FFFFFFF);
  png_set_IHDR(png, info, static_cast<png_uint_32>(s.width),
               static_cast<png_uint_32>(s.height), s.depth, s.colour,
               s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, s.filters);
  png_set_compression_level(png, s.level);
  if (s.colour == PNG_COLOR_TYPE_PALETTE) {
    std::vector<png_color> palette(16);
    for (int i = 0; i < 16; ++i) {
      palette[static_cast<std::size_t>(i)] = {
          static_cast<png_byte>(i * 16), static_cast<png_byte>(255 - i * 8),
          static_cast<png_byte>(i * 3)};
    }
    png_set_PLTE(png, info, palette.data(), s.palette_size);
  }
  if (s.linear_gamma) png_set_gAMA(png, info, 1.0);
  if (s.transparency) {
    const png_byte alpha[4] = {0, 64, 128, 200};
    png_color_16 colour{};
    colour.gray = 3;
    colour.red = 7, colour.green = 9, colour.blue = 11;
    png_set_tRNS(png, info, alpha, s.colour == PNG_COLOR_TYPE_PALETTE ? 4 : 0,
                 &colour);
  }
  if (s.text) {
    png_text text{};
    text.compression = PNG_TEXT_COMPRESSION_NONE;
    text.key = const_cast<char*>("Comment");
    text.text = const_cast<char*>("feedline test image");
    png_set_text(png, info, &text, 1);
    png_set_pHYs(png, info, 2835, 2835, PNG_RESOLUTION_METER);
    png_set_sRGB(png, info, PNG_sRGB_INTENT_PERCEPTUAL);
  }
  png_write_info(png, info);
  if (s.depth < 8) png_set_packing(png);  // one sample per byte in `px`
  const std::size_t row = static_cast<std::size_t>(s.width) *
                          channels_of(s.colour) * bytes_per_sample(s);
  std::vector<png_bytep> rows(static_cast<std::size_t>(s.height));
  for (int y = 0; y < s.height; ++y) {
    rows[static_cast<std::size_t>(y)] =
        const_cast<png_bytep>(px.data() + static_cast<std::size_t>(y) * row);
  }
  png_write_image(png, rows.data());
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> pixels_of(const DecodedPixels& p) {
  std::vector<uint8_t> v;
  const std::size_t row = static_cast<std::size_t>(p.width) * p.channels;
  for (int y = 0; y < p.height; ++y) {
    const uint8_t* r = p.data + static_cast<std::ptrdiff_t>(y) * p.stride;
    v.insert(v.end(), r, r + row);
  }
  return v;
}

// Whether decode_png handed out the direct path's rows in place: each row
// follows its filter byte, so the stride is one more than the row.
bool in_place(const DecodedPixels& p) {
  return p.stride == static_cast<std::ptrdiff_t>(p.width) * p.channels + 1;
}

constexpr PixelFormat kFormats[] = {PixelFormat::kRgb, PixelFormat::kBgr,
                                    PixelFormat::kGray};

// The outcome of a decode: its pixels, or its error message.
struct Outcome {
  std::optional<std::vector<uint8_t>> pixels;
  std::string error;
  bool operator==(const Outcome&) const = default;
};

template <typename Decode>
Outcome outcome(Decode decode) {
  try {
    return {pixels_of(decode()), ""};
  } catch (const DecodeError& e) {
    return {std::nullopt, e.what()};
  }
}

void expect_same(const std::vector<uint8_t>& file, const std::string& what) {
  for (PixelFormat f : kFormats) {
    const Outcome direct = outcome(
        [&] { return decode_png(file, f, kDefaultMaxPixels, "x.png"); });
    const Outcome libpng = outcome([&] {
      return decode_png_with_libpng(file, f, kDefaultMaxPixels, "x.png");
    });
    EXPECT_TRUE(direct == libpng)
        << what << ", format " << static_cast<int>(f) << ": "
        << (direct.pixels ? "pixels" : direct.error) << " vs "
        << (libpng.pixels ? "pixels" : libpng.error);
  }
}

TEST(PngTest, DirectPathEqualsLibpngForEveryFilterColourTypeAndDepth) {
  const int filters[] = {PNG_FILTER_NONE, PNG_FILTER_SUB,   PNG_FILTER_UP,
                         PNG_FILTER_AVG,  PNG_FILTER_PAETH, PNG_ALL_FILTERS};
  for (int colour :
       {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA,
        PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_PALETTE}) {
    for (int depth : {8, 16}) {
      if (colour == PNG_COLOR_TYPE_PALETTE && depth == 16) continue;
      for (int filter : filters) {
        for (auto [w, h] :
             {std::pair{1, 1}, std::pair{7, 5}, std::pair{33, 17}}) {
          PngSpec s{.width = w,
                    .height = h,
                    .colour = colour,
                    .depth = depth,
                    .filters = filter};
          const std::vector<uint8_t> file = write(s, samples(s));
          const std::string what = "colour " + std::to_string(colour) +
                                   ", depth " + std::to_string(depth) +
                                   ", filter " + std::to_string(filter) + ", " +
                                   std::to_string(w) + "x" + std::to_string(h);
          expect_same(file, what);
          const PixelFormat own = colour == PNG_COLOR_TYPE_GRAY
                                      ? PixelFormat::kGray
                                      : PixelFormat::kRgb;
          for (PixelFormat f : kFormats) {
            EXPECT_TRUE(decode_png_direct(file, f, kDefaultMaxPixels))
                << what << ": not decoded by the direct path";
          }
          if ((colour == PNG_COLOR_TYPE_GRAY || colour == PNG_COLOR_TYPE_RGB) &&
              depth == 8) {
            EXPECT_TRUE(in_place(decode_png(file, own, kDefaultMaxPixels, "x")))
                << what << ": rows copied";
          }
        }
      }
    }
  }
  // Several IDAT chunks; text, pHYs and sRGB chunks; stored deflate.
  PngSpec big{.width = 300, .height = 200, .text = true};
  const std::vector<uint8_t> file = write(big, samples(big));
  expect_same(file, "300x200 with text");
  EXPECT_TRUE(
      in_place(decode_png(file, PixelFormat::kRgb, kDefaultMaxPixels, "x")));
  PngSpec stored{.level = 0};
  expect_same(write(stored, samples(stored)), "stored deflate");
}

TEST(PngTest, OtherPngsGoToLibpng) {
  const PngSpec specs[] = {
      {.colour = PNG_COLOR_TYPE_GRAY, .depth = 1},
      {.colour = PNG_COLOR_TYPE_GRAY, .depth = 2},
      {.colour = PNG_COLOR_TYPE_GRAY, .depth = 4},
      {.colour = PNG_COLOR_TYPE_PALETTE, .depth = 4},
      {.interlaced = true},
      {.colour = PNG_COLOR_TYPE_GRAY_ALPHA, .depth = 16, .interlaced = true},
      // Indices past the palette: libpng says what they become.
      {.colour = PNG_COLOR_TYPE_PALETTE, .palette_size = 4},
  };
  int i = 0;
  for (const PngSpec& s : specs) {
    const std::vector<uint8_t> file = write(s, samples(s));
    expect_same(file, "spec " + std::to_string(i));
    EXPECT_FALSE(decode_png_direct(file, PixelFormat::kRgb, kDefaultMaxPixels))
        << "spec " << i;
    ++i;
  }
}

// The RGB a decode must give for `px` written as `s`: the samples as
// stored, whatever the colour chunks say (see write() for the palette).
std::vector<uint8_t> stored_rgb(const PngSpec& s,
                                const std::vector<uint8_t>& px) {
  const int channels = channels_of(s.colour);
  const int bytes = bytes_per_sample(s);
  std::vector<uint8_t> rgb;
  const auto step = static_cast<std::size_t>(channels * bytes);
  for (std::size_t i = 0; i < px.size(); i += step) {
    const uint8_t* p = &px[i];
    if (s.colour == PNG_COLOR_TYPE_PALETTE) {
      rgb.insert(rgb.end(), {static_cast<uint8_t>(p[0] * 16),
                             static_cast<uint8_t>(255 - p[0] * 8),
                             static_cast<uint8_t>(p[0] * 3)});
    } else if (channels <= 2) {  // grey, widened to 8 bits
      const auto v = static_cast<uint8_t>(p[0] * 255 / ((1 << s.depth) - 1));
      const uint8_t g = s.depth == 16 ? p[0] : v;  // high byte first
      rgb.insert(rgb.end(), {g, g, g});
    } else {
      rgb.insert(rgb.end(), {p[0], p[bytes], p[2 * bytes]});
    }
  }
  return rgb;
}

TEST(PngTest, SamplesAreDecodedAsStoredWithoutColourManagement) {
  // libpng's simplified API, which this library once used, gave sRGB: a
  // 16-bit file without gAMA was taken as linear light (a sample of 32/255
  // came out as 99), and so was any file tagged gAMA 1.0.
  const PngSpec specs[] = {
      {.linear_gamma = true},
      {.linear_gamma = true, .transparency = true},
      {.colour = PNG_COLOR_TYPE_GRAY, .linear_gamma = true},
      {.colour = PNG_COLOR_TYPE_RGB_ALPHA, .linear_gamma = true},
      {.depth = 16},
      {.depth = 16, .linear_gamma = true},
      {.colour = PNG_COLOR_TYPE_GRAY, .depth = 16},
      {.colour = PNG_COLOR_TYPE_GRAY_ALPHA, .depth = 16},
      {.colour = PNG_COLOR_TYPE_RGB_ALPHA, .depth = 16, .interlaced = true},
      {.colour = PNG_COLOR_TYPE_GRAY, .depth = 1},
      {.colour = PNG_COLOR_TYPE_GRAY, .depth = 2, .transparency = true},
      {.colour = PNG_COLOR_TYPE_GRAY, .depth = 4, .interlaced = true},
      {.colour = PNG_COLOR_TYPE_PALETTE, .transparency = true},
      {.colour = PNG_COLOR_TYPE_PALETTE, .depth = 4},
  };
  int i = 0;
  for (const PngSpec& s : specs) {
    const std::string what = "spec " + std::to_string(i++);
    const std::vector<uint8_t> px = samples(s);
    const std::vector<uint8_t> file = write(s, px);
    const std::vector<uint8_t> want = stored_rgb(s, px);
    EXPECT_EQ(pixels_of(decode_png(file, PixelFormat::kRgb, kDefaultMaxPixels,
                                   "x.png")),
              want)
        << what;
    EXPECT_EQ(pixels_of(decode_png_with_libpng(file, PixelFormat::kRgb,
                                               kDefaultMaxPixels, "x.png")),
              want)
        << what;
    expect_same(file, what);
  }
  // Colour chunks no longer send an 8-bit file to libpng.
  const PngSpec tagged{.linear_gamma = true, .transparency = true};
  EXPECT_TRUE(in_place(decode_png(write(tagged, samples(tagged)),
                                  PixelFormat::kRgb, kDefaultMaxPixels, "x")));
}

uint32_t crc32_of(const uint8_t* p, std::size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

uint32_t get32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | p[3];
}

// The offset of the first chunk of `type`.
std::size_t find_chunk(const std::vector<uint8_t>& f, const char* type) {
  std::size_t at = 8;
  while (at + 8 <= f.size()) {
    if (std::memcmp(f.data() + at + 4, type, 4) == 0) return at;
    at += get32(f.data() + at) + 12;
  }
  ADD_FAILURE() << "no " << type << " chunk";
  return 0;
}

void fix_crc(std::vector<uint8_t>* f, std::size_t chunk) {
  const uint32_t n = get32(f->data() + chunk);
  put32(f->data() + chunk + 8 + n, crc32_of(f->data() + chunk + 4, n + 4));
}

TEST(PngTest, DamagedFilesFailAsLibpngDecides) {
  // One IDAT of stored deflate: the filtered rows lie in the chunk as they
  // are, after the zlib header (2 bytes) and the stored block header (5).
  PngSpec s{.width = 8, .height = 4, .filters = PNG_FILTER_NONE, .level = 0};
  const std::vector<uint8_t> good = write(s, samples(s));
  const std::size_t idat = find_chunk(good, "IDAT");
  const std::size_t first_filter_byte = idat + 8 + 2 + 5;

  std::vector<std::pair<std::string, std::vector<uint8_t>>> cases;
  {
    auto f = good;  // an IDAT CRC that does not match
    f[idat + 8 + 3] ^= 0x40;
    cases.emplace_back("bad IDAT CRC", f);
  }
  {
    // A filter type PNG does not define, with the zlib checksum and the
    // chunk CRC made right again.
    auto f = good;
    f[first_filter_byte] = 7;
    const uint32_t n = get32(f.data() + idat);
    const uint8_t* raw = f.data() + first_filter_byte;
    const std::size_t raw_n = n - 2 - 5 - 4;
    uint32_t a = 1, b = 0;
    for (std::size_t i = 0; i < raw_n; ++i) {
      a = (a + raw[i]) % 65521;
      b = (b + a) % 65521;
    }
    put32(f.data() + idat + 8 + n - 4, (b << 16) | a);
    fix_crc(&f, idat);
    cases.emplace_back("filter type 7", f);
  }
  {
    auto f = good;  // cut in the middle of the IDAT chunk
    f.resize(idat + 8 + get32(good.data() + idat) / 2);
    cases.emplace_back("truncated", f);
  }
  {
    auto f = good;  // no IEND
    f.resize(find_chunk(good, "IEND"));
    cases.emplace_back("no IEND", f);
  }
  {
    auto f = good;  // IHDR's CRC wrong
    f[8 + 8] ^= 1;
    cases.emplace_back("bad IHDR CRC", f);
  }
  for (const auto& [what, file] : cases) expect_same(file, what);
  // Over max_pixels: the same error from both, before any pixel memory.
  for (PixelFormat f : kFormats) {
    const Outcome direct =
        outcome([&] { return decode_png(good, f, 31, "x"); });
    EXPECT_TRUE(direct == outcome([&] {
                  return decode_png_with_libpng(good, f, 31, "x");
                }));
    EXPECT_NE(direct.error.find("exceeds the limit of 31 pixels"),
              std::string::npos)
        << direct.error;
  }
}

TEST(PngTest, LibpngsWidthLimitHoldsOnTheDirectPath) {
  // libpng refuses an image over 1,000,000 pixels wide (its default user
  // limit): the direct path must not decode one either.
  PngSpec wide{.width = 1000001, .height = 1, .colour = PNG_COLOR_TYPE_GRAY};
  const std::vector<uint8_t> wide_file = write(wide, samples(wide));
  expect_same(wide_file, "1,000,001 wide");
  EXPECT_FALSE(outcome([&] {
                 return decode_png(wide_file, PixelFormat::kGray,
                                   kDefaultMaxPixels, "x");
               }).pixels);
}

TEST(PngTest, AChunkLongerThanTheFileIsRefusedAtOnce) {
  // 71 bytes whose zTXt chunk claims 1,124,073,481 bytes (found by the
  // image fuzzer): libpng would allocate and clear that much before
  // finding the data missing.
  PngSpec s{.width = 4, .height = 4};
  std::vector<uint8_t> file = write(s, samples(s));
  file.resize(33);  // the signature and IHDR
  const uint8_t ztxt[] = {0x43, 0x00, 0x00, 0x09, 'z', 'T', 'X', 't',
                          'k',  0,    0,    1,    2,   3,   4,   5};
  file.insert(file.end(), std::begin(ztxt), std::end(ztxt));
  for (PixelFormat f : kFormats) {
    try {
      decode_png(file, f, kDefaultMaxPixels, "huge.png");
      ADD_FAILURE() << "decoded";
    } catch (const DecodeError& e) {
      EXPECT_STREQ(e.what(),
                   "huge.png: invalid PNG: the 'zTXt' chunk at byte 33 "
                   "declares 1124073481 bytes, but only 4 follow (cut short "
                   "or damaged)");
    }
  }
  EXPECT_THROW(probe_png(file, "huge.png"), DecodeError);
}

}  // namespace
}  // namespace feedline::media
