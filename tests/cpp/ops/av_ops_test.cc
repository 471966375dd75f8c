// SPDX-License-Identifier: Apache-2.0
//
// The audio and video ops of feedline::ops on clips made with the ffmpeg CLI;
// the expected frames are the CLI's own rgb24 decode.

#include "feedline/ops/av_ops.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/builder.h"
#include "ops/ops_testing.h"

namespace feedline::ops {
namespace {

using media::Media;
using media::Rational;
using media::Window;
using testing::call;
using testing::encoded;
using testing::error_of;
using testing::TempDir;

constexpr std::size_t kFrameBytes = 64 * 48 * 3;

class AvOpsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("ops_av");
    const TempDir& d = *dir_;
    // 2 s at 25 fps, a key frame every 25 frames.
    testing::run(
        "ffmpeg -v error -y -f lavfi -i testsrc=size=64x48:rate=25:duration=2 "
        "-c:v libx264 -pix_fmt yuv420p -g 25 " +
        d / "clip.mp4");
    testing::run("ffmpeg -v error -y -i " + d / "clip.mp4" +
                 " -f rawvideo -pix_fmt rgb24 " + d / "clip.rgb");
    testing::run(
        "ffmpeg -v error -y -f lavfi -i "
        "sine=frequency=440:sample_rate=8000:duration=1 -c:a pcm_s16le " +
        d / "tone.wav");
  }
  static void TearDownTestSuite() { delete dir_; }

  static EncodedFile file(const std::string& name) {
    return encoded(name, testing::read_all(*dir_ / name));
  }
  // True if frames [0, n) of `v` are the CLI's frames [first, first + n).
  static void expect_frames(const Buffer& v, int first, int n) {
    static const std::vector<uint8_t> rgb =
        testing::read_all(*dir_ / "clip.rgb");
    ASSERT_EQ(v.shape(), (std::vector<int64_t>{n, 48, 64, 3}));
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(
          std::memcmp(v.data_as<uint8_t>() + i * kFrameBytes,
                      rgb.data() + (first + i) * kFrameBytes, kFrameBytes),
          0)
          << "frame " << first + i;
    }
  }

  static TempDir* dir_;
};

TempDir* AvOpsTest::dir_ = nullptr;

TEST_F(AvOpsTest, EveryOpDeclaresItsTypes) {
  struct Case {
    OpPtr op;
    const std::type_info& in;
    const std::type_info& out;
  };
  const Case cases[] = {
      {load_audio({}), typeid(EncodedFile), typeid(Buffer)},
      {load_video({}), typeid(EncodedFile), typeid(Buffer)},
      {load_video_clips({}), typeid(ClipRequest), typeid(Buffer)},
      {demux(Media::kVideo, std::nullopt), typeid(EncodedFile),
       typeid(PacketsItem)},
      {decode_packets(), typeid(PacketsItem), typeid(FramesItem)},
      {convert_frames(), typeid(FramesItem), typeid(Buffer)},
  };
  for (const Case& c : cases) {
    ASSERT_NE(c.op->input_type(), nullptr);
    ASSERT_NE(c.op->output_type(), nullptr);
    EXPECT_EQ(*c.op->input_type(), c.in) << type_name(c.in);
    EXPECT_EQ(*c.op->output_type(), c.out) << type_name(c.out);
  }
}

TEST_F(AvOpsTest, LoadVideoEqualsTheCli) {
  expect_frames(call(load_video({}), Item(file("clip.mp4"))).take_as<Buffer>(),
                0, 50);
  media::VideoOptions o;
  o.window = Window{Rational{1, 2}, Rational{1, 1}};  // frames 12.5..25
  o.max_frames = 5;
  expect_frames(call(load_video(o), Item(file("clip.mp4"))).take_as<Buffer>(),
                13, 5);
  // "All frames" is nullopt; a limit <= 0 is refused.
  o.max_frames = 0;
  EXPECT_THROW(call(load_video(o), Item(file("clip.mp4"))), InvalidArgument);
}

TEST_F(AvOpsTest, LoadVideoNamesBadInput) {
  EncodedFile junk = encoded("junk.mp4", std::vector<uint8_t>(500, 3));
  EXPECT_THROW(call(load_video({}), Item(std::move(junk))), DecodeError);
  EXPECT_NE(error_of([&] {
              call(load_video({}),
                   Item(encoded("junk.mp4", std::vector<uint8_t>(500, 3))));
            }).find("junk.mp4"),
            std::string::npos);
}

TEST_F(AvOpsTest, LoadVideoClipsLoadsEachRequestsWindow) {
  OpPtr op = load_video_clips({});
  const std::string path = *dir_ / "clip.mp4";
  expect_frames(call(op, Item(ClipRequest::from_path(
                             path, Window{Rational{1, 1}, Rational{7, 5}})))
                    .take_as<Buffer>(),
                25, 10);
  expect_frames(
      call(op, Item(ClipRequest::from_bytes(file("clip.mp4"), std::nullopt)))
          .take_as<Buffer>(),
      0, 50);
  // Open-ended window: from 1.6 s to the end.
  expect_frames(call(op, Item(ClipRequest::from_path(
                             path, Window{Rational{8, 5}, std::nullopt})))
                    .take_as<Buffer>(),
                40, 10);

  const std::string missing = *dir_ / "missing.mp4";
  EXPECT_THROW(call(op, Item(ClipRequest::from_path(missing, std::nullopt))),
               IoError);
  EXPECT_NE(error_of([&] {
              call(op, Item(ClipRequest::from_path(missing, std::nullopt)));
            }).find(missing),
            std::string::npos);
  // A window past the end of the clip names the clip.
  EXPECT_NE(error_of([&] {
              call(op, Item(ClipRequest::from_path(
                           path, Window{Rational{5, 1}, Rational{6, 1}})));
            }).find("clip.mp4"),
            std::string::npos);
}

