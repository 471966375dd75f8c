// SPDX-License-Identifier: Apache-2.0
//
// Pipeline ops for audio and video through FFmpeg (media/av.h, audio.h).
//
// As in io_ops.h, each factory returns an op that declares its input and
// output types; the ops are stateless and take no lock. Packets and Frames
// travel between stages as owned objects (PacketsItem, FramesItem).

#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "feedline/media/audio.h"
#include "feedline/media/av.h"
#include "feedline/media/encode.h"
#include "feedline/ops/items.h"
#include "feedline/pipeline/op.h"

namespace feedline::ops {

// EncodedFile -> float32 Buffer (channels, samples), as media::load_audio().
OpPtr load_audio(const media::AudioOptions& options);

// EncodedFile -> uint8 Buffer (N, H, W, C) of the window in `options`, as
// media::load_video().
OpPtr load_video(const media::VideoOptions& options);

// ClipRequest -> uint8 Buffer (N, H, W, C) of the request's window (the
// window of `options` is ignored). A path is memory-mapped, not read. A
// window whose end lies past the end of the video fails with DecodeError
// naming the source and the window (the stage counts it as a failed item)
// instead of giving a short clip that a later stack() could not batch.
OpPtr load_video_clips(const media::VideoOptions& options);

// EncodedFile -> PacketsItem of the best stream of `media` (in `window` when
// given; images take no window).
OpPtr demux(media::Media media, std::optional<media::Window> window,
            const media::DemuxConfig& config = {});

// How decode_packets() filters the frames.
struct DecodeOptions {
  // True: the standard chain for the packets' media (default_filter_desc());
  // false: `filter_desc` (nullopt keeps the decoder's own format).
  bool default_filter = true;
  std::optional<std::string> filter_desc;
  media::DecodeConfig config;
  // Stop after this many frames (> 0); nullopt: all of them.
  std::optional<int64_t> num_frames;
};

// PacketsItem -> FramesItem, as media::decode_packets().
// Throws: InvalidArgument for num_frames <= 0.
OpPtr decode_packets(const DecodeOptions& options = {});

// FramesItem -> Buffer, as media::convert_frames().
OpPtr convert_frames();

// Buffer (one image, as media::encode_image takes it) -> EncodedFile: the
// image as a PNG, JPEG, WebP, TIFF or BMP file in memory.
OpPtr encode_image(const media::ImageEncodeOptions& options);

// How encode_video() writes each clip.
struct VideoEncodeOptions {
  std::string format = "mp4";  // the muxer
  std::string encoder;         // "": the muxer's default
  // width/height 0: the frames'; no frame rate: the frames'.
  media::VideoEncodeConfig config;
  std::map<std::string, std::string> encoder_options;
  std::map<std::string, std::string> muxer_options;
};
// FramesItem (a clip) -> EncodedFile: the clip as a complete file in
// memory, as media::encode_video(). With demux() and decode_packets()
// before it, a transcoding pipeline that never takes the GIL.
OpPtr encode_video(const VideoEncodeOptions& options);

// How encode_audio() writes each clip.
struct AudioEncodeOptions {
  std::string format = "wav";  // the muxer
  std::string encoder;         // "": the muxer's default
  // num_channels/sample_rate 0: the frames'.
  media::AudioEncodeConfig config;
  std::map<std::string, std::string> encoder_options;
  std::map<std::string, std::string> muxer_options;
};
// FramesItem (audio) -> EncodedFile: the audio as a complete file in
// memory, as media::encode_audio() (converted to the encoder's sample
// format, rate and channels).
OpPtr encode_audio(const AudioEncodeOptions& options);

// The standard filter chain for `packets`: audio trimmed to the packets'
// window as float planar; video and images as rgb24.
std::string default_filter_desc(const media::Packets& packets);

}  // namespace feedline::ops
