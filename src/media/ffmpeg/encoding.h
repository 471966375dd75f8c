// SPDX-License-Identifier: Apache-2.0
//
// Internal to src/media/ffmpeg: what the encoding files share. encode.cc
// holds the Encoder and the checks of encoder configurations, mux.cc the
// Muxer, encode_video and encode_audio, encode_arrays.cc frames from arrays
// and encode_image.

#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "feedline/media/encode.h"
#include "media/ffmpeg/ffmpeg.h"

extern "C" {
#include <libavutil/audio_fifo.h>
}

namespace feedline::media {

// An encoder's context and the state of the stream it encodes: frames are
// converted to the encoder's format (video: libswscale; audio:
// libswresample, then regrouped into its frame size) and numbered.
class Encoder::Impl {
 public:
  Impl(Media media, ffmpeg::CodecPtr ctx, std::string label, int stream_index,
       Rational frame_rate);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Media media() const;
  AVCodecContext* context() const;
  Codec codec() const;
  // See Encoder::encode and Encoder::flush.
  std::unique_ptr<Packets> encode(Frames&& frames);
  // Video frames keep their own times (VideoEncodeConfig::time_base).
  void keep_frame_times() { keep_times_ = true; }
  std::unique_ptr<Packets> flush();

 private:
  // Audio encoders that take frames of exactly frame_size samples.
  bool fixed_frame_size() const;
  std::unique_ptr<Packets> new_packets() const;
  // Whether `f` goes to the encoder unconverted: its format, range and
  // (where both are known) matrix are the stream's.
  bool takes_as_is(const AVFrame* f) const;
  // Makes sws_ convert frames like `f` to the encoder's format, matrix and
  // range. Throws InvalidArgument where swscale cannot.
  void open_scaler(const AVFrame* f);
  // The frame as the encoder takes it: its own size, format and colours;
  // its time in the encoder's time base (numbered, or from `f`'s own in
  // `tb` where keep_times_).
  ffmpeg::FramePtr video_frame(const AVFrame* f, AVRational tb);
  // An empty audio frame of `samples` in the encoder's format.
  ffmpeg::FramePtr audio_frame(int samples) const;
  static std::string audio_params(int format, int rate, int channels);
  // Audio in any sample format, rate and channel count: the first frame
  // fixes them for the stream; where they differ from the encoder's, every
  // frame goes through one resampler (which may hold samples back until
  // flush()).
  void add_audio(const AVFrame* f, Packets& out);
  void open_resampler(const AVFrame* f);
  // Converts `f` (null: what the resampler still holds) for the encoder,
  // keeping the stream's output to `limit` samples (-1: no limit).
  void resample(const AVFrame* f, Packets& out, int64_t limit = -1);
  // At the end of the stream: every sample the input makes at the
  // encoder's rate, none more.
  void drain_resampler(Packets& out);
  // `f` has the encoder's sample format, rate and channel count: regrouped
  // into frames of frame_size where the encoder needs that.
  void add_encoder_audio(const AVFrame* f, Packets& out);
  // Throws InvalidArgument if the encoder would drop bits of `f`'s 32-bit
  // integer samples that are not zero.
  void check_kept_bits(const AVFrame* f) const;
  // Numbers `f` (audio), sends it and collects the packets ready.
  void send(ffmpeg::FramePtr f, Packets& out);
  void receive(Packets& out);

  Media media_;
  ffmpeg::CodecPtr ctx_;
  std::string label_;
  int stream_index_;
  Rational frame_rate_;
  ffmpeg::SwsPtr sws_;
  // The frames sws_ was last set up for: {width, height, format, colour
  // space, range}; its colour details are set again when they change.
  std::array<int, 5> sws_input_{};
  ffmpeg::SwrPtr swr_;
  // The stream's input audio parameters, from its first frame (-1: none yet).
  int in_format_ = -1;
  int in_rate_ = 0;
  int in_channels_ = 0;
  // Samples into and out of the resampler (the latter at the encoder's rate).
  int64_t resampled_in_ = 0;
  int64_t resampled_out_ = 0;
  AVAudioFifo* fifo_ = nullptr;
  int64_t next_pts_ = 0;
  bool keep_times_ = false;
  int64_t first_pts_ = AV_NOPTS_VALUE;  // keep_times_: the first frame's
  bool flushed_ = false;
  mutable std::atomic<std::thread::id> busy_{};
};

namespace ffmpeg {

// Pixel and sample formats by name; InvalidArgument for unknown names.
AVPixelFormat pixel_format(const std::string& name);
AVSampleFormat sample_format(const std::string& name);

// The encoder named `name`, else the default one for `id`; InvalidArgument
// (naming `where`) when there is none or it is not of `type`.
const AVCodec* find_encoder(const std::string& name, AVCodecID id,
                            AVMediaType type, std::string_view where);

// Opens `ctx` with `options` (one thread per core unless "threads" is
// given); InvalidArgument when FFmpeg refuses or an option is not taken.
void open_context(AVCodecContext* ctx, const AVCodec* codec,
                  const std::map<std::string, std::string>& options,
                  const std::string& label);

// Encoder contexts for a configuration, checked against what `codec` takes.
// `preferred`: the pixel format when the configuration names none.
CodecPtr video_context(const VideoEncodeConfig& c, const AVCodec* codec,
                       bool global_header, const std::string& label,
                       AVPixelFormat preferred);
CodecPtr audio_context(const AudioEncodeConfig& c, const AVCodec* codec,
                       bool global_header, const std::string& label);

}  // namespace ffmpeg
}  // namespace feedline::media
