// SPDX-License-Identifier: Apache-2.0
//
// Frames from arrays, and encode_image (feedline/media/encode.h).

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "media/codecs.h"
#include "media/ffmpeg/encoding.h"

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
      // 16-bit grey: uint16, or int16 (SPDL's dtype) taken as the same bits.
      const bool dtype_ok =
          f == AV_PIX_FMT_GRAY8
              ? a.dtype() == DType::kUint8
              : (a.dtype() == DType::kUint16 || a.dtype() == DType::kInt16);
      const bool shape_ok = s.size() == 3 || (s.size() == 4 && s[3] == 1);
      if (!dtype_ok || !shape_ok) {
        bad_array(name, a,
                  f == AV_PIX_FMT_GRAY8 ? "uint8 (N, H, W)"
                                        : "uint16 or int16 (N, H, W)");
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

// --- encode_image ---

namespace {

// The format an image of `in_fmt` is encoded in: `in_fmt` when the encoder
// takes it; else the first it takes that keeps what the input has (its
// alpha, its 16-bit samples, RGB before a conversion to YUV, grey before
// colour, full-range YUV before limited: FFmpeg's JPEG encoder refuses
// limited range). An input whose alpha or 16-bit depth no format keeps is
// refused: dropping either silently would give another image back.
AVPixelFormat image_encoder_format(AVPixelFormat in_fmt,
                                   const EncoderSupport& s,
                                   const std::string& label) {
  auto takes = [&](AVPixelFormat f) {
    return s.pix_fmts.empty() || std::find(s.pix_fmts.begin(), s.pix_fmts.end(),
                                           f) != s.pix_fmts.end();
  };
  // Limited-range YUV as the full-range kind where the encoder takes that
  // (JPEG): swscale widens the range.
  const AVPixelFormat full = in_fmt == AV_PIX_FMT_YUV444P ? AV_PIX_FMT_YUVJ444P
                             : in_fmt == AV_PIX_FMT_YUV420P
                                 ? AV_PIX_FMT_YUVJ420P
                                 : AV_PIX_FMT_NONE;
  if (full != AV_PIX_FMT_NONE && !s.pix_fmts.empty() && takes(full))
    return full;
  if (takes(in_fmt)) return in_fmt;
  std::vector<AVPixelFormat> order;
  const char* lost = nullptr;
  switch (in_fmt) {
    case AV_PIX_FMT_RGBA:
    case AV_PIX_FMT_BGRA:
    case AV_PIX_FMT_ARGB:
    case AV_PIX_FMT_ABGR:
      order = {AV_PIX_FMT_RGBA, AV_PIX_FMT_BGRA,     AV_PIX_FMT_ARGB,
               AV_PIX_FMT_ABGR, AV_PIX_FMT_YUVA444P, AV_PIX_FMT_YUVA420P};
      lost = "an alpha channel (give the colour alone, pix_fmt=\"rgb24\")";
      break;
    case AV_PIX_FMT_GRAY16LE:
    case AV_PIX_FMT_GRAY16BE:
      order = {AV_PIX_FMT_GRAY16LE, AV_PIX_FMT_GRAY16BE, AV_PIX_FMT_RGB48LE,
               AV_PIX_FMT_RGB48BE};
      lost = "16-bit samples (give uint8 grey, pix_fmt=\"gray8\")";
      break;
    case AV_PIX_FMT_GRAY8:
      order = {AV_PIX_FMT_GRAY8,  AV_PIX_FMT_YUVJ444P, AV_PIX_FMT_YUVJ420P,
               AV_PIX_FMT_RGB24,  AV_PIX_FMT_BGR24,    AV_PIX_FMT_GBRP,
               AV_PIX_FMT_RGBA,   AV_PIX_FMT_BGRA,     AV_PIX_FMT_YUV444P,
               AV_PIX_FMT_YUV420P};
      break;
    case AV_PIX_FMT_YUV444P:
    case AV_PIX_FMT_YUV420P:
      order = {in_fmt,
               AV_PIX_FMT_YUV444P,
               AV_PIX_FMT_YUVJ444P,
               AV_PIX_FMT_RGB24,
               AV_PIX_FMT_BGR24,
               AV_PIX_FMT_GBRP,
               AV_PIX_FMT_RGBA,
               AV_PIX_FMT_BGRA,
               AV_PIX_FMT_YUVJ420P,
               AV_PIX_FMT_YUV420P};
      break;
    default:  // rgb24, bgr24, gbrp
      order = {AV_PIX_FMT_RGB24,    AV_PIX_FMT_BGR24,    AV_PIX_FMT_GBRP,
               AV_PIX_FMT_RGBA,     AV_PIX_FMT_BGRA,     AV_PIX_FMT_ARGB,
               AV_PIX_FMT_ABGR,     AV_PIX_FMT_YUVJ444P, AV_PIX_FMT_YUV444P,
               AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUV420P};
      break;
  }
  for (AVPixelFormat f : order) {
    if (takes(f)) return f;
  }
  if (lost != nullptr) {
    std::string takes_text;
    for (int f : s.pix_fmts)
      takes_text += (takes_text.empty() ? "" : ", ") + pix_fmt_name(f);
    throw InvalidArgument(label + ": the format keeps no " + lost +
                          "; its encoder takes " + takes_text);
  }
  return static_cast<AVPixelFormat>(s.pix_fmts.front());
}

}  // namespace

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
  // -1 leaves either to the encoder.
  const bool webp = std::strcmp(name, "libwebp") == 0;
  if (options.quality < -1 || (webp && options.quality > 100)) {
    throw InvalidArgument(label + ": quality " +
                          std::to_string(options.quality) +
                          " is out of range (JPEG 2 to 31, WebP 0 to 100)");
  }
  const int max_level = std::strcmp(name, "png") == 0 ? 9 : webp ? 6 : INT_MAX;
  if (options.compression_level < -1 || options.compression_level > max_level) {
    throw InvalidArgument(label + ": compression_level " +
                          std::to_string(options.compression_level) +
                          " is out of range (PNG 0 to 9, WebP 0 to 6)");
  }
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
    throw InvalidArgument(
        label + ": one image of pix_fmt \"" + options.pix_fmt + "\" is " +
        (gray ? "(H, W) or (H, W, 1)"
              : "one frame, a video's (N, ...) layout without N") +
        ", got shape " + shape_text(array.shape()) + " (" +
        std::to_string(l.frames) + " images)");
  }
  if (std::strcmp(name, "png") == 0 && options.quality < 0 &&
      !options.lossless && options.compression_level <= 9) {
    // feedline's own writer (media/png_write.cc): the same Paeth filter
    // as FFmpeg's PNG encoder, vectorised, and libdeflate.
    int channels = 0;
    int depth = 8;
    switch (in_fmt) {
      case AV_PIX_FMT_RGB24:
        channels = 3;
        break;
      case AV_PIX_FMT_RGBA:
        channels = 4;
        break;
      case AV_PIX_FMT_GRAY8:
        channels = 1;
        break;
      case AV_PIX_FMT_GRAY16BE:
      case AV_PIX_FMT_GRAY16LE:
        channels = 1;
        depth = 16;
        break;
      default:
        break;
    }
    if (channels > 0) {
      auto png = std::make_shared<std::vector<uint8_t>>(write_png(
          one.data_as<const uint8_t>(), l.width, l.height, channels, depth,
          in_fmt == AV_PIX_FMT_GRAY16LE, options.compression_level));
      // The Buffer keeps the vector alive: no copy.
      return Buffer::view(png, png->data(), DType::kUint8,
                          {static_cast<int64_t>(png->size())});
    }
  }
  auto frames = frames_from_planes(one, in_fmt, l, Rational{1, 1}, 0);
  const AVPixelFormat fmt =
      image_encoder_format(in_fmt, encoder_support(codec), label);
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
