// SPDX-License-Identifier: Apache-2.0
//
// feedline::media encoding from C++: lossless round trips through Muxer and
// encode_image read back with feedline's own demuxer and decoder, audio
// regrouped into the encoder's frame size and converted to its sample
// format, rate and channels, and typed errors.

#include "feedline/media/encode.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/media/av.h"

namespace feedline::media {
namespace {

namespace fs = std::filesystem;

constexpr int kW = 48;
constexpr int kH = 32;

Buffer rgb_frames(int n) {
  Buffer b = Buffer::allocate(DType::kUint8, {n, kH, kW, 3});
  auto* p = b.data_as<uint8_t>();
  for (int i = 0; i < n * kH * kW * 3; ++i)
    p[i] = static_cast<uint8_t>((i * 7 + i / 97) & 0xFF);
  return b;
}

class EncodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_encode_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  static Buffer decode_rgb(const std::string& file) {
    Demuxer d(Source{file, {}, nullptr}, DemuxConfig{});
    auto packets = d.demux(Media::kVideo, std::nullopt);
    auto frames =
        decode_packets(std::move(*packets),
                       std::string("format=pix_fmts=rgb24"), DecodeConfig{});
    return convert_frames(std::move(*frames));
  }
  fs::path dir_;
};

TEST_F(EncodeTest, Ffv1RoundTripIsExact) {
  const Buffer in = rgb_frames(6);
  {
    Muxer muxer(path("v.mkv"));
    VideoEncodeConfig c;
    c.width = kW;
    c.height = kH;
    c.frame_rate = Rational{25, 1};
    c.pix_fmt = "bgr0";  // the frames are rgb24: converted, losslessly
    Encoder& enc = muxer.add_encode_stream(c, "ffv1");
    EXPECT_EQ(enc.name(), "ffv1");
    muxer.open();
    auto frames = video_frames_from(in, "rgb24", Rational{25, 1});
    muxer.write(0, *enc.encode(std::move(*frames)));
    muxer.write(0, *enc.flush());
    muxer.close();
    EXPECT_TRUE(muxer.closed());
  }
  const Buffer out = decode_rgb(path("v.mkv"));
  ASSERT_EQ(out.shape(), in.shape());
  EXPECT_EQ(std::memcmp(out.data(), in.data(), in.nbytes()), 0);
}

TEST_F(EncodeTest, PngBytesDecodeToTheInput) {
  const Buffer in = rgb_frames(1);
  ImageEncodeOptions o;
  o.format = "png";
  const Buffer one = in.view_as(DType::kUint8, {kH, kW, 3});
  const Buffer png = encode_image(one, o);
  ASSERT_GT(png.nbytes(), 8u);
  EXPECT_EQ(std::memcmp(png.data(), "\x89PNG", 4), 0);
  Demuxer d(Source{"", png.bytes(), png.owner()}, DemuxConfig{});
  auto packets = d.demux(Media::kImage, std::nullopt);
  auto frames =
      decode_packets(std::move(*packets), std::string("format=pix_fmts=rgb24"),
                     DecodeConfig{});
  const Buffer out = convert_frames(std::move(*frames));
  ASSERT_EQ(out.nbytes(), one.nbytes());
  EXPECT_EQ(std::memcmp(out.data(), one.data(), one.nbytes()), 0);
}

TEST_F(EncodeTest, AudioIsRegroupedIntoTheEncodersFrames) {
  constexpr int kSamples = 10000;
  Buffer pcm = Buffer::allocate(DType::kInt16, {kSamples, 2});
  auto* s = pcm.data_as<int16_t>();
  for (int i = 0; i < kSamples * 2; ++i)
    s[i] = static_cast<int16_t>((i * 131) % 20000 - 10000);
  {
    Muxer muxer(path("a.flac"));
    AudioEncodeConfig c;
    c.num_channels = 2;
    c.sample_rate = 16000;
    c.sample_fmt = "s16";
    Encoder& enc = muxer.add_encode_stream(c);
    ASSERT_GT(enc.frame_size(), 0);
    muxer.open();
    // Pieces of 3000 samples: not the encoder's frame size.
    for (int at = 0; at < kSamples; at += 3000) {
      const int n = std::min(3000, kSamples - at);
      Buffer piece =
          Buffer::view(pcm.owner(), s + static_cast<std::ptrdiff_t>(at) * 2,
                       DType::kInt16, {n, 2});
      muxer.write(
          0,
          *enc.encode(std::move(*audio_frames_from(piece, "s16", 16000, at))));
    }
    muxer.write(0, *enc.flush());
    muxer.close();
  }
  Demuxer d(Source{path("a.flac"), {}, nullptr}, DemuxConfig{});
  auto packets = d.demux(Media::kAudio, std::nullopt);
  auto frames =
      decode_packets(std::move(*packets),
                     std::string("aformat=sample_fmts=s16"), DecodeConfig{});
  const Buffer out = convert_frames(std::move(*frames));
  ASSERT_EQ(out.nbytes(), pcm.nbytes());
  EXPECT_EQ(std::memcmp(out.data(), pcm.data(), pcm.nbytes()), 0);
}

TEST_F(EncodeTest, EncodeAudioConvertsFormatRateAndChannels) {
  // Float samples k / 32768 into a FLAC s16 stream: exactly the int16 k.
  constexpr int kSamples = 5000;
  Buffer pcm = Buffer::allocate(DType::kInt16, {kSamples, 2});
  Buffer flt = Buffer::allocate(DType::kFloat32, {kSamples, 2});
  for (int i = 0; i < kSamples * 2; ++i) {
    pcm.data_as<int16_t>()[i] = static_cast<int16_t>((i * 131) % 20000 - 10000);
    flt.data_as<float>()[i] =
        static_cast<float>(pcm.data_as<int16_t>()[i]) / 32768.0F;
  }
  AudioEncodeConfig c;  // channels and rate: the frames'
  c.sample_fmt = "s16";
  const Buffer flac =
      encode_audio(std::move(*audio_frames_from(flt, "flt", 16000)), "flac", c);
  {
    Demuxer d(Source{"", flac.bytes(), flac.owner()}, DemuxConfig{});
    EXPECT_EQ(d.codec(Media::kAudio).sample_rate(), 16000);
    auto frames =
        decode_packets(std::move(*d.demux(Media::kAudio, {})),
                       std::string("aformat=sample_fmts=s16"), DecodeConfig{});
    const Buffer out = convert_frames(std::move(*frames));
    ASSERT_EQ(out.nbytes(), pcm.nbytes());
    EXPECT_EQ(std::memcmp(out.data(), pcm.data(), pcm.nbytes()), 0);
  }
  // 16 kHz stereo to 48 kHz mono: three times the samples, the resampler's
  // tail included.
  AudioEncodeConfig mono;
  mono.num_channels = 1;
  mono.sample_rate = 48000;
  const Buffer wav = encode_audio(
      std::move(*audio_frames_from(pcm, "s16", 16000)), "wav", mono);
  Demuxer d(Source{"", wav.bytes(), wav.owner()}, DemuxConfig{});
  auto frames =
      decode_packets(std::move(*d.demux(Media::kAudio, {})),
                     std::string("aformat=sample_fmts=s16"), DecodeConfig{});
  EXPECT_EQ(frames->num_channels(), 1);
  const Buffer out = convert_frames(std::move(*frames));
  EXPECT_EQ(out.nbytes(), std::size_t{3} * kSamples * sizeof(int16_t));
  // Streams shorter than the resampler's filter: libswresample alone
  // gives nothing for them, even drained.
  const struct {
    int rate;
    int64_t samples;
    std::size_t want;
  } shorts[] = {{8000, 3, 18}, {44100, 10, 11}, {96000, 5, 3}};
  for (const auto& k : shorts) {
    const Buffer few = Buffer::view(pcm.owner(), pcm.data_as<int16_t>(),
                                    DType::kInt16, {k.samples, 2});
    const Buffer file = encode_audio(
        std::move(*audio_frames_from(few, "s16", k.rate)), "wav", mono);
    Demuxer dm(Source{"", file.bytes(), file.owner()}, DemuxConfig{});
    auto fr =
        decode_packets(std::move(*dm.demux(Media::kAudio, {})),
                       std::string("aformat=sample_fmts=s16"), DecodeConfig{});
    EXPECT_EQ(convert_frames(std::move(*fr)).nbytes(), k.want * sizeof(int16_t))
        << k.rate << " Hz, " << k.samples << " samples";
  }
  // Mixed-up streams are refused: the first frame fixes the input.
  Muxer muxer(path("mixed.wav"));
  Encoder& enc = muxer.add_encode_stream(mono);
  muxer.open();
  enc.encode(std::move(*audio_frames_from(pcm, "s16", 16000)));
  EXPECT_THROW(enc.encode(std::move(*audio_frames_from(pcm, "s16", 8000))),
               InvalidArgument);
  EXPECT_THROW(encode_audio(std::move(*video_frames_from(rgb_frames(1), "rgb24",
                                                         Rational{25, 1})),
                            "wav", mono),
               InvalidArgument);
}

TEST_F(EncodeTest, ErrorsAreTyped) {
  const Buffer in = rgb_frames(1);
  EXPECT_THROW(video_frames_from(in.view_as(DType::kUint8, {kH, kW, 3}),
                                 "rgb24", Rational{25, 1}),
               InvalidArgument);
  EXPECT_THROW(video_frames_from(in, "rgb24", Rational{0, 1}), InvalidArgument);
  EXPECT_THROW(Muxer(path("x.no_such_extension")), InvalidArgument);
  Muxer muxer(path("x.mp4"));
  VideoEncodeConfig c;
  c.width = kW;
  c.height = kH;
  c.frame_rate = Rational{25, 1};
  c.pix_fmt = "rgb24";
  try {
    muxer.add_encode_stream(c, "libx264");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("it takes yuv420p"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(muxer.open(), InvalidArgument);  // no stream yet
  c.pix_fmt = "yuv420p";
  Encoder& enc = muxer.add_encode_stream(c, "libx264");
  auto packets =
      enc.encode(std::move(*video_frames_from(in, "rgb24", {25, 1})));
  EXPECT_THROW(muxer.write(0, *packets), InvalidArgument);  // not open
  EXPECT_THROW(
      muxer.write(0, *enc.encode(std::move(*video_frames_from(
                         rgb_frames(1).view_as(DType::kUint8, {1, kW, kH, 3}),
                         "rgb24", {25, 1})))),
      InvalidArgument);  // wrong size
  ImageEncodeOptions o;
  o.format = "gif";
  EXPECT_THROW(encode_image(in, o), InvalidArgument);
}

TEST_F(EncodeTest, CheckEncodeRefusesWhatNoFramesCouldFix) {
  VideoEncodeConfig v;  // size and rate: the frames'
  EXPECT_NO_THROW(check_encode("matroska", v, "ffv1"));
  EXPECT_NO_THROW(check_encode("mpeg", v, "mpeg1video"));
  EXPECT_THROW(check_encode("no_such_muxer", v, ""), InvalidArgument);
  EXPECT_THROW(check_encode("matroska", v, "no_such_encoder"), InvalidArgument);
  EXPECT_THROW(check_encode("matroska", v, "flac"), InvalidArgument);
  EXPECT_THROW(check_encode("wav", v, ""), InvalidArgument);
  for (auto set : std::vector<void (*)(VideoEncodeConfig*)>{
           [](VideoEncodeConfig* c) { c->colorspace = "bt7099"; },
           [](VideoEncodeConfig* c) { c->color_primaries = "bt709x"; },
           [](VideoEncodeConfig* c) { c->color_trc = "nope"; },
           [](VideoEncodeConfig* c) { c->color_range = "pcm"; },
           [](VideoEncodeConfig* c) { c->pix_fmt = "yuvj420p"; },
           [](VideoEncodeConfig* c) {
             c->sample_aspect_ratio = Rational{-4, 3};
           }}) {
    VideoEncodeConfig bad;
    set(&bad);
    EXPECT_THROW(check_encode("matroska", bad, "ffv1"), InvalidArgument);
  }
  AudioEncodeConfig a;  // channels and rate: the frames'
  EXPECT_NO_THROW(check_encode("flac", a, ""));
  a.sample_rate = 44100;
  EXPECT_THROW(check_encode("ogg", a, "libopus"), InvalidArgument);
}

TEST_F(EncodeTest, EncodeVideoInMemoryReadsBackExactly) {
  const Buffer in = rgb_frames(5);
  struct Case {
    const char* format;
    const char* encoder;
    const char* pix_fmt;
    std::map<std::string, std::string> options;
  };
  // MP4 seeks back to finish its index: the memory output must allow it.
  const Case cases[] = {{"matroska", "ffv1", "bgr0", {}},
                        {"nut", "ffv1", "bgr0", {}},
                        {"mp4", "libx264rgb", "rgb24", {{"qp", "0"}}}};
  for (const Case& k : cases) {
    VideoEncodeConfig c;  // size and rate from the frames
    c.pix_fmt = k.pix_fmt;
    const Buffer file = encode_video(
        std::move(*video_frames_from(in, "rgb24", Rational{30, 1})), k.format,
        c, k.encoder, k.options);
    Demuxer d(Source{"", file.bytes(), file.owner()}, DemuxConfig{});
    EXPECT_EQ(d.codec(Media::kVideo).frame_rate(), (Rational{30, 1}))
        << k.format;
    auto packets = d.demux(Media::kVideo, std::nullopt);
    auto frames =
        decode_packets(std::move(*packets),
                       std::string("format=pix_fmts=rgb24"), DecodeConfig{});
    const Buffer out = convert_frames(std::move(*frames));
    ASSERT_EQ(out.shape(), in.shape()) << k.format;
    EXPECT_EQ(std::memcmp(out.data(), in.data(), in.nbytes()), 0) << k.format;
  }
  EXPECT_THROW(Muxer::in_memory("image2"), InvalidArgument);  // its own files
  auto m = Muxer::in_memory("matroska");
  EXPECT_THROW(m->take_bytes(), InvalidArgument);  // before close
}

// Decoded frames carry their file's name, and an encode of them names it.
TEST_F(EncodeTest, EncodeErrorsNameTheFileTheFramesCameFrom) {
  const std::string file = path("named.mkv");
  Muxer m(file);
  VideoEncodeConfig c;
  c.width = kW;
  c.height = kH;
  c.frame_rate = Rational{25, 1};
  c.pix_fmt = "yuv420p";
  Encoder& enc = m.add_encode_stream(c, "ffv1", {});
  m.open({});
  m.write(0, *enc.encode(std::move(
                 *video_frames_from(rgb_frames(3), "rgb24", Rational{25, 1}))));
  m.write(0, *enc.flush());
  m.close();
  Demuxer d(Source{file, {}, nullptr}, DemuxConfig{});
  auto frames = decode_packets(std::move(*d.demux(Media::kVideo, {})),
                               std::nullopt, DecodeConfig{});
  EXPECT_EQ(frames->src(), file);
  EXPECT_EQ(frames->clone()->src(), file);
  EXPECT_EQ(frames->select({0})->src(), file);
  EXPECT_EQ(frames->image(0)->src(), file);
  VideoEncodeConfig other;
  other.width = kW * 2;  // not the frames' size
  other.height = kH;
  try {
    encode_video(std::move(*frames->take()), "matroska", other, "ffv1");
    FAIL() << "encoded frames of the wrong size";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("<memory: frames of " + file +
                                         "> (stream 0)"),
              std::string::npos)
        << e.what();
  }
  // Frames made from arrays have no file: the output is named as before.
  EXPECT_EQ(video_frames_from(rgb_frames(1), "rgb24", Rational{25, 1})->src(),
            "");
}

TEST_F(EncodeTest, EncodeVideoKeepsUnevenlySpacedFramesAtTheirTimes) {
  // Frames at 0, 1, 2, 5 and 6 of 1/25 s: a variable frame rate.
  auto frames = video_frames_from(rgb_frames(3), "rgb24", Rational{25, 1}, 0);
  frames->extend(std::move(
      *video_frames_from(rgb_frames(2), "rgb24", Rational{25, 1}, 5)));
  const Buffer file =
      encode_video(std::move(*frames), "matroska", VideoEncodeConfig{}, "ffv1");
  Demuxer d(Source{"", file.bytes(), file.owner()}, DemuxConfig{});
  auto packets = d.demux(Media::kVideo, std::nullopt);
  const std::vector<double> want = {0.0, 0.04, 0.08, 0.2, 0.24};
  const std::vector<double> got = packets->timestamps();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-3) << i;
  // The Muxer's streams number their frames unless asked to keep times;
  // an encoder of fixed rates cannot keep them.
  VideoEncodeConfig c;
  c.width = kW;
  c.height = kH;
  c.frame_rate = Rational{25, 1};
  c.time_base = Rational{1, 25};
  auto m = Muxer::in_memory("mpeg");
  EXPECT_THROW(m->add_encode_stream(c, "mpeg2video"), InvalidArgument);
  // Times that go back are refused, not sent to the encoder.
  auto back = video_frames_from(rgb_frames(1), "rgb24", Rational{25, 1}, 4);
  back->extend(std::move(
      *video_frames_from(rgb_frames(1), "rgb24", Rational{25, 1}, 2)));
  c.pix_fmt = "bgr0";
  auto m2 = Muxer::in_memory("matroska");
  Encoder& enc = m2->add_encode_stream(c, "ffv1");
  EXPECT_THROW(enc.encode(std::move(*back)), InvalidArgument);
}

TEST_F(EncodeTest, AMuxerDestroyedOpenLeavesAReadableFile) {
  {
    Muxer muxer(path("open.mkv"));
    VideoEncodeConfig c;
    c.width = kW;
    c.height = kH;
    c.frame_rate = Rational{25, 1};
    c.pix_fmt = "bgr0";
    Encoder& enc = muxer.add_encode_stream(c, "ffv1");
    muxer.open();
    muxer.write(0, *enc.encode(std::move(*video_frames_from(
                       rgb_frames(3), "rgb24", Rational{25, 1}))));
    muxer.write(0, *enc.flush());
    // No close(): the destructor writes the trailer and closes the file.
  }
  EXPECT_EQ(decode_rgb(path("open.mkv")).shape()[0], 3);
}

}  // namespace
}  // namespace feedline::media
