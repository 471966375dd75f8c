// SPDX-License-Identifier: Apache-2.0
//
// Frames from arrays, Encoder, Muxer and encode_image (feedline/media/
// encode.h).

#include "feedline/media/encode.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "media/ffmpeg/ffmpeg.h"

extern "C" {
#include <libavutil/audio_fifo.h>
#include <libavutil/samplefmt.h>
}

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

AVPixelFormat pixel_format(const std::string& name) {
  const std::string n = name == "gray8" ? "gray" : name;
  const AVPixelFormat f = av_get_pix_fmt(n.c_str());
  if (f == AV_PIX_FMT_NONE)
    throw InvalidArgument("unknown pixel format \"" + name + "\"");
  return f;
}

AVSampleFormat sample_format(const std::string& name) {
  const AVSampleFormat f = av_get_sample_fmt(name.c_str());
  if (f == AV_SAMPLE_FMT_NONE)
    throw InvalidArgument("unknown sample format \"" + name + "\"");
  return f;
}

// The layout of an array of frames in `format`; throws when the array does
// not have it.
struct ArrayLayout {
  int64_t frames = 0;
  int width = 0;
  int height = 0;
};

[[noreturn]] void bad_array(const std::string& pix_fmt, const Buffer& a,
                            const char* expected) {
  throw InvalidArgument("frames of pix_fmt \"" + pix_fmt + "\" are " +
                        expected + ", got " + dtype_name(a.dtype()) + " " +
                        shape_text(a.shape()));
}

ArrayLayout video_layout(const Buffer& a, AVPixelFormat f,
                         const std::string& name) {
  const auto& s = a.shape();
  ArrayLayout l;
  auto dims = [&](int64_t n, int64_t h, int64_t w) {
    if (n <= 0 || h <= 0 || w <= 0 || h > (1 << 16) || w > (1 << 16))
      bad_array(name, a, "non-empty, at most 65536 x 65536");
    l.frames = n;
    l.height = static_cast<int>(h);
    l.width = static_cast<int>(w);
  };
  switch (f) {
    case AV_PIX_FMT_RGB24:
    case AV_PIX_FMT_BGR24:
      if (a.dtype() != DType::kUint8 || s.size() != 4 || s[3] != 3)
        bad_array(name, a, "uint8 (N, H, W, 3)");
      dims(s[0], s[1], s[2]);
      break;
    case AV_PIX_FMT_RGBA:
    case AV_PIX_FMT_BGRA:
    case AV_PIX_FMT_ARGB:
    case AV_PIX_FMT_ABGR:
      if (a.dtype() != DType::kUint8 || s.size() != 4 || s[3] != 4)
        bad_array(name, a, "uint8 (N, H, W, 4)");
      dims(s[0], s[1], s[2]);
      break;
    case AV_PIX_FMT_GRAY8:
    case AV_PIX_FMT_GRAY16LE:
    case AV_PIX_FMT_GRAY16BE: {
      const DType want = f == AV_PIX_FMT_GRAY8 ? DType::kUint8 : DType::kUint16;
      const bool shape_ok = s.size() == 3 || (s.size() == 4 && s[3] == 1);
      if (a.dtype() != want || !shape_ok) {
        bad_array(
            name, a,
            f == AV_PIX_FMT_GRAY8 ? "uint8 (N, H, W)" : "uint16 (N, H, W)");
      }
      dims(s[0], s[1], s[2]);
      break;
    }
    case AV_PIX_FMT_YUV444P:
    case AV_PIX_FMT_GBRP:
      if (a.dtype() != DType::kUint8 || s.size() != 4 || s[1] != 3)
        bad_array(name, a, "uint8 (N, 3, H, W)");
      dims(s[0], s[2], s[3]);
      break;
    case AV_PIX_FMT_YUV420P:
      if (a.dtype() != DType::kUint8 || s.size() != 4 || s[1] != 1 ||
          s[2] % 3 != 0 || (s[2] / 3) % 2 != 0 || s[3] % 2 != 0) {
        bad_array(name, a, "uint8 (N, 1, H*3/2, W) with H and W even");
      }
      dims(s[0], s[2] / 3 * 2, s[3]);
      break;
    default:
      throw InvalidArgument(
          "frames from arrays take pix_fmt rgb24, bgr24, rgba, bgra, argb, "
          "abgr, gray8, gray16le, gray16be, yuv444p, gbrp or yuv420p, got \"" +
          name + "\"");
  }
  return l;
}

// Plane p of frame i of a C-contiguous array in `f` (see video_layout).
struct PlaneSource {
  const uint8_t* data;
  int linesize;
  int rows;
};

std::vector<PlaneSource> planes_of(const uint8_t* frame, AVPixelFormat f, int w,
                                   int h) {
  const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(f);
  const int bytes = d->comp[0].step * w;
  if (f == AV_PIX_FMT_YUV444P || f == AV_PIX_FMT_GBRP) {
    const std::size_t plane = static_cast<std::size_t>(w) * h;
    return {{frame, w, h}, {frame + plane, w, h}, {frame + 2 * plane, w, h}};
  }
  if (f == AV_PIX_FMT_YUV420P) {
    const std::size_t y = static_cast<std::size_t>(w) * h;
    const std::size_t c = y / 4;
    return {{frame, w, h},
            {frame + y, w / 2, h / 2},
            {frame + y + c, w / 2, h / 2}};
  }
  return {{frame, bytes, h}};
}

