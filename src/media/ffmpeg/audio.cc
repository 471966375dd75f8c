// SPDX-License-Identifier: Apache-2.0

#include "feedline/media/audio.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "media/ffmpeg/ffmpeg.h"

namespace feedline::media {

namespace {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace): one
                                // file's FFmpeg glue

// Appends converted planar float samples to one vector per channel.
class Collector {
 public:
  explicit Collector(int channels)
      : planes_(static_cast<std::size_t>(channels)) {}
  void append(uint8_t** data, int samples) {
    for (std::size_t c = 0; c < planes_.size(); ++c) {
      const auto* p = reinterpret_cast<const float*>(data[c]);
      planes_[c].insert(planes_[c].end(), p, p + samples);
    }
  }
  std::size_t samples() const {
    return planes_.empty() ? 0 : planes_[0].size();
  }
  const std::vector<float>& plane(std::size_t c) const { return planes_[c]; }

 private:
  std::vector<std::vector<float>> planes_;
};

// Resamples decoded frames to planar float at the output layout and rate.
// The resampler is set up from the first frame and again whenever a frame's
// format, rate or channel layout differs from the one before (MP3 and ADTS
// streams may switch mid-stream; a resampler fed a frame of another layout
// would read planes the frame does not have).
class Converter {
 public:
  Converter(const AVChannelLayout& out_layout, int out_rate,
            std::string_view name)
      : out_rate_(out_rate), channels_(out_layout.nb_channels), name_(name) {
    if (av_channel_layout_copy(&out_layout_, &out_layout) < 0)
      throw std::bad_alloc();
  }
  ~Converter() {
    av_channel_layout_uninit(&in_layout_);
    av_channel_layout_uninit(&out_layout_);
  }
  Converter(const Converter&) = delete;
  Converter& operator=(const Converter&) = delete;

  // Converts `frame` (null: flush what the resampler holds) into `out`.
  void convert(const AVFrame* frame, Collector* out) {
    if (frame != nullptr && !same_input(frame)) {
      if (swr_) convert(nullptr, out);  // the old input's last samples
      set_up(frame);
    }
    if (!swr_) return;  // a flush before any frame
    if (frame != nullptr) in_samples_ += frame->nb_samples;
    run(frame, out, -1);
    if (frame == nullptr) pad_short_input(out);
  }

 private:
  // Passes `frame` (null: the drain) through the resampler into `out`,
  // keeping the output of this input at most `limit` samples (-1: any).
  void run(const AVFrame* frame, Collector* out, int64_t limit) {
    const int in_samples = frame != nullptr ? frame->nb_samples : 0;
    const int capacity = swr_get_out_samples(swr_.get(), in_samples);
    if (capacity <= 0) return;
    std::vector<std::vector<float>> tmp(
        static_cast<std::size_t>(channels_),
        std::vector<float>(static_cast<std::size_t>(capacity)));
    std::vector<uint8_t*> planes;
    planes.reserve(tmp.size());
    for (auto& t : tmp) planes.push_back(reinterpret_cast<uint8_t*>(t.data()));
    int n = swr_convert(swr_.get(), planes.data(), capacity,
                        frame != nullptr
                            ? const_cast<const uint8_t**>(frame->extended_data)
                            : nullptr,
                        in_samples);
    if (n < 0) fail(name_, "sample conversion failed", n);
    if (limit >= 0)
      n = static_cast<int>(std::min<int64_t>(n, limit - out_samples_));
    if (n <= 0) return;
    out->append(planes.data(), n);
    out_samples_ += n;
  }

  // After the drain: an input that stayed inside the resampler's filter
  // (its output more than one sample short of in * out_rate / in_rate;
  // 31 samples at 8 kHz gave 19 of 23 at 6 kHz) is pushed out with
  // silence, up to that length. An output within one sample of it is left
  // as the resampler made it, as the ffmpeg CLI's is.
  void pad_short_input(Collector* out) {
    const int64_t want =
        av_rescale_rnd(in_samples_, out_rate_, in_rate_, AV_ROUND_NEAR_INF);
    if (out_samples_ + 1 >= want) return;
    for (int i = 0; i < 4 && out_samples_ < want; ++i) {
      FramePtr silence = resampler_padding(swr_.get(), in_format_, in_rate_,
                                           in_layout_.nb_channels, out_rate_,
                                           want - out_samples_);
      run(silence.get(), out, want);
    }
  }

