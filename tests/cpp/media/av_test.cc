// SPDX-License-Identifier: Apache-2.0
//
// feedline::media from C++: demux with windows, decode, sampling, filters,
// conversion layouts, ownership and errors. The clips are made by the
// ffmpeg CLI in a temporary directory; the expected frames are what the CLI
// decodes.

#include "feedline/media/av.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/media/audio.h"

namespace feedline::media {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class AvTest : public ::testing::Test {
 protected:
  static constexpr const char* kShrinkingCrop =
      "crop=w=100:h=100:x=500:y=350,format=rgb24";
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("feedline_av_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    const std::string d = dir_->string();
    // 4 s at 25 fps, a key frame every 25 frames, with B-frames.
    run("ffmpeg -v error -y -f lavfi -i testsrc=size=96x64:rate=25:duration=4 "
        "-c:v libx264 -pix_fmt yuv420p -g 25 " +
        d + "/clip.mp4");
    run("ffmpeg -v error -y -i " + d + "/clip.mp4 -f rawvideo -pix_fmt rgb24 " +
        d + "/clip.rgb");
    run("ffmpeg -v error -y -f lavfi -i testsrc=size=96x64:rate=25:duration=1 "
        "-f lavfi -i sine=frequency=440:sample_rate=8000:duration=1 -c:v "
        "libx264 -pix_fmt yuv420p -c:a pcm_s16le " +
        d + "/av.mkv");
    // An MP3 stream that turns from stereo to mono: two files joined byte
    // for byte (each MP3 frame carries its own header), and the CLI's
    // decode of it as float32 samples.
    for (const char* ch : {"2", "1"}) {
      run("ffmpeg -v error -y -f lavfi -i "
          "sine=frequency=440:sample_rate=22050:duration=0.5 -ac " +
          std::string(ch) +
          " -c:a libmp3lame -b:a 32k -write_xing 0 -id3v2_version 0 " + d +
          "/part" + ch + ".mp3");
    }
    run("cat " + d + "/part2.mp3 " + d + "/part1.mp3 > " + d + "/joined.mp3");
    // A raw H.264 stream whose frames shrink from 640x480 to 160x120, and
    // the CLI's crop of it.
    for (const char* size : {"640x480", "160x120"}) {
      run("ffmpeg -v error -y -f lavfi -i testsrc=size=" + std::string(size) +
          ":rate=25 -frames:v 5 -c:v libx264 " + d + "/" + size + ".h264");
    }
    run("cat " + d + "/640x480.h264 " + d + "/160x120.h264 > " + d +
        "/shrinking.h264");
    run("ffmpeg -v error -y -i " + d + "/shrinking.h264 -vf " + kShrinkingCrop +
        " -f rawvideo -pix_fmt rgb24 " + d + "/shrinking.rgb");
    run("ffmpeg -v error -y -i " + d + "/joined.mp3 -f f32le " + d +
        "/joined.f32");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static void run(const std::string& cmd) {
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static std::string path(const char* name) { return (*dir_ / name).string(); }
  static Source file(const char* name) {
    return Source{path(name), {}, nullptr};
  }

  // Frame i of the CLI's rgb24 decode of clip.mp4.
  static const uint8_t* expected_frame(int i) {
    static const std::vector<uint8_t> rgb = read_all(*dir_ / "clip.rgb");
    return rgb.data() + static_cast<std::size_t>(i) * kFrameBytes;
  }
  static constexpr std::size_t kFrameBytes = 96 * 64 * 3;

  static fs::path* dir_;
};

fs::path* AvTest::dir_ = nullptr;

TEST_F(AvTest, LoadVideoEqualsTheCli) {
  Buffer v = load_video(file("clip.mp4"), VideoOptions{});
  ASSERT_EQ(v.shape(), (std::vector<int64_t>{100, 64, 96, 3}));
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(std::memcmp(v.data_as<uint8_t>() + i * kFrameBytes,
                          expected_frame(i), kFrameBytes),
              0)
        << "frame " << i;
  }
}

TEST_F(AvTest, WindowIsHalfOpenAndStartsMidGop) {
  VideoOptions o;
  o.window = Window{Rational{13, 10}, Rational{2, 1}};  // frames 33..49
  Buffer v = load_video(file("clip.mp4"), o);
  ASSERT_EQ(v.shape()[0], 17);
  for (int i = 0; i < 17; ++i) {
    ASSERT_EQ(std::memcmp(v.data_as<uint8_t>() + i * kFrameBytes,
                          expected_frame(33 + i), kFrameBytes),
              0)
        << "frame " << 33 + i;
  }
}

TEST_F(AvTest, FromMemoryEqualsFromPath) {
  auto bytes =
      std::make_shared<std::vector<uint8_t>>(read_all(path("clip.mp4")));
  Source mem{"", std::span<const uint8_t>(*bytes), bytes};
  VideoOptions o;
  o.max_frames = 5;
  Buffer v = load_video(mem, o, "clip in memory");
  ASSERT_EQ(v.shape()[0], 5);
  EXPECT_EQ(std::memcmp(v.data(), expected_frame(0), 5 * kFrameBytes), 0);
}

TEST_F(AvTest, WindowPastTheEndIsADecodeError) {
  VideoOptions o;
  o.window = Window{Rational{10, 1}, Rational{11, 1}};
  try {
    load_video(file("clip.mp4"), o);
    FAIL() << "no error";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("clip.mp4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("window"), std::string::npos);
  }
}

TEST_F(AvTest, DemuxerReportsStreamsAndCodecs) {
  Demuxer d(file("av.mkv"), DemuxConfig{});
  EXPECT_TRUE(d.has_audio());
  EXPECT_EQ(d.num_streams(), 2);
  Codec v = d.codec(Media::kVideo);
  EXPECT_EQ(v.name(), "h264");
  EXPECT_EQ(v.width(), 96);
  EXPECT_EQ(v.height(), 64);
  EXPECT_EQ(v.frame_rate(), (Rational{25, 1}));
  Codec a = d.codec(Media::kAudio);
  EXPECT_EQ(a.name(), "pcm_s16le");
  EXPECT_EQ(a.sample_rate(), 8000);
  EXPECT_EQ(a.num_channels(), 1);
}

TEST_F(AvTest, PacketsAreConsumedByDecodingAndClonesShareThem) {
  Demuxer d(file("clip.mp4"), DemuxConfig{});
  auto packets = d.demux(Media::kVideo, Window{Rational{1, 1}, Rational{2, 1}});
  EXPECT_EQ(packets->size(), 25u);
  EXPECT_GT(packets->num_packets(), 25u);  // from the key frame at 1 s - GOP
  auto copy = packets->clone();
  auto frames =
      decode_packets(std::move(*packets), std::string("format=pix_fmts=rgb24"),
                     DecodeConfig{});
  EXPECT_TRUE(packets->consumed());
  EXPECT_THROW(packets->size(), InvalidArgument);
  ASSERT_EQ(frames->num_frames(), 25);
  Buffer b = convert_frames(std::move(*frames));
  EXPECT_TRUE(frames->consumed());
  EXPECT_EQ(std::memcmp(b.data(), expected_frame(25), 25 * kFrameBytes), 0);
  auto again = decode_packets(std::move(*copy), std::nullopt, DecodeConfig{});
  EXPECT_EQ(again->format(), "yuv420p");
  Buffer yuv = convert_frames(std::move(*again));
  EXPECT_EQ(yuv.shape(), (std::vector<int64_t>{25, 1, 96, 96}));
}

TEST_F(AvTest, EveryAccessorOfAConsumedObjectThrowsObjectConsumed) {
  Demuxer d(file("clip.mp4"), DemuxConfig{});
  auto packets = d.demux(Media::kVideo, Window{Rational{1, 1}, Rational{2, 1}});
  auto frames = decode_packets(std::move(*packets), std::nullopt, {});
  EXPECT_EQ(packets->media(), Media::kVideo);  // the kind stays readable
  EXPECT_THROW(packets->src(), ObjectConsumed);
  EXPECT_THROW(packets->stream_index(), ObjectConsumed);
  EXPECT_THROW(packets->time_base(), ObjectConsumed);
  EXPECT_THROW(packets->window(), ObjectConsumed);
  EXPECT_THROW(packets->codec(), ObjectConsumed);
  EXPECT_THROW(packets->num_packets(), ObjectConsumed);
  EXPECT_THROW(packets->size(), ObjectConsumed);
  EXPECT_THROW(packets->clone(), ObjectConsumed);
  EXPECT_NE(packets->to_string().find("consumed"), std::string::npos);
  EXPECT_EQ(convert_frames(std::move(*frames)).shape()[0], 25);
  EXPECT_EQ(frames->media(), Media::kVideo);
  EXPECT_THROW(frames->time_base(), ObjectConsumed);
  EXPECT_THROW(frames->num_frames(), ObjectConsumed);
  EXPECT_THROW(frames->pts(), ObjectConsumed);
  EXPECT_THROW(frames->clone(), ObjectConsumed);
  EXPECT_THROW(convert_frames(std::move(*frames)), ObjectConsumed);
}

TEST_F(AvTest, SampleDecodeEqualsFullDecode) {
  Demuxer d(file("clip.mp4"), DemuxConfig{});
  auto packets = d.demux(Media::kVideo, std::nullopt);
  const std::vector<int64_t> wanted = {0, 3, 24, 26, 60, 99};
  auto frames =
      sample_decode_video(std::move(*packets), wanted,
                          std::string("format=pix_fmts=rgb24"), DecodeConfig{});
  ASSERT_EQ(frames.size(), wanted.size());
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    Buffer b = convert_frames(std::move(*frames[i]));
    ASSERT_EQ(b.shape(), (std::vector<int64_t>{64, 96, 3}));
    EXPECT_EQ(std::memcmp(b.data(), expected_frame(static_cast<int>(wanted[i])),
                          kFrameBytes),
              0)
        << "frame " << wanted[i];
  }
}

TEST_F(AvTest, SampleDecodeRejectsBadIndices) {
  Demuxer d(file("clip.mp4"), DemuxConfig{});
  EXPECT_THROW(
      sample_decode_video(std::move(*d.demux(Media::kVideo, std::nullopt)),
                          {5, 5}, std::nullopt, DecodeConfig{}),
      InvalidArgument);
  EXPECT_THROW(
      sample_decode_video(std::move(*d.demux(Media::kVideo, std::nullopt)),
                          {100}, std::nullopt, DecodeConfig{}),
      OutOfRange);
}

TEST_F(AvTest, StreamingDemuxCoversEveryPacketOnce) {
  Demuxer d(file("av.mkv"), DemuxConfig{});
  std::size_t video = 0;
  std::size_t audio = 0;
  for (;;) {
    auto chunk = d.next_chunk({0, 1}, 0, 4);
    if (chunk.empty()) break;
    for (auto& [index, packets] : chunk) {
      EXPECT_FALSE(packets->codec().has_value());
      EXPECT_LE(packets->num_packets(), 4u);
      (index == d.best_stream(Media::kVideo) ? video : audio) +=
          packets->num_packets();
    }
  }
  Demuxer whole(file("av.mkv"), DemuxConfig{});
  EXPECT_EQ(video, whole.demux(Media::kVideo, std::nullopt)->num_packets());
  EXPECT_EQ(audio, whole.demux(Media::kAudio, std::nullopt)->num_packets());
}

TEST_F(AvTest, AudioConvertsPlanarAndPacked) {
  Demuxer d(file("av.mkv"), DemuxConfig{});
  auto frames =
      decode_packets(std::move(*d.demux(Media::kAudio, std::nullopt)),
                     std::string("aformat=sample_fmts=fltp"), DecodeConfig{});
  Buffer planar = convert_frames(std::move(*frames));
  EXPECT_EQ(planar.dtype(), DType::kFloat32);
  EXPECT_EQ(planar.shape(), (std::vector<int64_t>{1, 8000}));
  frames = decode_packets(std::move(*d.demux(Media::kAudio, std::nullopt)),
                          std::nullopt, DecodeConfig{});
  Buffer packed = convert_frames(std::move(*frames));
  EXPECT_EQ(packed.dtype(), DType::kInt16);
  EXPECT_EQ(packed.shape(), (std::vector<int64_t>{8000, 1}));
}

TEST_F(AvTest, AudioWhoseChannelsChangeMidStreamEqualsTheCli) {
  // load_audio sets its resampler up again at the change (a resampler set
  // up for two planes once read the mono frames' missing second one).
  const std::vector<uint8_t> data = read_all(path("joined.mp3"));
  const Buffer got = load_audio(data, AudioOptions{}, "joined.mp3");
  const std::vector<uint8_t> cli = read_all(path("joined.f32"));
  const int64_t samples = static_cast<int64_t>(cli.size() / 8);  // 2 x f32
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{2, samples}));
  ASSERT_GT(samples, 22050);
  const auto* want = reinterpret_cast<const float*>(cli.data());
  const auto* planes = got.data_as<float>();
  int64_t differ = 0;
  for (int64_t i = 0; i < samples; ++i) {
    for (int64_t c = 0; c < 2; ++c) {
      differ += planes[c * samples + i] != want[i * 2 + c] ? 1 : 0;
    }
  }
  EXPECT_EQ(differ, 0);
  // A filter chain is set up for the first frame: the change is named.
  Demuxer d(file("joined.mp3"), DemuxConfig{});
  try {
    decode_packets(std::move(*d.demux(Media::kAudio, std::nullopt)),
                   std::string("aformat=sample_fmts=fltp"), DecodeConfig{});
    FAIL() << "no DecodeError";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("change mid-stream"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(AvTest, VideoWhoseFramesShrinkMidStreamGetsANewGraphAsInTheCli) {
  // crop is configured for one input size: the graph made for the 640x480
  // frames read past the 160x120 ones (under ASan: a heap overflow).
  Demuxer d(file("shrinking.h264"), DemuxConfig{});
  const Buffer got = convert_frames(std::move(
      *decode_packets(std::move(*d.demux(Media::kVideo, std::nullopt)),
                      std::string(kShrinkingCrop), DecodeConfig{})));
  const std::vector<uint8_t> want = read_all(path("shrinking.rgb"));
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{10, 100, 100, 3}));
  ASSERT_EQ(got.nbytes(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
  // A filter that cannot take the new frames says so.
  Demuxer again(file("shrinking.h264"), DemuxConfig{});
  try {
    decode_packets(std::move(*again.demux(Media::kVideo, std::nullopt)),
                   std::string("crop=w=200:h=200:x=0:y=0"), DecodeConfig{});
    FAIL() << "no DecodeError";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("does not take the new ones"),
              std::string::npos)
        << e.what();
  }
}

// A streaming Decoder that is done (flushed, or stopped by max_frames)
// refuses more packets instead of returning no frames for them.
TEST_F(AvTest, ADecoderThatIsDoneRefusesMorePackets) {
  Demuxer d(file("clip.mp4"), DemuxConfig{});
  const Codec codec = d.codec(Media::kVideo);
  auto packets = d.demux(Media::kVideo, std::nullopt);
  auto second = packets->clone();
  auto third = packets->clone();
  Decoder flushed(codec, std::nullopt, DecodeConfig{}, "clip.mp4");
  int64_t n = flushed.decode(std::move(*packets))->num_frames();
  n += flushed.flush()->num_frames();
  EXPECT_EQ(n, 100);
  EXPECT_EQ(flushed.flush()->num_frames(), 0);
  try {
    flushed.decode(std::move(*second));
    FAIL() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(
        std::string(e.what()).find("clip.mp4: the Decoder is done (flushed"),
        std::string::npos)
        << e.what();
  }
  Decoder stopped(codec, std::nullopt, DecodeConfig{}, "clip.mp4");
  auto again = third->clone();
  EXPECT_EQ(stopped.decode(std::move(*third), 5)->num_frames(), 5);
  EXPECT_THROW(stopped.decode(std::move(*again)), InvalidArgument);
}

TEST_F(AvTest, FilterGraphErrorsAreTyped) {
  EXPECT_THROW(FilterGraph("no_such_filter"), InvalidArgument);
  EXPECT_THROW(FilterGraph("buffer=video_size=2x2:pix_fmt=rgb24:time_base=1/"
                           "25:pixel_aspect=1/1,nullsink"),
               InvalidArgument);  // no buffersink output
  FilterGraph g(
      "buffer=video_size=96x64:pix_fmt=yuv420p:time_base=1/12800:pixel_aspect="
      "1/1,hflip,buffersink");
  Demuxer d(file("clip.mp4"), DemuxConfig{});
  auto frames = decode_packets(std::move(*d.demux(Media::kVideo, std::nullopt)),
                               std::string("scale=w=32:h=32"), DecodeConfig{});
  EXPECT_THROW(g.add_frames(std::move(*frames)), InvalidArgument);  // size
}

TEST(DecoderThreadsTest, AutoUsesIdleCoresForWholeClipsOnly) {
  const DecodeConfig automatic;
  EXPECT_EQ(automatic.threads, DecodeConfig::kAutoThreads);
  EXPECT_EQ(resolve_decoder_threads(automatic, true, 1, 2).threads, 2);
  EXPECT_EQ(resolve_decoder_threads(automatic, true, 2, 2).threads, 1);
  EXPECT_EQ(resolve_decoder_threads(automatic, true, 3, 8).threads, 2);
  EXPECT_EQ(resolve_decoder_threads(automatic, true, 9, 8).threads, 1);
  EXPECT_EQ(resolve_decoder_threads(automatic, false, 1, 8).threads, 1);
  DecodeConfig fixed;
  fixed.threads = 1;
  EXPECT_EQ(resolve_decoder_threads(fixed, true, 1, 8).threads, 1);
  fixed.threads = 0;  // FFmpeg chooses
  EXPECT_EQ(resolve_decoder_threads(fixed, true, 1, 8).threads, 0);
}

TEST_F(AvTest, AutoThreadsDecodeTheSameFrames) {
  VideoOptions automatic;
  VideoOptions one;
  one.decode.threads = 1;
  const Buffer a = load_video(file("clip.mp4"), automatic);
  const Buffer b = load_video(file("clip.mp4"), one);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
}

TEST_F(AvTest, BadInputIsTyped) {
  const std::vector<uint8_t> junk(4096, 7);
  EXPECT_THROW(load_video(Source{"", junk, nullptr}, VideoOptions{}, "junk"),
               DecodeError);
  EXPECT_THROW(load_video(file("missing.mp4"), VideoOptions{}), IoError);
  DemuxConfig unknown_format;
  unknown_format.format = "no_such_format";
  EXPECT_THROW(Demuxer(file("clip.mp4"), unknown_format), InvalidArgument);
  DemuxConfig unused;
  unused.format_options["no_such_option"] = "1";
  EXPECT_THROW(Demuxer(file("clip.mp4"), unused), InvalidArgument);
  VideoOptions bad_decoder;
  bad_decoder.decode.decoder = "no_such_decoder";
  EXPECT_THROW(load_video(file("clip.mp4"), bad_decoder), InvalidArgument);
  // Truncated: the first half of the file decodes or fails cleanly.
  std::vector<uint8_t> half = read_all(path("clip.mp4"));
  half.resize(half.size() / 2);
  try {
    Buffer b = load_video(Source{"", half, nullptr}, VideoOptions{}, "half");
    EXPECT_LE(b.shape()[0], 100);
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("half"), std::string::npos);
  }
}

}  // namespace
}  // namespace feedline::media