// Copies `src` frames into new AVFrames of `f`.
std::unique_ptr<Frames> frames_from_planes(const Buffer& a, AVPixelFormat f,
                                           const ArrayLayout& l, Rational rate,
                                           int64_t pts) {
  const std::size_t frame_bytes =
      a.nbytes() / static_cast<std::size_t>(l.frames);
  auto out = make_frames(Media::kVideo, Rational{rate.den, rate.num});
  for (int64_t i = 0; i < l.frames; ++i) {
    FramePtr fr = new_frame();
    fr->format = f;
    fr->width = l.width;
    fr->height = l.height;
    fr->pts = pts + i;
    fr->time_base = AVRational{rate.den, rate.num};
    if (av_frame_get_buffer(fr.get(), 0) < 0) throw std::bad_alloc();
    const uint8_t* base =
        a.data_as<const uint8_t>() + static_cast<std::size_t>(i) * frame_bytes;
    const auto planes = planes_of(base, f, l.width, l.height);
    for (std::size_t p = 0; p < planes.size(); ++p) {
      av_image_copy_plane(fr->data[p], fr->linesize[p], planes[p].data,
                          planes[p].linesize, planes[p].linesize,
                          planes[p].rows);
    }
    out->push(fr.release());
  }
  return out;
}

template <typename T>
std::string join(const std::vector<T>& values,
                 const std::function<std::string(const T&)>& text) {
  std::string s;
  for (const T& v : values) {
    if (!s.empty()) s += ", ";
    s += text(v);
  }
  return s;
}

std::string rate_text(AVRational r) {
  return std::to_string(r.num) + "/" + std::to_string(r.den);
}

const AVCodec* find_encoder(const std::string& name, AVCodecID id,
                            AVMediaType type, std::string_view where) {
  const AVCodec* c = nullptr;
  if (!name.empty()) {
    c = avcodec_find_encoder_by_name(name.c_str());
    if (c == nullptr)
      throw InvalidArgument(std::string(where) + ": no encoder named \"" +
                            name + "\" in this FFmpeg");
  } else {
    c = avcodec_find_encoder(id);
    if (c == nullptr) {
      throw InvalidArgument(std::string(where) + ": no encoder for " +
                            avcodec_get_name(id) + " in this FFmpeg");
    }
  }
  if (c->type != type) {
    throw InvalidArgument(
        std::string(where) + ": \"" + c->name + "\" is not " +
        (type == AVMEDIA_TYPE_VIDEO ? "a video" : "an audio") + " encoder");
  }
  return c;
}

void set_color(int* field, const std::string& name, const char* what,
               int (*parse)(const char*)) {
  if (name.empty()) return;
  const int v = parse(name.c_str());
  if (v < 0)
    throw InvalidArgument(std::string("unknown ") + what + " \"" + name + "\"");
  *field = v;
}

}  // namespace

// --- frames from arrays ---

std::unique_ptr<Frames> video_frames_from(const Buffer& array,
                                          const std::string& pix_fmt,
                                          Rational frame_rate, int64_t pts) {
  if (frame_rate.num <= 0 || frame_rate.den <= 0) {
    throw InvalidArgument("frame rate must be positive, got " +
                          std::to_string(frame_rate.num) + "/" +
                          std::to_string(frame_rate.den));
  }
  if (!array.contiguous())
    throw InvalidArgument("frames from arrays need a C-contiguous array");
  const AVPixelFormat f = pixel_format(pix_fmt);
  const ArrayLayout l = video_layout(array, f, pix_fmt);
  return frames_from_planes(array, f, l, frame_rate, pts);
}

std::unique_ptr<Frames> audio_frames_from(const Buffer& array,
                                          const std::string& sample_fmt,
                                          int sample_rate, int64_t pts) {
  const AVSampleFormat f = sample_format(sample_fmt);
  if (sample_rate <= 0) {
    throw InvalidArgument("sample rate must be positive, got " +
                          std::to_string(sample_rate));
  }
  if (!array.contiguous())
    throw InvalidArgument("frames from arrays need a C-contiguous array");
  const bool planar = av_sample_fmt_is_planar(f) != 0;
  const auto& s = array.shape();
  const DType want = sample_dtype(f);
  if (array.dtype() != want || s.size() != 2 || s[0] <= 0 || s[1] <= 0) {
    throw InvalidArgument(
        std::string("audio of sample_fmt \"") + sample_fmt + "\" is " +
        dtype_name(want) +
        (planar ? " (channels, samples)" : " (samples, channels)") + ", got " +
        dtype_name(array.dtype()) + " " + shape_text(s));
  }
  const int64_t channels = planar ? s[0] : s[1];
  const int64_t samples = planar ? s[1] : s[0];
  if (channels > 64 || samples > (1 << 30))
    throw InvalidArgument("audio of at most 64 channels and 2^30 samples");
  FramePtr fr = new_frame();
  fr->format = f;
  fr->sample_rate = sample_rate;
  fr->nb_samples = static_cast<int>(samples);
  av_channel_layout_default(&fr->ch_layout, static_cast<int>(channels));
  fr->pts = pts;
  fr->time_base = AVRational{1, sample_rate};
  if (av_frame_get_buffer(fr.get(), 0) < 0) throw std::bad_alloc();
  const std::size_t bytes = dtype_size(want);
  const auto* src = array.data_as<const uint8_t>();
  if (planar) {
    const std::size_t plane = static_cast<std::size_t>(samples) * bytes;
    for (int64_t c = 0; c < channels; ++c) {
      std::memcpy(fr->extended_data[c],
                  src + static_cast<std::size_t>(c) * plane, plane);
    }
  } else {
    std::memcpy(fr->data[0], src, array.nbytes());
  }
  auto out = make_frames(Media::kAudio, Rational{1, sample_rate});
  out->push(fr.release());
  return out;
}

// --- Encoder ---