  bool same_input(const AVFrame* frame) const {
    if (!swr_ || frame->format != in_format_ ||
        frame->sample_rate != in_rate_) {
      return false;
    }
    AVChannelLayout layout = known_layout(frame->ch_layout);
    const bool same = av_channel_layout_compare(&layout, &in_layout_) == 0;
    av_channel_layout_uninit(&layout);
    return same;
  }

  void set_up(const AVFrame* frame) {
    if (frame->ch_layout.nb_channels <= 0 || frame->sample_rate <= 0 ||
        frame->format < 0) {
      throw DecodeError(std::string(name_) +
                        ": a decoded audio frame has no channels, sample "
                        "rate or sample format");
    }
    check_audio_rate(frame->sample_rate, name_);
    swr_.reset();
    av_channel_layout_uninit(&in_layout_);
    in_layout_ = known_layout(frame->ch_layout);
    in_format_ = frame->format;
    in_rate_ = frame->sample_rate;
    in_samples_ = 0;
    out_samples_ = 0;
    SwrContext* swr = nullptr;
    int rc = swr_alloc_set_opts2(
        &swr, layout_arg(&out_layout_), AV_SAMPLE_FMT_FLTP, out_rate_,
        layout_arg(&in_layout_), static_cast<AVSampleFormat>(in_format_),
        in_rate_, 0, nullptr);
    if (rc < 0) fail(name_, "cannot set up sample conversion", rc);
    swr_.reset(swr);
    rc = swr_init(swr);
    if (rc < 0) fail(name_, "cannot set up sample conversion", rc);
  }

  SwrPtr swr_;
  AVChannelLayout out_layout_{};
  const int out_rate_;
  const int channels_;
  std::string_view name_;
  AVChannelLayout in_layout_{};
  int in_format_ = -1;
  int in_rate_ = 0;
  int64_t in_samples_ = 0;   // passed to the resampler since set_up
  int64_t out_samples_ = 0;  // that it gave back
};

}  // namespace

void set_ffmpeg_log_level(int level) {
  quiet_logging();  // so that the first decode does not undo this
  av_log_set_level(level);
}

std::string ffmpeg_versions() {
  auto v = [](const char* lib, unsigned version) {
    return std::string(lib) + " " + std::to_string(AV_VERSION_MAJOR(version)) +
           "." + std::to_string(AV_VERSION_MINOR(version)) + "." +
           std::to_string(AV_VERSION_MICRO(version));
  };
  return v("libavformat", avformat_version()) + ", " +
         v("libavcodec", avcodec_version()) + ", " +
         v("libavutil", avutil_version()) + ", " +
         v("libavfilter", avfilter_version()) + ", " +
         v("libswscale", swscale_version()) + ", " +
         v("libswresample", swresample_version());
}

