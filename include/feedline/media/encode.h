// SPDX-License-Identifier: Apache-2.0
//
// Writing media through FFmpeg: frames from arrays, encoders, a muxer, and
// images encoded in one call.
//
//   auto frames = video_frames_from(array, "rgb24", {30, 1});
//   Muxer muxer("out.mp4");
//   Encoder& enc = muxer.add_encode_stream(VideoEncodeConfig{...}, "libx264",
//                                          {{"crf", "18"}});
//   muxer.open();
//   muxer.write(0, *enc.encode(std::move(*frames)));
//   muxer.write(0, *enc.flush());
//   muxer.close();
//
// Configurations are checked against what the chosen encoder supports
// (pixel and sample formats, frame and sample rates, channel layouts):
// anything else is InvalidArgument naming the encoder and what it takes.
// An encoder converts video frames of another pixel format (same size)
// with libswscale, and audio frames of another sample format, rate or
// channel count with libswresample (the first frame fixes the stream's
// input parameters); audio is regrouped into the encoder's frame size.
//
// Errors: InvalidArgument for bad configurations, unknown encoders, muxers
// or options, frames of the wrong size or format, and calls out of order
// (write before open, anything after close); IoError when the output cannot
// be opened or written; DecodeError when FFmpeg's encoder fails.

#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "feedline/base/buffer.h"
#include "feedline/media/av.h"

struct AVCodec;
struct AVCodecContext;

namespace feedline::media {

struct VideoEncodeConfig {
  int width = 0;
  int height = 0;
  // nullopt: the encoder's first supported rate (an error if it has none).
  std::optional<Rational> frame_rate;
  std::string pix_fmt;    // "": the encoder's first supported format
  int64_t bit_rate = -1;  // each of these: -1 leaves the encoder's default
  int compression_level = -1;
  int qscale = -1;  // >= 0: constant quality (FFmpeg's -q:v)
  int gop_size = -1;
  int max_b_frames = -1;
  std::string colorspace;  // "bt709", ...; "": unset
  std::string color_primaries;
  std::string color_trc;
  // "tv" (limited) or "pc" (full); "": full for yuvj* formats, else unset.
  std::string color_range;
  // The shape of a pixel (width/height) the stream is tagged with;
  // nullopt: square (1/1).
  std::optional<Rational> sample_aspect_ratio;
  // Set: the stream's time base, and each frame keeps its own time (counted
  // from the stream's first frame), so unevenly spaced frames stay so;
  // frame_rate is then their average rate (for rate control and the
  // header). Unset: frames are numbered 0, 1, 2, ... at frame_rate.
  // Encoders that take only fixed rates (MPEG-1/2) refuse it.
  std::optional<Rational> time_base;
};

struct AudioEncodeConfig {
  int num_channels = 0;
  int sample_rate = 0;     // 0: the encoder's first supported rate
  std::string sample_fmt;  // "": the encoder's first supported format
  int64_t bit_rate = -1;
  int compression_level = -1;
  int qscale = -1;
};

// Frames made from a C-contiguous array (copied), `pts` for the first and
// one more per frame, in time base 1/frame_rate:
//   rgb24, bgr24 (N, H, W, 3); rgba, bgra, argb, abgr (N, H, W, 4);
//   gray8 / gray (N, H, W) uint8; gray16le, gray16be, gray16 (native order)
//   (N, H, W) uint16; yuv444p, gbrp (N, 3, H, W) uint8; yuv420p
//   (N, 1, H*3/2, W) uint8 (Y, then U and V: convert_frames' layout).
// Throws InvalidArgument naming the expected shape and dtype.
std::unique_ptr<Frames> video_frames_from(const Buffer& array,
                                          const std::string& pix_fmt,
                                          Rational frame_rate, int64_t pts = 0);
// Audio frames (one) from (C, N) for planar sample formats (fltp, s16p,
// s32p, dblp, u8p, s64p) or (N, C) for packed ones (flt, s16, s32, dbl, u8,
// s64), with the format's dtype; time base 1/sample_rate.
std::unique_ptr<Frames> audio_frames_from(const Buffer& array,
                                          const std::string& sample_fmt,
                                          int sample_rate, int64_t pts = 0);

// One image (H, W, C) or (H, W) as a complete file in `format`: "png",
// "jpeg" (or "jpg"), "webp", "tiff", "bmp". The pixels are `pix_fmt` as in
// video_frames_from; they are converted to what the encoder takes when it
// does not take them (JPEG: yuvj444p). `quality` (-1: the encoder's
// default): JPEG 2 (best) to 31 (qscale), WebP 0 to 100; `lossless` for
// WebP. Returns the file's bytes.
struct ImageEncodeOptions {
  std::string format = "png";
  std::string pix_fmt = "rgb24";
  int quality = -1;
  bool lossless = false;
  int compression_level = -1;  // PNG 0-9, WebP 0-6
};

class Encoder {
 public:
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  Media media() const;
  // The encoder's name ("libx264") and the parameters of what it writes.
  std::string name() const;
  Codec codec() const;
  // Audio: the samples each frame must hold (0: any); frames of other sizes
  // are regrouped. Video: 0.
  int frame_size() const;
  // Encodes `frames` (consumed). Video frames are numbered on from the last
  // one sent, whatever their own times (with a config's time_base: they
  // keep their times, which must increase). Returns the packets ready so
  // far (possibly none), in the encoder's time base.
  std::unique_ptr<Packets> encode(Frames&& frames);
  // Drains the encoder at the end of the stream (audio: the last, shorter
  // frame first). Encoding after a flush is an error.
  std::unique_ptr<Packets> flush();