class Encoder::Impl {
 public:
  Impl(Media media, CodecPtr ctx, std::string label, int stream_index,
       Rational frame_rate)
      : media_(media),
        ctx_(std::move(ctx)),
        label_(std::move(label)),
        stream_index_(stream_index),
        frame_rate_(frame_rate) {
    if (media_ == Media::kAudio && fixed_frame_size()) {
      fifo_ = av_audio_fifo_alloc(ctx_->sample_fmt, ctx_->ch_layout.nb_channels,
                                  ctx_->frame_size);
      if (fifo_ == nullptr) throw std::bad_alloc();
    }
  }
  ~Impl() {
    if (fifo_ != nullptr) av_audio_fifo_free(fifo_);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Media media() const { return media_; }
  AVCodecContext* context() const { return ctx_.get(); }
  bool fixed_frame_size() const {
    return ctx_->frame_size > 0 &&
           (ctx_->codec->capabilities & AV_CODEC_CAP_VARIABLE_FRAME_SIZE) == 0;
  }

  Codec codec() const {
    AVCodecParameters* p = avcodec_parameters_alloc();
    if (p == nullptr) throw std::bad_alloc();
    std::unique_ptr<AVCodecParameters, ParamsDeleter> owner(p);
    if (avcodec_parameters_from_context(p, ctx_.get()) < 0)
      throw std::bad_alloc();
    return Codec(media_, p, from_av(ctx_->time_base), frame_rate_);
  }

  std::unique_ptr<Packets> encode(Frames&& frames) {
    BusyGuard busy(busy_, "Encoder");
    if (flushed_)
      throw InvalidArgument(label_ +
                            ": the encoder was flushed (end of stream)");
    frames.check();
    const bool audio = frames.media() == Media::kAudio;
    if (audio != (media_ == Media::kAudio)) {
      throw InvalidArgument(label_ + ": " + media_name(media_) +
                            " encoder got " + media_name(frames.media()) +
                            " frames");
    }
    std::unique_ptr<Frames> in = frames.take();
    auto out = new_packets();
    for (AVFrame* f : in->frames()) {
      if (audio) {
        add_audio(f, *out);
      } else {
        send(video_frame(f), *out);
      }
    }
    return out;
  }

  std::unique_ptr<Packets> flush() {
    BusyGuard busy(busy_, "Encoder");
    auto out = new_packets();
    if (flushed_) return out;
    flushed_ = true;
    if (fifo_ != nullptr && av_audio_fifo_size(fifo_) > 0) {
      const int left = av_audio_fifo_size(fifo_);
      const bool small_last =
          (ctx_->codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME) != 0;
      FramePtr f = audio_frame(small_last ? left : ctx_->frame_size);
      av_samples_set_silence(f->extended_data, 0, f->nb_samples,
                             ctx_->ch_layout.nb_channels, ctx_->sample_fmt);
      av_audio_fifo_read(fifo_, reinterpret_cast<void**>(f->extended_data),
                         left);
      send(std::move(f), *out);
    }
    const int rc = avcodec_send_frame(ctx_.get(), nullptr);
    if (rc < 0 && rc != AVERROR_EOF)
      fail(label_, "cannot flush the encoder", rc);
    receive(*out);
    return out;
  }

 private:
  std::unique_ptr<Packets> new_packets() const {
    return make_packets(media_, label_, stream_index_, from_av(ctx_->time_base),
                        std::nullopt, codec());
  }

  // The frame as the encoder takes it: its own size and format.
  FramePtr video_frame(const AVFrame* f) {
    if (f->width != ctx_->width || f->height != ctx_->height) {
      throw InvalidArgument(
          label_ + ": the encoder takes " + std::to_string(ctx_->width) + "x" +
          std::to_string(ctx_->height) + " frames, got " +
          std::to_string(f->width) + "x" + std::to_string(f->height));
    }
    FramePtr out = new_frame();
    if (f->format == ctx_->pix_fmt) {
      if (av_frame_ref(out.get(), f) < 0) throw std::bad_alloc();
    } else {
      sws_.reset(sws_getCachedContext(sws_.release(), f->width, f->height,
                                      static_cast<AVPixelFormat>(f->format),
                                      ctx_->width, ctx_->height, ctx_->pix_fmt,
                                      SWS_BICUBIC, nullptr, nullptr, nullptr));
      if (!sws_) {
        throw InvalidArgument(label_ + ": cannot convert " +
                              pix_fmt_name(f->format) + " frames to " +
                              pix_fmt_name(ctx_->pix_fmt));
      }
      out->format = ctx_->pix_fmt;
      out->width = ctx_->width;
      out->height = ctx_->height;
      out->color_range = ctx_->color_range;
      if (av_frame_get_buffer(out.get(), 0) < 0) throw std::bad_alloc();
      sws_scale(sws_.get(), f->data, f->linesize, 0, f->height, out->data,
                out->linesize);
    }
    out->pts = next_pts_++;
    out->time_base = ctx_->time_base;
    return out;
  }

  FramePtr audio_frame(int samples) const {
    FramePtr f = new_frame();
    f->format = ctx_->sample_fmt;
    f->sample_rate = ctx_->sample_rate;
    f->nb_samples = samples;
    if (av_channel_layout_copy(&f->ch_layout, &ctx_->ch_layout) < 0 ||
        av_frame_get_buffer(f.get(), 0) < 0) {
      throw std::bad_alloc();
    }
    return f;
  }

  void add_audio(const AVFrame* f, Packets& out) {
    if (f->format != ctx_->sample_fmt || f->sample_rate != ctx_->sample_rate ||
        f->ch_layout.nb_channels != ctx_->ch_layout.nb_channels) {
      throw InvalidArgument(
          label_ + ": the encoder takes " + sample_fmt_name(ctx_->sample_fmt) +
          " audio at " + std::to_string(ctx_->sample_rate) + " Hz with " +
          std::to_string(ctx_->ch_layout.nb_channels) + " channels, got " +
          sample_fmt_name(f->format) + " at " + std::to_string(f->sample_rate) +
          " Hz with " + std::to_string(f->ch_layout.nb_channels));
    }
    if (fifo_ == nullptr) {
      FramePtr c = new_frame();
      if (av_frame_ref(c.get(), f) < 0) throw std::bad_alloc();
      if (av_channel_layout_copy(&c->ch_layout, &ctx_->ch_layout) < 0)
        throw std::bad_alloc();
      send(std::move(c), out);
      return;
    }
    if (av_audio_fifo_write(fifo_, reinterpret_cast<void**>(f->extended_data),
                            f->nb_samples) < f->nb_samples) {
      throw std::bad_alloc();
    }
    while (av_audio_fifo_size(fifo_) >= ctx_->frame_size) {
      FramePtr c = audio_frame(ctx_->frame_size);
      av_audio_fifo_read(fifo_, reinterpret_cast<void**>(c->extended_data),
                         ctx_->frame_size);
      send(std::move(c), out);
    }
  }

  void send(FramePtr f, Packets& out) {
    if (media_ == Media::kAudio) {
      f->pts = next_pts_;
      f->time_base = ctx_->time_base;
      next_pts_ += f->nb_samples;
    }
    clear_ffmpeg_error();
    const int rc = avcodec_send_frame(ctx_.get(), f.get());
    if (rc < 0) {
      const std::string detail = ffmpeg_error();
      throw DecodeError(label_ + ": the " + ctx_->codec->name +
                        " encoder refused a frame: " +
                        (detail.empty() ? av_error_text(rc) : detail));
    }
    receive(out);
  }

  void receive(Packets& out) {
    for (;;) {
      PacketPtr p = new_packet();
      const int rc = avcodec_receive_packet(ctx_.get(), p.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      if (rc < 0) fail(label_, "encoding failed", rc);
      if (media_ != Media::kAudio && p->duration == 0) p->duration = 1;
      p->stream_index = stream_index_;
      p->time_base = ctx_->time_base;
      out.push(p.release());
    }
  }

  Media media_;
  CodecPtr ctx_;
  std::string label_;
  int stream_index_;
  Rational frame_rate_;
  SwsPtr sws_;
  AVAudioFifo* fifo_ = nullptr;
  int64_t next_pts_ = 0;
  bool flushed_ = false;
  mutable std::atomic<std::thread::id> busy_{};
};

Encoder::Encoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Encoder::~Encoder() = default;
Media Encoder::media() const { return impl_->media(); }
std::string Encoder::name() const { return impl_->context()->codec->name; }
Codec Encoder::codec() const { return impl_->codec(); }
int Encoder::frame_size() const {
  return impl_->media() == Media::kAudio ? impl_->context()->frame_size : 0;
}
std::unique_ptr<Packets> Encoder::encode(Frames&& frames) {
  return impl_->encode(std::move(frames));
}
std::unique_ptr<Packets> Encoder::flush() { return impl_->flush(); }

namespace {

void apply_common(AVCodecContext* ctx, int64_t bit_rate, int compression_level,
                  int qscale) {
  if (bit_rate > 0) ctx->bit_rate = bit_rate;
  if (compression_level != -1) ctx->compression_level = compression_level;
  if (qscale >= 0) {
    ctx->flags |= AV_CODEC_FLAG_QSCALE;
    ctx->global_quality = FF_QP2LAMBDA * qscale;
  }
  if ((ctx->codec->capabilities & AV_CODEC_CAP_EXPERIMENTAL) != 0)
    ctx->strict_std_compliance = FF_COMPLIANCE_EXPERIMENTAL;
}

void open_context(AVCodecContext* ctx, const AVCodec* codec,
                  const std::map<std::string, std::string>& options,
                  const std::string& label) {
  std::map<std::string, std::string> opts = options;
  // FFmpeg's default is one thread; the CLI's is one per core.
  if (opts.find("threads") == opts.end()) opts["threads"] = "0";
  Options o(opts);
  clear_ffmpeg_error();
  const int rc = avcodec_open2(ctx, codec, o.get());
  if (rc < 0) {
    const std::string detail = ffmpeg_error();
    throw InvalidArgument(
        label + ": cannot open the " + codec->name +
        " encoder: " + (detail.empty() ? av_error_text(rc) : detail));
  }
  o.check_consumed(label, std::string("the ") + codec->name + " encoder");
}

CodecPtr video_context(const VideoEncodeConfig& c, const AVCodec* codec,
                       bool global_header, const std::string& label,
                       AVPixelFormat preferred) {
  if (c.width <= 0 || c.height <= 0) {
    throw InvalidArgument(label + ": width and height must be positive, got " +
                          std::to_string(c.width) + "x" +
                          std::to_string(c.height));
  }
  const EncoderSupport s = encoder_support(codec);
  AVPixelFormat fmt = AV_PIX_FMT_NONE;
  if (!c.pix_fmt.empty()) {
    fmt = pixel_format(c.pix_fmt);
    if (!s.pix_fmts.empty() && std::find(s.pix_fmts.begin(), s.pix_fmts.end(),
                                         fmt) == s.pix_fmts.end()) {
      throw InvalidArgument(
          label + ": the " + codec->name + " encoder does not take pix_fmt \"" +
          c.pix_fmt + "\"; it takes " +
          join<int>(s.pix_fmts, [](const int& f) { return pix_fmt_name(f); }));
    }
  } else if (preferred != AV_PIX_FMT_NONE) {
    fmt = preferred;
  } else if (!s.pix_fmts.empty()) {
    fmt = static_cast<AVPixelFormat>(s.pix_fmts.front());
  } else {
    throw InvalidArgument(label + ": the " + codec->name +
                          " encoder needs a pix_fmt");
  }
  AVRational rate{0, 1};
  if (c.frame_rate) {
    if (c.frame_rate->num <= 0 || c.frame_rate->den <= 0) {
      throw InvalidArgument(label + ": frame rate must be positive, got " +
                            std::to_string(c.frame_rate->num) + "/" +
                            std::to_string(c.frame_rate->den));
    }
    rate = to_av(*c.frame_rate);
    if (!s.frame_rates.empty() &&
        std::none_of(s.frame_rates.begin(), s.frame_rates.end(),
                     [&](AVRational r) { return av_cmp_q(r, rate) == 0; })) {
      throw InvalidArgument(
          label + ": the " + codec->name + " encoder does not take " +
          rate_text(rate) + " fps; it takes " +
          join<AVRational>(s.frame_rates,
                           [](const AVRational& r) { return rate_text(r); }));
    }
  } else if (!s.frame_rates.empty()) {
    rate = s.frame_rates.front();
  } else {
    throw InvalidArgument(label + ": the " + codec->name +
                          " encoder has no default frame rate; give one");
  }
  CodecPtr ctx(avcodec_alloc_context3(codec));
  if (!ctx) throw std::bad_alloc();
  ctx->width = c.width;
  ctx->height = c.height;
  ctx->pix_fmt = fmt;
  ctx->time_base = av_inv_q(rate);
  ctx->framerate = rate;
  ctx->sample_aspect_ratio = AVRational{1, 1};
  if (c.gop_size != -1) ctx->gop_size = c.gop_size;
  if (c.max_b_frames != -1) ctx->max_b_frames = c.max_b_frames;
  apply_common(ctx.get(), c.bit_rate, c.compression_level, c.qscale);
  int v = ctx->colorspace;
  set_color(&v, c.colorspace, "colorspace", av_color_space_from_name);
  ctx->colorspace = static_cast<AVColorSpace>(v);
  v = ctx->color_primaries;
  set_color(&v, c.color_primaries, "color primaries",
            av_color_primaries_from_name);
  ctx->color_primaries = static_cast<AVColorPrimaries>(v);
  v = ctx->color_trc;
  set_color(&v, c.color_trc, "color transfer", av_color_transfer_from_name);
  ctx->color_trc = static_cast<AVColorTransferCharacteristic>(v);
  const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(fmt);
  if (d != nullptr && std::strncmp(d->name, "yuvj", 4) == 0)
    ctx->color_range = AVCOL_RANGE_JPEG;
  if (global_header) ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  return ctx;
}

CodecPtr audio_context(const AudioEncodeConfig& c, const AVCodec* codec,
                       bool global_header, const std::string& label) {
  if (c.num_channels <= 0 || c.num_channels > 64) {
    throw InvalidArgument(label + ": num_channels must be in [1, 64], got " +
                          std::to_string(c.num_channels));
  }
  const EncoderSupport s = encoder_support(codec);
  AVSampleFormat fmt = AV_SAMPLE_FMT_NONE;
  if (!c.sample_fmt.empty()) {
    fmt = sample_format(c.sample_fmt);
    if (!s.sample_fmts.empty() &&
        std::find(s.sample_fmts.begin(), s.sample_fmts.end(), fmt) ==
            s.sample_fmts.end()) {
      throw InvalidArgument(label + ": the " + codec->name +
                            " encoder does not take sample_fmt \"" +
                            c.sample_fmt + "\"; it takes " +
                            join<int>(s.sample_fmts, [](const int& f) {
                              return sample_fmt_name(f);
                            }));
    }
  } else if (!s.sample_fmts.empty()) {
    fmt = static_cast<AVSampleFormat>(s.sample_fmts.front());
  } else {
    throw InvalidArgument(label + ": the " + codec->name +
                          " encoder needs a sample_fmt");
  }
  int rate = c.sample_rate;
  if (rate > 0) {
    if (!s.sample_rates.empty() &&
        std::find(s.sample_rates.begin(), s.sample_rates.end(), rate) ==
            s.sample_rates.end()) {
      throw InvalidArgument(label + ": the " + codec->name +
                            " encoder does not take " + std::to_string(rate) +
                            " Hz; it takes " +
                            join<int>(s.sample_rates, [](const int& r) {
                              return std::to_string(r);
                            }));
    }
  } else if (!s.sample_rates.empty()) {
    rate = s.sample_rates.front();
  } else {
    throw InvalidArgument(label + ": the " + codec->name +
                          " encoder needs a sample_rate");
  }
  CodecPtr ctx(avcodec_alloc_context3(codec));
  if (!ctx) throw std::bad_alloc();
  ctx->sample_fmt = fmt;
  ctx->sample_rate = rate;
  ctx->time_base = AVRational{1, rate};
  av_channel_layout_default(&ctx->ch_layout, c.num_channels);
  if (!s.layout_masks.empty()) {
    bool found = false;
    for (uint64_t mask : s.layout_masks) {
      if (av_popcount64(mask) == c.num_channels) {
        av_channel_layout_uninit(&ctx->ch_layout);
        av_channel_layout_from_mask(&ctx->ch_layout, mask);
        found = true;
        break;
      }
    }
    if (!found) {
      throw InvalidArgument(
          label + ": the " + codec->name + " encoder does not take " +
          std::to_string(c.num_channels) + " channels; it takes layouts of " +
          join<uint64_t>(s.layout_masks,
                         [](const uint64_t& m) {
                           return std::to_string(av_popcount64(m));
                         }) +
          " channels");
    }
  }
  apply_common(ctx.get(), c.bit_rate, c.compression_level, c.qscale);
  if (global_header) ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  return ctx;
}

}  // namespace

// --- Muxer ---

struct Muxer::State {
  AVFormatContext* fmt = nullptr;
  std::vector<std::unique_ptr<Encoder>> encoders;
  bool opened = false;
  bool closed = false;
  // In memory: the file so far, the write position, and the AVIO on it.
  bool in_memory = false;
  std::vector<uint8_t> bytes;
  std::size_t pos = 0;
  AvioPtr memory_io;

  ~State() {
    if (fmt == nullptr) return;
    if (opened && !closed) av_write_trailer(fmt);  // finish what is there
    if (in_memory) {
      fmt->pb = nullptr;  // memory_io is freed by its owner
    } else if ((fmt->oformat->flags & AVFMT_NOFILE) == 0 &&
               fmt->pb != nullptr) {
      avio_closep(&fmt->pb);
    }
    avformat_free_context(fmt);
  }

  static int write(void* opaque, AvioWriteData buf, int size) {
    auto* s = static_cast<State*>(opaque);
    const auto n = static_cast<std::size_t>(size);
    if (s->pos + n > s->bytes.size()) s->bytes.resize(s->pos + n);
    std::memcpy(s->bytes.data() + s->pos, buf, n);
    s->pos += n;
    return size;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* s = static_cast<State*>(opaque);
    const auto size = static_cast<int64_t>(s->bytes.size());
    int64_t at = 0;
    switch (whence & ~AVSEEK_FORCE) {
      case AVSEEK_SIZE:
        return size;
      case SEEK_SET:
        at = offset;
        break;
      case SEEK_CUR:
        at = static_cast<int64_t>(s->pos) + offset;
        break;
      case SEEK_END:
        at = size + offset;
        break;
      default:
        return AVERROR(EINVAL);
    }
    if (at < 0) return AVERROR(EINVAL);
    s->pos = static_cast<std::size_t>(at);
    return at;
  }
};

Muxer::Muxer(std::string dst, const std::string& format)
    : dst_(std::move(dst)), state_(std::make_unique<State>()) {
  quiet_logging();
  const int rc = avformat_alloc_output_context2(
      &state_->fmt, nullptr, format.empty() ? nullptr : format.c_str(),
      dst_.c_str());
  if (rc < 0 || state_->fmt == nullptr) {
    throw InvalidArgument(
        dst_ + ": " +
        (format.empty() ? std::string("cannot tell the format from the name; "
                                      "give format=")
                        : "no muxer named \"" + format + "\""));
  }
}

Muxer::~Muxer() = default;

std::unique_ptr<Muxer> Muxer::in_memory(const std::string& format) {
  if (format.empty()) throw InvalidArgument("a Muxer in memory needs a format");
  auto m = std::make_unique<Muxer>("<memory>", format);
  State& s = *m->state_;
  if ((s.fmt->oformat->flags & AVFMT_NOFILE) != 0) {
    throw InvalidArgument("the " + format +
                          " muxer writes files of its own, not to memory");
  }
  constexpr int kBufferSize = 1 << 16;
  auto* buffer = static_cast<uint8_t*>(av_malloc(kBufferSize));
  if (buffer == nullptr) throw std::bad_alloc();
  s.memory_io.reset(avio_alloc_context(buffer, kBufferSize, 1, &s, nullptr,
                                       &State::write, &State::seek));
  if (!s.memory_io) {
    av_free(buffer);
    throw std::bad_alloc();
  }
  s.fmt->pb = s.memory_io.get();
  s.fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  s.in_memory = true;
  return m;
}

Buffer Muxer::take_bytes() {
  if (!state_->in_memory)
    throw InvalidArgument(dst_ + ": not a Muxer in memory");
  if (!state_->closed)
    throw InvalidArgument(dst_ + ": close the Muxer before taking its bytes");
  const auto& b = state_->bytes;
  Buffer out =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(b.size())});
  if (!b.empty()) std::memcpy(out.data_as<uint8_t>(), b.data(), b.size());
  state_->bytes = {};
  return out;
}