Buffer load_audio(std::span<const uint8_t> data, const AudioOptions& options,
                  std::string_view name, AudioInfo* info) {
  if (options.sample_rate < 0 || options.channels < 0 ||
      options.channels > 64) {
    throw InvalidArgument("sample_rate must be >= 0 and channels in [0, 64]");
  }
  if (!(options.start >= 0) ||
      (options.duration && !(*options.duration >= 0))) {
    throw InvalidArgument("start and duration must be >= 0");
  }
  if (data.empty())
    throw DecodeError(std::string(name) + ": empty input, not media");
  Input input(media::Source{"", data, nullptr}, media::DemuxConfig{}, name);
  AVFormatContext* fmt = input.format();
  const AVCodec* codec = nullptr;
  const int stream =
      av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (stream == AVERROR_DECODER_NOT_FOUND)
    fail(name, "no decoder for the audio codec", stream);
  if (stream < 0) fail(name, "no audio stream", stream);
  CodecPtr ctx(avcodec_alloc_context3(codec));
  if (!ctx) throw std::bad_alloc();
  int rc =
      avcodec_parameters_to_context(ctx.get(), fmt->streams[stream]->codecpar);
  if (rc < 0) fail(name, "bad codec parameters", rc);
  ctx->pkt_timebase = fmt->streams[stream]->time_base;
  rc = avcodec_open2(ctx.get(), codec, nullptr);
  if (rc < 0)
    fail(name, std::string("cannot open the ") + codec->name + " decoder", rc);
  if (ctx->ch_layout.nb_channels <= 0 || ctx->sample_rate <= 0) {
    throw DecodeError(std::string(name) +
                      ": the audio stream has no channels or sample rate");
  }
  {
    AVChannelLayout known = known_layout(ctx->ch_layout);
    av_channel_layout_uninit(&ctx->ch_layout);
    ctx->ch_layout = known;
  }

  AVChannelLayout out_layout{};
  if (options.channels > 0) {
    av_channel_layout_default(&out_layout, options.channels);
  } else {
    rc = av_channel_layout_copy(&out_layout, &ctx->ch_layout);
    if (rc < 0) fail(name, "bad channel layout", rc);
  }
  struct LayoutGuard {
    AVChannelLayout* l;
    ~LayoutGuard() { av_channel_layout_uninit(l); }
  } layout_guard{&out_layout};
  const int out_rate =
      options.sample_rate > 0 ? options.sample_rate : ctx->sample_rate;
  Converter converter(out_layout, out_rate, name);
  Collector collected(out_layout.nb_channels);

  PacketPtr packet(av_packet_alloc());
  FramePtr frame(av_frame_alloc());
  if (!packet || !frame) throw std::bad_alloc();
  // A packet or frame that fails to decode costs its samples, not the
  // file, as in decode_packets() and the ffmpeg CLI.
  DecodeErrors errors;
  auto drain = [&]() {
    for (;;) {
      errors.before_call();
      int r = avcodec_receive_frame(ctx.get(), frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      if (r < 0) {
        errors.note("a frame failed to decode", r);
        return;
      }
      converter.convert(frame.get(), &collected);
      av_frame_unref(frame.get());
    }
  };
  for (;;) {
    rc = av_read_frame(fmt, packet.get());
    if (rc == AVERROR_EOF) break;
    if (rc < 0) fail(name, "reading packets failed", rc);
    if (packet->stream_index == stream) {
      // EAGAIN: the decoder holds frames; take them, then send it again.
      errors.before_call();
      while ((rc = avcodec_send_packet(ctx.get(), packet.get())) ==
             AVERROR(EAGAIN)) {
        drain();
        errors.before_call();
      }
      av_packet_unref(packet.get());
      if (rc < 0) errors.note("a packet failed to decode", rc);
      drain();
    } else {
      av_packet_unref(packet.get());
    }
  }
  errors.before_call();
  rc = avcodec_send_packet(ctx.get(), nullptr);
  if (rc < 0 && rc != AVERROR_EOF)
    errors.note("flushing the decoder failed", rc);
  drain();
  converter.convert(nullptr, &collected);
  errors.report(std::string(name), collected.samples() > 0);

  const auto total = static_cast<int64_t>(collected.samples());
  // Clamped as doubles: a start or duration may be past any count of
  // samples, or infinite ("to the end"), which no int64_t holds.
  auto samples_in = [&](double seconds) {
    const double n = std::floor(seconds * out_rate);
    return n >= static_cast<double>(total) ? total : static_cast<int64_t>(n);
  };
  const int64_t first = samples_in(options.start);
  int64_t count = total - first;
  if (options.duration) count = std::min(count, samples_in(*options.duration));
  const int channels = out_layout.nb_channels;
  Buffer out = Buffer::allocate(DType::kFloat32, {channels, count});
  for (int c = 0; c < channels && count > 0; ++c) {
    std::memcpy(out.data_as<float>() + static_cast<int64_t>(c) * count,
                collected.plane(static_cast<std::size_t>(c)).data() + first,
                static_cast<std::size_t>(count) * sizeof(float));
  }
  if (info != nullptr) {
    info->sample_rate = out_rate;
    info->channels = channels;
    info->codec = codec->name;
  }
  return out;
}

}  // namespace feedline::media