 private:
  friend class Muxer;
  friend Buffer encode_image(const Buffer& array,
                             const ImageEncodeOptions& options);
  class Impl;
  explicit Encoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// An output file: streams added with encoders (or copied packets), then
// open(), write() packets, close(). A Muxer destroyed without close()
// finishes the file as well as it can and always releases it.
class Muxer {
 public:
  // `format`: a muxer name ("mp4", "matroska", "wav", "image2", ...); ""
  // guesses from the path's extension. Throws InvalidArgument when neither
  // names a muxer.
  explicit Muxer(std::string dst, const std::string& format = "");
  // A Muxer that writes to memory (seekable, so MP4 and Matroska write
  // their indexes as to a file); take the bytes after close(). `name` is
  // what messages call it (its dst()).
  static std::unique_ptr<Muxer> in_memory(const std::string& format,
                                          std::string name = "<memory>");
  ~Muxer();
  Muxer(const Muxer&) = delete;
  Muxer& operator=(const Muxer&) = delete;

  const std::string& dst() const { return dst_; }
  std::string format() const;
  // Adds a stream and its encoder (owned by the Muxer): `encoder` by name
  // ("" : by the image2 muxer, the file extension's encoder; else the
  // format's default), `options` its private options ("crf", "preset").
  // Before open() only.
  Encoder& add_encode_stream(
      const VideoEncodeConfig& config, const std::string& encoder = "",
      const std::map<std::string, std::string>& options = {});
  Encoder& add_encode_stream(
      const AudioEncodeConfig& config, const std::string& encoder = "",
      const std::map<std::string, std::string>& options = {});
  // Adds a stream for packets that are written as they are (no encoding).
  int add_remux_stream(const Codec& codec);
  int num_streams() const;
  // Opens the file and writes the header; `options` are the muxer's
  // ("movflags": "+faststart"); any not taken is InvalidArgument.
  void open(const std::map<std::string, std::string>& options = {});
  // Writes `packets` (not consumed) to stream `index`, rescaled to its time
  // base.
  void write(int index, const Packets& packets);
  // Writes what the interleaving queue holds.
  void flush();
  // Writes the trailer and closes the file. Further calls are errors.
  void close();
  bool is_open() const;
  bool closed() const;
  // An in-memory Muxer's file, after close(). Throws InvalidArgument for a
  // Muxer of a path, or before close().
  Buffer take_bytes();

 private:
  // Adds a stream of `media` whose encoder context `context` makes (owned
  // by the caller once returned) for the encoder chosen.
  Encoder& add_stream(Media media, const std::string& encoder,
                      const std::map<std::string, std::string>& options,
                      const std::function<AVCodecContext*(
                          const AVCodec* codec, bool global_header,
                          const std::string& label)>& context);
  struct State;
  std::string dst_;
  std::unique_ptr<State> state_;
};

// Frames (consumed) as a complete file in memory: one stream of `config`
// (a width or height of 0 takes the frames'; unset colour tags and sample
// aspect ratio, the first frame's), encoded by `encoder` ("" : the format's
// default) with `options`, muxed by `format` ("mp4", "matroska", ...) with
// `muxer_options`. Without a frame rate, the frames' times are kept:
// evenly spaced frames (to a tick of their time base) are numbered at
// their average rate, others keep their own times in their time base
// (config.time_base) where the encoder takes any rate.
Buffer encode_video(
    Frames&& frames, const std::string& format, VideoEncodeConfig config,
    const std::string& encoder = "",
    const std::map<std::string, std::string>& options = {},
    const std::map<std::string, std::string>& muxer_options = {});

// Audio frames (consumed) as a complete file in memory: one stream of
// `config` (0 channels or rate: the frames'; no sample_fmt: the encoder's
// first), encoded by `encoder` ("" : the format's default) with `options`,
// muxed by `format` ("wav", "flac", "ogg", "mp4", ...) with
// `muxer_options`. The frames are converted to the encoder's sample format,
// rate and channel count.
Buffer encode_audio(
    Frames&& frames, const std::string& format, AudioEncodeConfig config,
    const std::string& encoder = "",
    const std::map<std::string, std::string>& options = {},
    const std::map<std::string, std::string>& muxer_options = {});

// What encode_video() and encode_audio() would refuse before any frame
// (for an op, when it is made rather than at each clip): a `format` that
// names no muxer or one that cannot write to memory, an encoder unknown or
// of the wrong media (or none for the format), and settings of `config`
// the encoder does not take (pixel or sample format, rate, colour names,
// sample aspect ratio). The frames' size, rate and channels stand in where
// the config leaves them to the frames. Throws InvalidArgument.
void check_encode(const std::string& format, const VideoEncodeConfig& config,
                  const std::string& encoder);
void check_encode(const std::string& format, const AudioEncodeConfig& config,
                  const std::string& encoder);

// One image as a complete file (see ImageEncodeOptions). Throws
// InvalidArgument for a bad array, format or option.
Buffer encode_image(const Buffer& array, const ImageEncodeOptions& options);

}  // namespace feedline::media