std::string Muxer::format() const { return state_->fmt->oformat->name; }
int Muxer::num_streams() const {
  return static_cast<int>(state_->fmt->nb_streams);
}
bool Muxer::is_open() const { return state_->opened && !state_->closed; }
bool Muxer::closed() const { return state_->closed; }

namespace {

void check_adding(const Muxer& m, bool opened, bool closed) {
  if (opened || closed) {
    throw InvalidArgument(m.dst() +
                          ": streams are added before the Muxer is opened");
  }
}

}  // namespace

Encoder& Muxer::add_stream(Media media, const std::string& encoder,
                           const std::map<std::string, std::string>& options,
                           const std::function<AVCodecContext*(
                               const AVCodec* codec, bool global_header,
                               const std::string& label)>& context) {
  check_adding(*this, state_->opened, state_->closed);
  AVFormatContext* fmt = state_->fmt;
  const AVMediaType type =
      media == Media::kAudio ? AVMEDIA_TYPE_AUDIO : AVMEDIA_TYPE_VIDEO;
  const AVCodecID id =
      av_guess_codec(fmt->oformat, nullptr, dst_.c_str(), nullptr, type);
  if (encoder.empty() && id == AV_CODEC_ID_NONE) {
    throw InvalidArgument(dst_ + ": " + format() + " does not take " +
                          (media == Media::kAudio ? "audio" : "video"));
  }
  const AVCodec* codec = find_encoder(encoder, id, type, dst_);
  const int index = num_streams();
  const std::string label = dst_ + " (stream " + std::to_string(index) + ")";
  CodecPtr ctx(
      context(codec, (fmt->oformat->flags & AVFMT_GLOBALHEADER) != 0, label));
  open_context(ctx.get(), codec, options, label);
  AVStream* st = avformat_new_stream(fmt, nullptr);
  if (st == nullptr) throw std::bad_alloc();
  if (avcodec_parameters_from_context(st->codecpar, ctx.get()) < 0)
    throw std::bad_alloc();
  st->time_base = ctx->time_base;
  Rational rate{0, 1};
  if (media != Media::kAudio) {
    st->avg_frame_rate = ctx->framerate;
    rate = from_av(ctx->framerate);
  }
  state_->encoders.push_back(
      std::unique_ptr<Encoder>(new Encoder(std::make_unique<Encoder::Impl>(
          media, std::move(ctx), label, index, rate))));
  return *state_->encoders.back();
}

