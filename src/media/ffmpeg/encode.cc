// SPDX-License-Identifier: Apache-2.0
//
// The Encoder, and encoder contexts checked against what the encoder takes
// (feedline/media/encode.h; shared declarations in encoding.h).

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "media/ffmpeg/encoding.h"

extern "C" {
#include <libavutil/samplefmt.h>
}

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

namespace {

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

// Sets `*field` to the value FFmpeg names `name` (none: unchanged).
// FFmpeg's parsers take any name that starts with a known one ("bt7099" is
// bt709): only the exact name is taken here.
template <typename Enum>
void set_color(int* field, const std::string& name, const char* what,
               int (*parse)(const char*), const char* (*name_of)(Enum)) {
  if (name.empty()) return;
  const int v = parse(name.c_str());
  const char* exact = v < 0 ? nullptr : name_of(static_cast<Enum>(v));
  if (exact == nullptr || name != exact)
    throw InvalidArgument(std::string("unknown ") + what + " \"" + name + "\"");
  *field = v;
}

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

}  // namespace

namespace ffmpeg {

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

void open_context(AVCodecContext* ctx, const AVCodec* codec,
                  const std::map<std::string, std::string>& options,
                  const std::string& label) {
  quiet_logging();  // FFmpeg's messages become the errors' text, not stderr
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
  if (c.time_base) {
    if (c.time_base->num <= 0 || c.time_base->den <= 0) {
      throw InvalidArgument(label + ": time base must be positive, got " +
                            std::to_string(c.time_base->num) + "/" +
                            std::to_string(c.time_base->den));
    }
    if (!s.frame_rates.empty()) {
      throw InvalidArgument(
          label + ": the " + codec->name +
          " encoder takes fixed frame rates only, not frames of their own "
          "times; give a frame_rate (the frames are numbered at it)");
    }
    ctx->time_base = to_av(*c.time_base);
  }
  ctx->framerate = rate;
  ctx->sample_aspect_ratio = AVRational{1, 1};
  if (c.sample_aspect_ratio) {
    const Rational sar = *c.sample_aspect_ratio;
    if (sar.num <= 0 || sar.den <= 0) {
      throw InvalidArgument(
          label + ": sample aspect ratio must be positive, got " +
          std::to_string(sar.num) + "/" + std::to_string(sar.den));
    }
    ctx->sample_aspect_ratio = to_av(sar);
  }
  if (c.gop_size != -1) ctx->gop_size = c.gop_size;
  if (c.max_b_frames != -1) ctx->max_b_frames = c.max_b_frames;
  apply_common(ctx.get(), c.bit_rate, c.compression_level, c.qscale);
  int v = ctx->colorspace;
  set_color(&v, c.colorspace, "colorspace", av_color_space_from_name,
            av_color_space_name);
  ctx->colorspace = static_cast<AVColorSpace>(v);
  v = ctx->color_primaries;
  set_color(&v, c.color_primaries, "color primaries",
            av_color_primaries_from_name, av_color_primaries_name);
  ctx->color_primaries = static_cast<AVColorPrimaries>(v);
  v = ctx->color_trc;
  set_color(&v, c.color_trc, "color transfer", av_color_transfer_from_name,
            av_color_transfer_name);
  ctx->color_trc = static_cast<AVColorTransferCharacteristic>(v);
  const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(fmt);
  if (d != nullptr && std::strncmp(d->name, "yuvj", 4) == 0)
    ctx->color_range = AVCOL_RANGE_JPEG;
  v = ctx->color_range;
  set_color(&v, c.color_range, "color range", av_color_range_from_name,
            av_color_range_name);
  ctx->color_range = static_cast<AVColorRange>(v);
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
  int rate = c.sample_rate;  // 0: the encoder's first
  if (rate < 0) {
    throw InvalidArgument(label + ": sample_rate must be positive; got " +
                          std::to_string(rate));
  }
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

}  // namespace ffmpeg

// --- Encoder ---

Encoder::Impl::Impl(Media media, CodecPtr ctx, std::string label,
                    int stream_index, Rational frame_rate)
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

Encoder::Impl::~Impl() {
  if (fifo_ != nullptr) av_audio_fifo_free(fifo_);
}

Media Encoder::Impl::media() const { return media_; }

AVCodecContext* Encoder::Impl::context() const { return ctx_.get(); }

bool Encoder::Impl::fixed_frame_size() const {
  return ctx_->frame_size > 0 &&
         (ctx_->codec->capabilities & AV_CODEC_CAP_VARIABLE_FRAME_SIZE) == 0;
}

Codec Encoder::Impl::codec() const {
  AVCodecParameters* p = avcodec_parameters_alloc();
  if (p == nullptr) throw std::bad_alloc();
  std::unique_ptr<AVCodecParameters, ParamsDeleter> owner(p);
  if (avcodec_parameters_from_context(p, ctx_.get()) < 0)
    throw std::bad_alloc();
  return Codec(media_, p, from_av(ctx_->time_base), frame_rate_);
}

std::unique_ptr<Packets> Encoder::Impl::encode(Frames&& frames) {
  BusyGuard busy(busy_, "Encoder");
  if (flushed_)
    throw InvalidArgument(label_ + ": the encoder was flushed (end of stream)");
  frames.check();
  const bool audio = frames.media() == Media::kAudio;
  if (audio != (media_ == Media::kAudio)) {
    throw InvalidArgument(label_ + ": " + media_name(media_) + " encoder got " +
                          media_name(frames.media()) + " frames");
  }
  std::unique_ptr<Frames> in = frames.take();
  auto out = new_packets();
  for (AVFrame* f : in->frames()) {
    if (audio) {
      check_kept_bits(f);
      add_audio(f, *out);
    } else {
      send(video_frame(f, to_av(in->time_base())), *out);
    }
  }
  return out;
}

void Encoder::Impl::check_kept_bits(const AVFrame* f) const {
  // An encoder of 32-bit samples may keep fewer bits: FFmpeg's FLAC encoder
  // keeps the top 24 (bits_per_raw_sample). For 32-bit integer input whose
  // low bits are not all zero that would change the samples silently; float
  // input is quantised anyway. 24-bit audio in s32 (the low byte zero, as
  // FFmpeg decodes it) passes.
  const int kept = ctx_->bits_per_raw_sample;
  const auto in = static_cast<AVSampleFormat>(f->format);
  if (kept <= 0 || kept >= 32 ||
      av_get_packed_sample_fmt(ctx_->sample_fmt) != AV_SAMPLE_FMT_S32 ||
      av_get_packed_sample_fmt(in) != AV_SAMPLE_FMT_S32) {
    return;
  }
  const uint32_t dropped = (uint32_t{1} << (32 - kept)) - 1;
  const bool planar = av_sample_fmt_is_planar(in) != 0;
  const int channels = f->ch_layout.nb_channels;
  const int planes = planar ? channels : 1;
  const int64_t per_plane = int64_t{f->nb_samples} * (planar ? 1 : channels);
  for (int p = 0; p < planes; ++p) {
    const auto* v = reinterpret_cast<const uint32_t*>(f->extended_data[p]);
    for (int64_t i = 0; i < per_plane; ++i) {
      if ((v[i] & dropped) != 0) {
        throw InvalidArgument(
            label_ + ": the " + ctx_->codec->name + " encoder keeps " +
            std::to_string(kept) +
            " bits of s32 samples, and these have bits below them (they "
            "would change): give samples whose low " +
            std::to_string(32 - kept) +
            " bits are zero, or another sample format or codec");
      }
    }
  }
}

std::unique_ptr<Packets> Encoder::Impl::flush() {
  BusyGuard busy(busy_, "Encoder");
  auto out = new_packets();
  if (flushed_) return out;
  flushed_ = true;
  if (swr_) drain_resampler(*out);
  if (fifo_ != nullptr && av_audio_fifo_size(fifo_) > 0) {
    const int left = av_audio_fifo_size(fifo_);
    const bool small_last =
        (ctx_->codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME) != 0;
    FramePtr f = audio_frame(small_last ? left : ctx_->frame_size);
    av_samples_set_silence(f->extended_data, 0, f->nb_samples,
                           ctx_->ch_layout.nb_channels, ctx_->sample_fmt);
    av_audio_fifo_read(fifo_, reinterpret_cast<void**>(f->extended_data), left);
    send(std::move(f), *out);
  }
  const int rc = avcodec_send_frame(ctx_.get(), nullptr);
  if (rc < 0 && rc != AVERROR_EOF) fail(label_, "cannot flush the encoder", rc);
  receive(*out);
  return out;
}

std::unique_ptr<Packets> Encoder::Impl::new_packets() const {
  return make_packets(media_, label_, stream_index_, from_av(ctx_->time_base),
                      std::nullopt, codec());
}

namespace {

bool is_rgb(int format) {
  const AVPixFmtDescriptor* d =
      av_pix_fmt_desc_get(static_cast<AVPixelFormat>(format));
  return d != nullptr && (d->flags & AV_PIX_FMT_FLAG_RGB) != 0;
}

// Three or more components, not RGB: a format with a colour matrix.
bool is_yuv(int format) {
  const AVPixFmtDescriptor* d =
      av_pix_fmt_desc_get(static_cast<AVPixelFormat>(format));
  return d != nullptr && (d->flags & AV_PIX_FMT_FLAG_RGB) == 0 &&
         d->nb_components >= 3;
}

std::string tag_or(const char* name) { return name != nullptr ? name : "?"; }

// A YUV format's range as decoders read it: yuvj* and "pc" full, the rest
// (an untagged stream included) limited.
bool full_range(int format, AVColorRange range) {
  const AVPixFmtDescriptor* d =
      av_pix_fmt_desc_get(static_cast<AVPixelFormat>(format));
  const std::string_view name = d != nullptr ? d->name : "";
  return range == AVCOL_RANGE_JPEG || name.substr(0, 4) == "yuvj";
}

}  // namespace

bool Encoder::Impl::takes_as_is(const AVFrame* f) const {
  if (f->format != ctx_->pix_fmt) return false;
  if (is_rgb(f->format)) return true;
  // A full-range frame into a limited stream (or back), or a frame of
  // another known matrix, is converted (or refused, open_scaler()): passed
  // through, its colours would be read wrong.
  if (full_range(f->format, f->color_range) !=
      full_range(ctx_->pix_fmt, ctx_->color_range)) {
    return false;
  }
  return f->colorspace == AVCOL_SPC_UNSPECIFIED ||
         ctx_->colorspace == AVCOL_SPC_UNSPECIFIED ||
         f->colorspace == ctx_->colorspace;
}

void Encoder::Impl::open_scaler(const AVFrame* f) {
  // The matrix and range the stream is tagged with (and the frame's):
  // swscale's default, BT.601, under a bt709 or bt2020 tag shifted the
  // colours by up to 39 levels. An untagged stream keeps the frame's
  // matrix, as the CLI's scale filter does; RGB frames into an untagged
  // stream get BT.601, as decoders read it. (RGB to RGB has no details.)
  const AVColorSpace to = ctx_->colorspace != AVCOL_SPC_UNSPECIFIED
                              ? ctx_->colorspace
                              : f->colorspace;
  if (is_yuv(f->format) && is_yuv(ctx_->pix_fmt) &&
      f->colorspace != AVCOL_SPC_UNSPECIFIED && to != f->colorspace) {
    throw InvalidArgument(
        label_ + ": cannot convert " +
        tag_or(av_color_space_name(f->colorspace)) + " frames to a " +
        tag_or(av_color_space_name(to)) +
        " stream (swscale changes a YUV matrix only through RGB); convert "
        "them first (FFmpeg's colorspace filter) or tag the stream as the "
        "frames are");
  }
  auto coefficients = [](AVColorSpace cs) {
    return sws_getCoefficients(cs == AVCOL_SPC_UNSPECIFIED ||
                                       cs == AVCOL_SPC_RGB
                                   ? SWS_CS_DEFAULT
                                   : static_cast<int>(cs));
  };
  auto full = [](int format, AVColorRange range) {
    return is_rgb(format) || full_range(format, range) ? 1 : 0;
  };
  const int src_full = full(f->format, f->color_range);
  const int dst_full = full(ctx_->pix_fmt, ctx_->color_range);
  // The ranges are set before initialising: swscale picks a plain copy for
  // one format to itself unless it knows they differ.
  sws_.reset(sws_alloc_context());
  if (!sws_) throw std::bad_alloc();
  SwsContext* s = sws_.get();
  const bool ok = av_opt_set_int(s, "srcw", f->width, 0) >= 0 &&
                  av_opt_set_int(s, "srch", f->height, 0) >= 0 &&
                  av_opt_set_int(s, "src_format", f->format, 0) >= 0 &&
                  av_opt_set_int(s, "dstw", ctx_->width, 0) >= 0 &&
                  av_opt_set_int(s, "dsth", ctx_->height, 0) >= 0 &&
                  av_opt_set_int(s, "dst_format", ctx_->pix_fmt, 0) >= 0 &&
                  av_opt_set_int(s, "sws_flags", SWS_BICUBIC, 0) >= 0 &&
                  av_opt_set_int(s, "src_range", src_full, 0) >= 0 &&
                  av_opt_set_int(s, "dst_range", dst_full, 0) >= 0 &&
                  sws_init_context(s, nullptr, nullptr) >= 0;
  if (!ok) {
    sws_.reset();
    throw InvalidArgument(label_ + ": cannot convert " +
                          pix_fmt_name(f->format) + " frames to " +
                          pix_fmt_name(ctx_->pix_fmt));
  }
  (void)sws_setColorspaceDetails(s, coefficients(f->colorspace), src_full,
                                 coefficients(to), dst_full, 0, 1 << 16,
                                 1 << 16);
}

FramePtr Encoder::Impl::video_frame(const AVFrame* f, AVRational tb) {
  if (f->width != ctx_->width || f->height != ctx_->height) {
    throw InvalidArgument(
        label_ + ": the encoder takes " + std::to_string(ctx_->width) + "x" +
        std::to_string(ctx_->height) + " frames, got " +
        std::to_string(f->width) + "x" + std::to_string(f->height));
  }
  FramePtr out = new_frame();
  if (takes_as_is(f)) {
    if (av_frame_ref(out.get(), f) < 0) throw std::bad_alloc();
    // A decoded frame keeps its type (I, P, B): encoders that honour it
    // (libx264, libvpx) would follow the source's GOP, not gop_size. The
    // CLI clears it too.
    out->pict_type = AV_PICTURE_TYPE_NONE;
  } else {
    const std::array<int, 5> input = {f->width, f->height, f->format,
                                      f->colorspace, f->color_range};
    if (!sws_ || input != sws_input_) open_scaler(f);
    sws_input_ = input;
    out->format = ctx_->pix_fmt;
    out->width = ctx_->width;
    out->height = ctx_->height;
    out->color_range = ctx_->color_range;
    if (av_frame_get_buffer(out.get(), 0) < 0) throw std::bad_alloc();
    sws_scale(sws_.get(), f->data, f->linesize, 0, f->height, out->data,
              out->linesize);
  }
  if (keep_times_) {
    if (f->pts == AV_NOPTS_VALUE || tb.num <= 0 || tb.den <= 0)
      throw InvalidArgument(label_ + ": a frame without a time");
    const int64_t t = av_rescale_q(f->pts, tb, ctx_->time_base);
    if (first_pts_ == AV_NOPTS_VALUE) first_pts_ = t;
    const int64_t pts = t - first_pts_;
    if (pts < next_pts_) {
      throw InvalidArgument(label_ + ": frame times must increase (" +
                            std::to_string(pts) + " after " +
                            std::to_string(next_pts_ - 1) +
                            " in the stream's time base)");
    }
    out->pts = pts;
    next_pts_ = pts + 1;
  } else {
    out->pts = next_pts_++;
  }
  out->time_base = ctx_->time_base;
  return out;
}

FramePtr Encoder::Impl::audio_frame(int samples) const {
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

std::string Encoder::Impl::audio_params(int format, int rate, int channels) {
  return sample_fmt_name(format) + " at " + std::to_string(rate) + " Hz with " +
         std::to_string(channels) + " channel" + (channels == 1 ? "" : "s");
}

void Encoder::Impl::add_audio(const AVFrame* f, Packets& out) {
  const int channels = f->ch_layout.nb_channels;
  if (in_format_ < 0) {
    if (f->format != ctx_->sample_fmt || f->sample_rate != ctx_->sample_rate ||
        channels != ctx_->ch_layout.nb_channels) {
      open_resampler(f);
    }
    in_format_ = f->format;
    in_rate_ = f->sample_rate;
    in_channels_ = channels;
  } else if (f->format != in_format_ || f->sample_rate != in_rate_ ||
             channels != in_channels_) {
    throw InvalidArgument(
        label_ + ": audio parameters changed within the stream: " +
        audio_params(in_format_, in_rate_, in_channels_) + ", then " +
        audio_params(f->format, f->sample_rate, channels));
  }
  if (swr_) {
    resampled_in_ += f->nb_samples;
    resample(f, out);
  } else {
    add_encoder_audio(f, out);
  }
}

void Encoder::Impl::open_resampler(const AVFrame* f) {
  AVChannelLayout in_layout = known_layout(f->ch_layout);
  SwrContext* swr = nullptr;
  int rc = swr_alloc_set_opts2(&swr, layout_arg(&ctx_->ch_layout),
                               ctx_->sample_fmt, ctx_->sample_rate, &in_layout,
                               static_cast<AVSampleFormat>(f->format),
                               f->sample_rate, 0, nullptr);
  av_channel_layout_uninit(&in_layout);
  swr_.reset(swr);
  if (rc >= 0) rc = swr_init(swr);
  if (rc < 0) {
    swr_.reset();
    throw InvalidArgument(
        label_ + ": cannot convert " +
        audio_params(f->format, f->sample_rate, f->ch_layout.nb_channels) +
        " to the encoder's " +
        audio_params(ctx_->sample_fmt, ctx_->sample_rate,
                     ctx_->ch_layout.nb_channels) +
        ": " + av_error_text(rc));
  }
}

void Encoder::Impl::resample(const AVFrame* f, Packets& out, int64_t limit) {
  const int in_samples = f != nullptr ? f->nb_samples : 0;
  const int capacity = swr_get_out_samples(swr_.get(), in_samples);
  if (capacity <= 0) return;
  FramePtr c = audio_frame(capacity);
  int n = swr_convert(
      swr_.get(), c->extended_data, capacity,
      f != nullptr ? const_cast<const uint8_t**>(f->extended_data) : nullptr,
      in_samples);
  if (n < 0) fail(label_, "sample conversion failed", n);
  if (limit >= 0)
    n = static_cast<int>(std::min<int64_t>(n, limit - resampled_out_));
  if (n <= 0) return;
  c->nb_samples = n;
  resampled_out_ += n;
  add_encoder_audio(c.get(), out);
}

void Encoder::Impl::drain_resampler(Packets& out) {
  // The length the input makes at the encoder's rate.
  const int64_t want = av_rescale_rnd(resampled_in_, ctx_->sample_rate,
                                      in_rate_, AV_ROUND_NEAR_INF);
  resample(nullptr, out, want);
  // An input shorter than the resampler's filter stays inside it: push it
  // out with silence (see resampler_padding).
  for (int i = 0; i < 4 && resampled_out_ < want; ++i) {
    FramePtr silence =
        resampler_padding(swr_.get(), in_format_, in_rate_, in_channels_,
                          ctx_->sample_rate, want - resampled_out_);
    resample(silence.get(), out, want);
  }
}

void Encoder::Impl::add_encoder_audio(const AVFrame* f, Packets& out) {
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

void Encoder::Impl::send(FramePtr f, Packets& out) {
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

void Encoder::Impl::receive(Packets& out) {
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

}  // namespace feedline::media