TEST_F(AvOpsTest, DemuxDecodeConvertChainEqualsTheCli) {
  PacketsItem packets =
      call(demux(Media::kVideo, Window{Rational{0, 1}, Rational{2, 5}}),
           Item(file("clip.mp4")))
          .take_as<PacketsItem>();
  EXPECT_EQ(packets->media(), Media::kVideo);
  EXPECT_EQ(packets->src(), "clip.mp4");
  FramesItem frames =
      call(decode_packets(), Item(std::move(packets))).take_as<FramesItem>();
  EXPECT_EQ(frames->num_frames(), 10);
  expect_frames(
      call(convert_frames(), Item(std::move(frames))).take_as<Buffer>(), 0, 10);

  // At most num_frames frames.
  DecodeOptions three;
  three.num_frames = 3;
  packets = call(demux(Media::kVideo, std::nullopt), Item(file("clip.mp4")))
                .take_as<PacketsItem>();
  frames = call(decode_packets(three), Item(std::move(packets)))
               .take_as<FramesItem>();
  EXPECT_EQ(frames->num_frames(), 3);
  three.num_frames = 0;
  EXPECT_THROW(decode_packets(three), InvalidArgument);

  // Images: the first frame, without N.
  PacketsItem image =
      call(demux(Media::kImage, std::nullopt), Item(file("clip.mp4")))
          .take_as<PacketsItem>();
  Buffer one =
      call(convert_frames(), call(decode_packets(), Item(std::move(image))))
          .take_as<Buffer>();
  EXPECT_EQ(one.shape(), (std::vector<int64_t>{48, 64, 3}));
}

TEST_F(AvOpsTest, DemuxNamesBadInput) {
  OpPtr op = demux(Media::kAudio, std::nullopt);
  EXPECT_THROW(call(op, Item(file("clip.mp4"))), DecodeError);  // no audio
  EXPECT_NE(
      error_of([&] { call(op, Item(file("clip.mp4"))); }).find("clip.mp4"),
      std::string::npos);
}

TEST_F(AvOpsTest, AudioThroughLoadAudioAndTheChain) {
  media::AudioOptions o;
  o.sample_rate = 4000;
  Buffer a = call(load_audio(o), Item(file("tone.wav"))).take_as<Buffer>();
  ASSERT_EQ(a.dtype(), DType::kFloat32);
  ASSERT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.shape()[0], 1);
  EXPECT_NEAR(static_cast<double>(a.shape()[1]), 4000, 100);

  PacketsItem packets =
      call(demux(Media::kAudio, std::nullopt), Item(file("tone.wav")))
          .take_as<PacketsItem>();
  EXPECT_EQ(default_filter_desc(*packets), "aformat=sample_fmts=fltp");
  Buffer b =
      call(convert_frames(), call(decode_packets(), Item(std::move(packets))))
          .take_as<Buffer>();
  EXPECT_EQ(b.dtype(), DType::kFloat32);
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{1, 8000}));

  EXPECT_THROW(call(load_audio({}), Item(encoded("x.wav", {1, 2, 3}))),
               DecodeError);
}

TEST_F(AvOpsTest, LoadVideoClipsFailsAClipPastTheEndInsteadOfShortening) {
  OpPtr op = load_video_clips({});
  const std::string path = *dir_ / "clip.mp4";
  const Window past{Rational{3, 2}, Rational{5, 2}};
  EXPECT_THROW(call(op, Item(ClipRequest::from_path(path, past))), DecodeError);
  const std::string e = error_of(
      [&] { call(op, Item(ClipRequest::from_bytes(file("clip.mp4"), past))); });
  EXPECT_NE(
      e.find("clip.mp4: the window [1.500000, 2.500000) s extends past the end "
             "of the stream at 2.000000 s"),
      std::string::npos)
      << e;
  // A window that ends where the video ends is whole.
  expect_frames(call(op, Item(ClipRequest::from_path(
                             path, Window{Rational{1, 1}, Rational{2, 1}})))
                    .take_as<Buffer>(),
                25, 25);
}

TEST_F(AvOpsTest, ClipPipeline) {
  const std::string path = *dir_ / "clip.mp4";
  std::vector<ClipRequest> clips;
  for (int i = 0; i < 4; ++i)
    clips.push_back(ClipRequest::from_path(
        path, Window{Rational{i, 2}, Rational{i + 1, 2}}));
  auto pipeline = PipelineBuilder()
                      .add_source(clips)
                      .pipe<Buffer>(load_video_clips({}), {.concurrency = 2})
                      .add_sink()
                      .build(2);
  int n = 0;
  int64_t frames = 0;
  for (Buffer& clip : pipeline) {
    ++n;
    frames += clip.shape()[0];
  }
  EXPECT_EQ(n, 4);
  EXPECT_EQ(frames, 50);
}

}  // namespace
}  // namespace feedline::ops