Encoder& Muxer::add_encode_stream(
    const VideoEncodeConfig& config, const std::string& encoder,
    const std::map<std::string, std::string>& options) {
  return add_stream(
      Media::kVideo, encoder, options,
      [&](const AVCodec* codec, bool global_header, const std::string& label) {
        return video_context(config, codec, global_header, label,
                             AV_PIX_FMT_NONE)
            .release();
      });
}

Encoder& Muxer::add_encode_stream(
    const AudioEncodeConfig& config, const std::string& encoder,
    const std::map<std::string, std::string>& options) {
  return add_stream(
      Media::kAudio, encoder, options,
      [&](const AVCodec* codec, bool global_header, const std::string& label) {
        return audio_context(config, codec, global_header, label).release();
      });
}

int Muxer::add_remux_stream(const Codec& codec) {
  check_adding(*this, state_->opened, state_->closed);
  AVStream* st = avformat_new_stream(state_->fmt, nullptr);
  if (st == nullptr) throw std::bad_alloc();
  if (avcodec_parameters_copy(st->codecpar, codec.params()) < 0)
    throw std::bad_alloc();
  st->codecpar->codec_tag = 0;  // the input container's tag may not fit
  st->time_base = to_av(codec.time_base());
  if (codec.media() != Media::kAudio)
    st->avg_frame_rate = to_av(codec.frame_rate());
  return static_cast<int>(st->index);
}

void Muxer::open(const std::map<std::string, std::string>& options) {
  if (state_->opened || state_->closed)
    throw InvalidArgument(dst_ + ": the Muxer was opened already");
  AVFormatContext* fmt = state_->fmt;
  if (fmt->nb_streams == 0)
    throw InvalidArgument(dst_ + ": add a stream before opening the Muxer");
  std::map<std::string, std::string> opts = options;
  // One image to one named file, not a numbered sequence.
  if (std::strcmp(fmt->oformat->name, "image2") == 0 &&
      opts.find("update") == opts.end()) {
    opts["update"] = "1";
  }
  if (!state_->in_memory && (fmt->oformat->flags & AVFMT_NOFILE) == 0) {
    // A plain path is written with the file protocol only; a URL with the
    // protocol it names (the caller asked for it).
    std::map<std::string, std::string> io;
    if (dst_.find("://") == std::string::npos)
      io["protocol_whitelist"] = "file";
    Options io_opts(io);
    const int rc = avio_open2(&fmt->pb, dst_.c_str(), AVIO_FLAG_WRITE, nullptr,
                              io_opts.get());
    if (rc < 0) {
      throw IoError(dst_ + ": cannot open for writing: " + av_error_text(rc));
    }
  }
  Options o(opts);
  clear_ffmpeg_error();
  const int rc = avformat_write_header(fmt, o.get());
  if (rc < 0) {
    const std::string detail = ffmpeg_error();
    throw InvalidArgument(
        dst_ + ": cannot write the " + format() +
        " header: " + (detail.empty() ? av_error_text(rc) : detail));
  }
  state_->opened = true;
  o.check_consumed(dst_, "the " + format() + " muxer");
}

void Muxer::write(int index, const Packets& packets) {
  if (!state_->opened || state_->closed) {
    throw InvalidArgument(dst_ + (state_->closed
                                      ? ": the Muxer is closed"
                                      : ": open the Muxer before writing"));
  }
  packets.check();
  AVFormatContext* fmt = state_->fmt;
  if (index < 0 || index >= num_streams()) {
    throw InvalidArgument(dst_ + ": no stream " + std::to_string(index) +
                          " (it has " + std::to_string(num_streams()) + ")");
  }
  AVStream* st = fmt->streams[index];
  const bool audio_stream = st->codecpar->codec_type == AVMEDIA_TYPE_AUDIO;
  if (audio_stream != (packets.media() == Media::kAudio)) {
    throw InvalidArgument(dst_ + ": stream " + std::to_string(index) + " is " +
                          (audio_stream ? "audio" : "video") + ", got " +
                          media_name(packets.media()) + " packets");
  }
  const AVRational tb = to_av(packets.time_base());
  for (const AVPacket* p : packets.packets()) {
    PacketPtr c = new_packet();
    if (av_packet_ref(c.get(), p) < 0) throw std::bad_alloc();
    av_packet_rescale_ts(c.get(), tb, st->time_base);
    c->stream_index = index;
    c->pos = -1;
    const int rc = av_interleaved_write_frame(fmt, c.get());
    if (rc < 0) {
      throw IoError(dst_ + ": cannot write a packet of stream " +
                    std::to_string(index) + ": " + av_error_text(rc));
    }
  }
}

void Muxer::flush() {
  if (!state_->opened || state_->closed) return;
  const int rc = av_interleaved_write_frame(state_->fmt, nullptr);
  if (rc < 0) throw IoError(dst_ + ": cannot flush: " + av_error_text(rc));
}

void Muxer::close() {
  if (state_->closed) throw InvalidArgument(dst_ + ": the Muxer is closed");
  state_->closed = true;
  if (!state_->opened) return;
  AVFormatContext* fmt = state_->fmt;
  const int rc = av_write_trailer(fmt);
  int rc_close = 0;
  if (state_->in_memory) {
    avio_flush(fmt->pb);
  } else if ((fmt->oformat->flags & AVFMT_NOFILE) == 0) {
    rc_close = avio_closep(&fmt->pb);
  }
  if (rc < 0)
    throw IoError(dst_ + ": cannot write the trailer: " + av_error_text(rc));
  if (rc_close < 0)
    throw IoError(dst_ + ": cannot close: " + av_error_text(rc_close));
}

// --- encode_video ---

Buffer encode_video(Frames&& frames, const std::string& format,
                    VideoEncodeConfig config, const std::string& encoder,
                    const std::map<std::string, std::string>& options,
                    const std::map<std::string, std::string>& muxer_options) {
  frames.check();
  if (frames.media() == Media::kAudio)
    throw InvalidArgument("encode_video: got audio frames");
  if (frames.empty()) throw InvalidArgument("encode_video: no frames");
  if (config.width == 0) config.width = frames.width();
  if (config.height == 0) config.height = frames.height();
  if (!config.frame_rate) {
    // The spacing of the first two frames; one frame: the time base's.
    const Rational tb = frames.time_base();
    const std::vector<int64_t> pts = frames.pts();
    int64_t step = 1;
    if (pts.size() >= 2 && pts[1] > pts[0]) step = pts[1] - pts[0];
    int num = 0;
    int den = 0;
    av_reduce(&num, &den, tb.den, int64_t{tb.num} * step, 1 << 30);
    config.frame_rate = Rational{num, den};
  }
  auto muxer = Muxer::in_memory(format);
  Encoder& enc = muxer->add_encode_stream(config, encoder, options);
  muxer->open(muxer_options);
  muxer->write(0, *enc.encode(std::move(frames)));
  muxer->write(0, *enc.flush());
  muxer->close();
  return muxer->take_bytes();
}

// --- encode_image ---

Buffer encode_image(const Buffer& array, const ImageEncodeOptions& options) {
  std::string format = options.format;
  std::transform(format.begin(), format.end(), format.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  const char* name = format == "png"                       ? "png"
                     : format == "jpeg" || format == "jpg" ? "mjpeg"
                     : format == "webp"                    ? "libwebp"
                     : format == "tiff" || format == "tif" ? "tiff"
                     : format == "bmp"                     ? "bmp"
                                                           : nullptr;
  if (name == nullptr) {
    throw InvalidArgument("encode_image: format \"" + options.format +
                          "\" is not png, jpeg, webp, tiff or bmp");
  }
  const std::string label = "encode_image (" + format + ")";
  const AVCodec* codec =
      find_encoder(name, AV_CODEC_ID_NONE, AVMEDIA_TYPE_VIDEO, label);
  // One image: a leading frame dimension, unless there is one already.
  const AVPixelFormat in_fmt = pixel_format(options.pix_fmt);
  std::vector<int64_t> shape = array.shape();
  const bool gray = in_fmt == AV_PIX_FMT_GRAY8 ||
                    in_fmt == AV_PIX_FMT_GRAY16LE ||
                    in_fmt == AV_PIX_FMT_GRAY16BE;
  const std::size_t image_dims = gray ? 2 : 3;
  if (shape.size() == image_dims ||
      (gray && shape.size() == 3 && shape[2] == 1)) {
    shape.insert(shape.begin(), 1);
  }
  if (!array.contiguous())
    throw InvalidArgument(label + ": the array must be C-contiguous");
  const Buffer one = array.view_as(array.dtype(), shape);
  const ArrayLayout l = video_layout(one, in_fmt, options.pix_fmt);
  if (l.frames != 1) {
    throw InvalidArgument(label + ": one image, got " +
                          std::to_string(l.frames));
  }
  auto frames = frames_from_planes(one, in_fmt, l, Rational{1, 1}, 0);
  // The input's format when the encoder takes it; else the closest.
  const EncoderSupport s = encoder_support(codec);
  AVPixelFormat fmt = AV_PIX_FMT_NONE;
  auto takes = [&](AVPixelFormat f) {
    return s.pix_fmts.empty() || std::find(s.pix_fmts.begin(), s.pix_fmts.end(),
                                           f) != s.pix_fmts.end();
  };
  if (takes(in_fmt)) {
    fmt = in_fmt;
  } else {
    const AVPixelFormat preferred[] = {
        gray ? AV_PIX_FMT_GRAY8 : AV_PIX_FMT_YUVJ444P,
        AV_PIX_FMT_YUV444P,
        AV_PIX_FMT_RGB24,
        AV_PIX_FMT_BGR24,
        AV_PIX_FMT_BGRA,
        AV_PIX_FMT_RGBA,
        AV_PIX_FMT_YUVJ420P,
        AV_PIX_FMT_YUV420P};
    for (AVPixelFormat f : preferred) {
      if (takes(f)) {
        fmt = f;
        break;
      }
    }
    if (fmt == AV_PIX_FMT_NONE)
      fmt = static_cast<AVPixelFormat>(s.pix_fmts.front());
  }
  VideoEncodeConfig config;
  config.width = l.width;
  config.height = l.height;
  config.frame_rate = Rational{1, 1};
  config.compression_level = options.compression_level;
  std::map<std::string, std::string> opts;
  if (options.quality >= 0) {
    if (std::strcmp(name, "libwebp") == 0) {
      opts["quality"] = std::to_string(options.quality);
    } else if (std::strcmp(name, "mjpeg") == 0) {
      if (options.quality < 2 || options.quality > 31)
        throw InvalidArgument(label + ": JPEG quality is 2 (best) to 31");
      config.qscale = options.quality;
    } else {
      throw InvalidArgument(label + ": quality applies to JPEG and WebP");
    }
  }
  if (options.lossless) {
    if (std::strcmp(name, "libwebp") != 0)
      throw InvalidArgument(label + ": lossless applies to WebP");
    opts["lossless"] = "1";
  }
  opts["threads"] = "1";
  // The Paeth filter on every row (as PyAV's PNGs have): about a fifth
  // smaller than FFmpeg's default of none, for a little more CPU.
  if (std::strcmp(name, "png") == 0) opts["pred"] = "paeth";
  CodecPtr ctx = video_context(config, codec, false, label, fmt);
  if (std::strcmp(name, "mjpeg") == 0 && config.qscale >= 0) {
    ctx->qmin = ctx->qmax = config.qscale;
  }
  open_context(ctx.get(), codec, opts, label);
  Encoder::Impl enc(Media::kVideo, std::move(ctx), label, 0, Rational{1, 1});
  auto packets = enc.encode(std::move(*frames));
  auto rest = enc.flush();
  std::size_t n = 0;
  for (const auto* p : {&packets, &rest}) {
    for (std::size_t i = 0; i < (*p)->num_packets(); ++i)
      n += (*p)->packet(i).data.size();
  }
  if (n == 0) throw DecodeError(label + ": the encoder wrote nothing");
  Buffer out = Buffer::allocate(DType::kUint8, {static_cast<int64_t>(n)});
  std::size_t at = 0;
  for (const auto* p : {&packets, &rest}) {
    for (std::size_t i = 0; i < (*p)->num_packets(); ++i) {
      const auto d = (*p)->packet(i).data;
      std::memcpy(out.data_as<uint8_t>() + at, d.data(), d.size());
      at += d.size();
    }
  }
  return out;
}

}  // namespace feedline::media
