// SPDX-License-Identifier: Apache-2.0
//
// Frames to Buffers, and the one-call loaders. The fast video path converts
// each decoded frame with libswscale straight into its slot of the output
// (no intermediate frame, no filter graph), using the colour matrix and range
// FFmpeg's scale filter would use, so the pixels equal the ffmpeg CLI's.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "feedline/base/cpus.h"
#include "media/ffmpeg/ffmpeg.h"

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

namespace {

struct FrameLayout {
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;  // of one frame (video) or the whole (audio)
  std::size_t bytes = 0;       // of one frame (video)
  bool swap16 = false;         // big-endian 16-bit samples
};

FrameLayout video_layout(const AVFrame* f) {
  const auto fmt = static_cast<AVPixelFormat>(f->format);
  const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(fmt);
  const std::string name = pix_fmt_name(f->format);
  if (d == nullptr ||
      (d->flags & (AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_BITSTREAM |
                   AV_PIX_FMT_FLAG_PAL)) != 0) {
    throw InvalidArgument("cannot convert frames of pixel format " + name +
                          " to an array; convert them first (e.g. "
                          "format=pix_fmts=rgb24)");
  }
  const int64_t w = f->width;
  const int64_t h = f->height;
  FrameLayout l;
  const int n = d->nb_components;
  const bool planar = (d->flags & AV_PIX_FMT_FLAG_PLANAR) != 0;
  const int depth = d->comp[0].depth;
  bool ok = true;
  for (int i = 0; i < n; ++i) ok &= d->comp[i].depth == depth;
  if (ok && !planar && depth == 8 && d->comp[0].step == n) {
    l.shape = {h, w, n};  // rgb24, bgr24, rgba, gray, ...
  } else if (ok && n == 1 && depth > 8 && depth <= 16 && d->comp[0].step == 2) {
    l.dtype = DType::kUint16;  // gray16, gray10, ...
    l.shape = {1, h, w};
    l.swap16 = (d->flags & AV_PIX_FMT_FLAG_BE) != 0;
  } else if (ok && planar && depth == 8 && d->log2_chroma_w == 0 &&
             d->log2_chroma_h == 0) {
    l.shape = {n, h, w};  // yuv444p, gbrp, yuva444p
  } else if (ok && depth == 8 &&
             (fmt == AV_PIX_FMT_YUV420P || fmt == AV_PIX_FMT_YUVJ420P ||
              fmt == AV_PIX_FMT_NV12)) {
    l.shape = {1, h + h / 2, w};
  } else if (ok && depth == 8 &&
             (fmt == AV_PIX_FMT_YUV422P || fmt == AV_PIX_FMT_YUVJ422P)) {
    l.shape = {1, 2 * h, w};
  } else {
    throw InvalidArgument("cannot convert frames of pixel format " + name +
                          " to an array; convert them first (e.g. "
                          "format=pix_fmts=rgb24)");
  }
  const int size = av_image_get_buffer_size(fmt, f->width, f->height, 1);
  int64_t elems = 1;
  for (int64_t s : l.shape) elems *= s;
  if (size < 0 || static_cast<std::size_t>(size) !=
                      static_cast<std::size_t>(elems) * dtype_size(l.dtype)) {
    throw InvalidArgument("cannot pack " + name + " frames of odd size " +
                          std::to_string(w) + "x" + std::to_string(h) +
                          " into one array; convert them first (e.g. "
                          "format=pix_fmts=rgb24)");
  }
  l.bytes = static_cast<std::size_t>(size);
  return l;
}

void copy_video_frame(const AVFrame* f, const FrameLayout& l, uint8_t* dst) {
  const int rc = av_image_copy_to_buffer(
      dst, static_cast<int>(l.bytes), f->data, f->linesize,
      static_cast<AVPixelFormat>(f->format), f->width, f->height, 1);
  if (rc < 0) fail("convert_frames", "cannot copy a frame", rc);
  if (l.swap16) {
    for (std::size_t i = 0; i + 1 < l.bytes; i += 2)
      std::swap(dst[i], dst[i + 1]);
  }
}

// Shape and checks shared by one Frames and a batch.
FrameLayout layout_of(const Frames& frames) {
  frames.check();
  if (frames.empty()) throw InvalidArgument("no frame to convert");
  const AVFrame* first = frames.frames()[0];
  FrameLayout l;
  if (frames.media() == Media::kAudio) {
    const auto fmt = static_cast<AVSampleFormat>(first->format);
    l.dtype = sample_dtype(fmt);
    const int64_t c = first->ch_layout.nb_channels;
    for (const AVFrame* f : frames.frames()) {
      if (f->format != first->format || f->ch_layout.nb_channels != c ||
          f->sample_rate != first->sample_rate) {
        throw InvalidArgument(
            "audio frames differ in sample format, rate or channels");
      }
    }
    const int64_t n = frames.num_frames();
    l.shape = av_sample_fmt_is_planar(fmt) != 0 ? std::vector<int64_t>{c, n}
                                                : std::vector<int64_t>{n, c};
    return l;
  }
  l = video_layout(first);
  for (const AVFrame* f : frames.frames()) {
    if (f->format != first->format || f->width != first->width ||
        f->height != first->height) {
      throw InvalidArgument(
          "frames differ in size or pixel format: " +
          std::to_string(first->width) + "x" + std::to_string(first->height) +
          " " + pix_fmt_name(first->format) + " and " +
          std::to_string(f->width) + "x" + std::to_string(f->height) + " " +
          pix_fmt_name(f->format));
    }
  }
  if (frames.media() == Media::kVideo)
    l.shape.insert(l.shape.begin(),
                   static_cast<int64_t>(frames.num_av_frames()));
  return l;
}

std::size_t shape_bytes(const FrameLayout& l) {
  int64_t n = 1;
  for (int64_t s : l.shape) n *= s;
  return static_cast<std::size_t>(n) * dtype_size(l.dtype);
}

void write_frames(const Frames& frames, uint8_t* dst) {
  if (frames.media() != Media::kAudio) {
    const FrameLayout one = video_layout(frames.frames()[0]);
    for (const AVFrame* f : frames.frames()) {
      copy_video_frame(f, one, dst);
      dst += one.bytes;
    }
    return;
  }
  const AVFrame* first = frames.frames()[0];
  const auto fmt = static_cast<AVSampleFormat>(first->format);
  const std::size_t bps =
      static_cast<std::size_t>(av_get_bytes_per_sample(fmt));
  const int channels = first->ch_layout.nb_channels;
  if (av_sample_fmt_is_planar(fmt) != 0) {
    const auto total = static_cast<std::size_t>(frames.num_frames());
    std::size_t at = 0;
    for (const AVFrame* f : frames.frames()) {
      const std::size_t bytes = static_cast<std::size_t>(f->nb_samples) * bps;
      for (int c = 0; c < channels; ++c) {
        if (bytes > 0) {
          std::memcpy(dst + (static_cast<std::size_t>(c) * total + at) * bps,
                      f->extended_data[c], bytes);
        }
      }
      at += static_cast<std::size_t>(f->nb_samples);
    }
  } else {
    for (const AVFrame* f : frames.frames()) {
      const std::size_t bytes =
          static_cast<std::size_t>(f->nb_samples) * bps * channels;
      if (bytes > 0) std::memcpy(dst, f->data[0], bytes);
      dst += bytes;
    }
  }
}

}  // namespace

DType ffmpeg::sample_dtype(AVSampleFormat fmt) {
  switch (av_get_packed_sample_fmt(fmt)) {
    case AV_SAMPLE_FMT_U8:
      return DType::kUint8;
    case AV_SAMPLE_FMT_S16:
      return DType::kInt16;
    case AV_SAMPLE_FMT_S32:
      return DType::kInt32;
    case AV_SAMPLE_FMT_S64:
      return DType::kInt64;
    case AV_SAMPLE_FMT_FLT:
      return DType::kFloat32;
    case AV_SAMPLE_FMT_DBL:
      return DType::kFloat64;
    default:
      throw InvalidArgument("cannot convert audio of sample format " +
                            sample_fmt_name(fmt) + " to an array");
  }
}

Buffer convert_frames(Frames&& frames) {
  const FrameLayout l = layout_of(frames);
  Buffer out = Buffer::allocate(l.dtype, l.shape);
  write_frames(frames, out.data_as<uint8_t>());
  frames.take();
  return out;
}

Buffer convert_frames(std::vector<Frames*> batch) {
  if (batch.empty()) throw InvalidArgument("no frame to convert");
  const FrameLayout l = layout_of(*batch[0]);
  for (Frames* f : batch) {
    if (f->media() != batch[0]->media())
      throw InvalidArgument("a batch mixes audio, video and images");
    const FrameLayout other = layout_of(*f);
    if (other.shape != l.shape || other.dtype != l.dtype) {
      throw InvalidArgument(
          "frames of a batch must have one shape: the number of frames, "
          "size, format and channels must agree");
    }
  }
  std::vector<int64_t> shape = l.shape;
  shape.insert(shape.begin(), static_cast<int64_t>(batch.size()));
  Buffer out = Buffer::allocate(l.dtype, shape);
  auto* dst = out.data_as<uint8_t>();
  const std::size_t each = shape_bytes(l);
  for (Frames* f : batch) {
    write_frames(*f, dst);
    dst += each;
  }
  for (Frames* f : batch) f->take();
  return out;
}

namespace {

// A frame's colour space and range, as ints within their enums: a decoder
// copies these from the bitstream, so a hostile stream can leave values no
// enumerator has, and loading such a value through the enum type is
// undefined behaviour. The bytes are read as an int instead, and a value out
// of range counts as unspecified (the same as the scale filter's default).
static_assert(sizeof(AVColorSpace) == sizeof(int) &&
              sizeof(AVColorRange) == sizeof(int));
int enum_value(const void* field, int count, int unspecified) {
  int v = 0;
  std::memcpy(&v, field, sizeof(v));
  return v >= 0 && v < count ? v : unspecified;
}
int colorspace_of(const AVFrame* f) {
  return enum_value(&f->colorspace, AVCOL_SPC_NB, AVCOL_SPC_UNSPECIFIED);
}
int range_of(const AVFrame* f) {
  return enum_value(&f->color_range, AVCOL_RANGE_NB, AVCOL_RANGE_UNSPECIFIED);
}

AVPixelFormat fast_format(const std::string& pix_fmt);

// A filter chain that only scales (stretching, or fitting and padding with
// black) and converts to a format the writer takes, as
// get_video_filter_desc writes it:
//   scale=w=W:h=H:flags=F,format=pix_fmts=P
//   scale=w=W:h=H:flags=F:force_original_aspect_ratio=decrease,
//     pad=w=W:h=H:x=-1:y=-1:color=black,format=pix_fmts=P
// The writer does it with one swscale call per frame, straight into the
// output, with the scale filter's sizes, offsets and flags.
struct FastScale {
  int width = 0;
  int height = 0;
  bool pad = false;
  int flags = SWS_BICUBIC;
  AVPixelFormat format = AV_PIX_FMT_NONE;
};

std::optional<int> sws_flag(const std::string& name) {
  static const std::pair<const char*, int> kFlags[] = {
      {"fast_bilinear", SWS_FAST_BILINEAR},
      {"bilinear", SWS_BILINEAR},
      {"bicubic", SWS_BICUBIC},
      {"neighbor", SWS_POINT},
      {"area", SWS_AREA},
      {"bicublin", SWS_BICUBLIN},
      {"gauss", SWS_GAUSS},
      {"sinc", SWS_SINC},
      {"lanczos", SWS_LANCZOS},
      {"spline", SWS_SPLINE}};
  for (const auto& [n, f] : kFlags) {
    if (name == n) return f;
  }
  return std::nullopt;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::optional<int> positive(const std::string& text) {
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int v = std::stoi(text);
  return v > 0 ? std::optional<int>(v) : std::nullopt;
}

std::optional<FastScale> fast_scale_of(const std::string& desc) {
  const std::vector<std::string> parts = split(desc, ',');
  if (parts.size() != 2 && parts.size() != 3) return std::nullopt;
  const std::vector<std::string> scale = split(parts[0], ':');
  const bool pad = parts.size() == 3;
  if (scale.size() != (pad ? 4u : 3u) || scale[0].rfind("scale=w=", 0) != 0 ||
      scale[1].rfind("h=", 0) != 0 || scale[2].rfind("flags=", 0) != 0) {
    return std::nullopt;
  }
  FastScale f;
  f.pad = pad;
  const auto w = positive(scale[0].substr(8));
  const auto h = positive(scale[1].substr(2));
  const auto flags = sws_flag(scale[2].substr(6));
  if (!w || !h || !flags) return std::nullopt;
  f.width = *w;
  f.height = *h;
  f.flags = *flags;
  if (pad) {
    const std::string size =
        "w=" + std::to_string(f.width) + ":h=" + std::to_string(f.height);
    if (scale[3] != "force_original_aspect_ratio=decrease" ||
        parts[1] != "pad=" + size + ":x=-1:y=-1:color=black") {
      return std::nullopt;
    }
  }
  const std::string& format = parts.back();
  if (format.rfind("format=pix_fmts=", 0) != 0) return std::nullopt;
  try {
    f.format = fast_format(format.substr(16));
  } catch (const InvalidArgument&) {
    return std::nullopt;
  }
  // Gray is padded in the filter graph's YUV (black is 16 there).
  if (f.format == AV_PIX_FMT_GRAY8) return std::nullopt;
  return f;
}

// Writes decoded frames, converted (and scaled, with a FastScale) with
// libswscale, straight into a growing (N, H, W, C) buffer.
class FrameWriter {
 public:
  FrameWriter(AVPixelFormat format, int64_t expected, std::string_view name,
              std::optional<FastScale> scale = std::nullopt)
      : format_(format),
        expected_(std::max<int64_t>(expected, 1)),
        name_(name),
        scale_(scale) {
    channels_ = av_pix_fmt_desc_get(format)->nb_components;
  }

  void add(const AVFrame* f) {
    if (scale_) {
      add_scaled(f);
      return;
    }
    if (count_ == 0) {
      width_ = f->width;
      height_ = f->height;
      frame_bytes_ = static_cast<std::size_t>(width_) * height_ * channels_;
      reserve(expected_);
    } else if (f->width != width_ || f->height != height_) {
      throw DecodeError(std::string(name_) + ": the frame size changes from " +
                        std::to_string(width_) + "x" + std::to_string(height_) +
                        " to " + std::to_string(f->width) + "x" +
                        std::to_string(f->height) +
                        "; give a filter that scales to one size");
    }
    if (count_ == capacity_) reserve(capacity_ * 2);
    setup(f);
    const int rows = convert(f, out_.data_as<uint8_t>() + count_ * frame_bytes_,
                             width_ * channels_, width_, height_);
    if (rows != height_) {
      throw DecodeError(std::string(name_) +
                        ": pixel format conversion failed");
    }
    ++count_;
  }

  int64_t count() const { return count_; }

  Buffer finish(bool image) {
    if (count_ == 0) return Buffer();
    std::vector<int64_t> shape = {count_, height_, width_, channels_};
    if (image) shape.erase(shape.begin());
    return Buffer::view(out_.owner(), out_.data(), DType::kUint8, shape);
  }

 private:
  // Where a row rounded up to whole blocks of 16 pixels fits its stride,
  // libswscale's x86 YUV-to-RGB converters write the whole blocks: up to
  // 60 bytes past the end of the row. Within the output that lands on the
  // next row, written after it; the last row of the last frame needs room
  // past the end.
  static constexpr int64_t kOverrun = 64;

  void reserve(int64_t n) {
    Buffer bigger = Buffer::allocate(
        DType::kUint8, {n * static_cast<int64_t>(frame_bytes_) + kOverrun});
    if (count_ > 0) {
      std::memcpy(bigger.data(), out_.data(),
                  static_cast<std::size_t>(count_) * frame_bytes_);
    }
    out_ = std::move(bigger);
    capacity_ = n;
  }

  // A frame scaled into its place in a (height, width) output of the
  // FastScale's size: the whole of it, or (fit and pad) the largest size
  // of the frame's aspect ratio that fits, centred on black, with the
  // sizes and offsets of FFmpeg's scale and pad filters.
  void add_scaled(const AVFrame* f) {
    if (count_ == 0) {
      width_ = scale_->width;
      height_ = scale_->height;
      frame_bytes_ = static_cast<std::size_t>(width_) * height_ * channels_;
      reserve(expected_);
    }
    if (count_ == capacity_) reserve(capacity_ * 2);
    if (f->width != src_width_ || f->height != src_height_) {
      src_width_ = f->width;
      src_height_ = f->height;
      scaled_width_ = width_;
      scaled_height_ = height_;
      if (scale_->pad) {
        const int tmp_w =
            static_cast<int>(av_rescale(height_, src_width_, src_height_));
        const int tmp_h =
            static_cast<int>(av_rescale(width_, src_height_, src_width_));
        scaled_width_ = std::max(1, std::min(tmp_w, width_));
        scaled_height_ = std::max(1, std::min(tmp_h, height_));
      }
      sws_.reset();
    }
    setup(f, scaled_width_, scaled_height_, scale_->flags);
    uint8_t* frame = out_.data_as<uint8_t>() + count_ * frame_bytes_;
    const int x = (width_ - scaled_width_) / 2;
    const int y = (height_ - scaled_height_) / 2;
    if (scaled_width_ != width_ || scaled_height_ != height_)
      fill_black(frame, static_cast<std::size_t>(width_) * height_);
    const int rows =
        convert(f,
                frame + (static_cast<std::size_t>(y) * width_ + x) *
                            static_cast<std::size_t>(channels_),
                width_ * channels_, scaled_width_, scaled_height_);
    if (rows != scaled_height_) {
      throw DecodeError(std::string(name_) + ": scaling failed");
    }
    if (scaled_width_ != width_ || scaled_height_ != height_)
      clear_padding(frame, x, y);
    ++count_;
  }

  // Converts `f` into `rows` rows of `width` pixels at `dst`, `stride`
  // bytes apart; returns the rows written. libswscale's x86 YUV-to-RGB
  // converters work on blocks of pixels: where a row rounded up to whole
  // blocks does not fit the stride, they leave the last pixels of each row
  // unwritten. Such rows go through a scratch image with room for whole
  // blocks of 16 pixels, and are copied out.
  int convert(const AVFrame* f, uint8_t* dst, int stride, int width, int rows) {
    const int row_bytes = width * channels_;
    const int padded = FFALIGN(width, 16) * channels_;
    if (padded <= stride) {
      uint8_t* planes[4] = {dst, nullptr, nullptr, nullptr};
      int strides[4] = {stride, 0, 0, 0};
      return sws_scale(sws_.get(), f->data, f->linesize, 0, f->height, planes,
                       strides);
    }
    const std::size_t need = static_cast<std::size_t>(padded) * rows + kOverrun;
    if (scratch_.size() < need) scratch_.resize(need);
    uint8_t* planes[4] = {scratch_.data(), nullptr, nullptr, nullptr};
    int strides[4] = {padded, 0, 0, 0};
    const int written = sws_scale(sws_.get(), f->data, f->linesize, 0,
                                  f->height, planes, strides);
    for (int r = 0; r < std::min(written, rows); ++r) {
      std::memcpy(dst + static_cast<std::size_t>(r) * stride,
                  scratch_.data() + static_cast<std::size_t>(r) * padded,
                  static_cast<std::size_t>(row_bytes));
    }
    return written;
  }

  // `pixels` black pixels from `at`: zeros, with an opaque alpha (byte 3
  // of rgba and bgra), as the pad filter paints.
  void fill_black(uint8_t* at, std::size_t pixels) const {
    std::memset(at, 0, pixels * static_cast<std::size_t>(channels_));
    if (channels_ == 4) {
      for (std::size_t i = 0; i < pixels; ++i) at[i * 4 + 3] = 255;
    }
  }

  // Black again where the converter wrote past the image's rows (see
  // kOverrun): the columns right and left of it, and the rows below.
  void clear_padding(uint8_t* frame, int x, int y) const {
    const auto c = static_cast<std::size_t>(channels_);
    const auto w = static_cast<std::size_t>(width_);
    for (int r = y; r < y + scaled_height_; ++r) {
      uint8_t* line = frame + static_cast<std::size_t>(r) * w * c;
      fill_black(line, static_cast<std::size_t>(x));
      const std::size_t right =
          static_cast<std::size_t>(x) + static_cast<std::size_t>(scaled_width_);
      fill_black(line + right * c, w - right);
    }
    const int below = y + scaled_height_;
    fill_black(frame + static_cast<std::size_t>(below) * w * c,
               static_cast<std::size_t>(height_ - below) * w);
  }

  // The converter, with the colour matrix and range FFmpeg's scale filter
  // takes from the frame.
  void setup(const AVFrame* f) { setup(f, width_, height_, SWS_BICUBIC); }
  void setup(const AVFrame* f, int out_width, int out_height, int flags) {
    const int colorspace = colorspace_of(f);
    const int range = range_of(f);
    if (sws_ && f->format == src_format_ && colorspace == colorspace_ &&
        range == range_) {
      return;
    }
    sws_.reset(sws_getContext(
        f->width, f->height, static_cast<AVPixelFormat>(f->format), out_width,
        out_height, format_, flags, nullptr, nullptr, nullptr));
    if (!sws_) {
      throw DecodeError(std::string(name_) + ": cannot convert " +
                        pix_fmt_name(f->format) + " to " +
                        pix_fmt_name(format_));
    }
    int* inv_table = nullptr;
    int* table = nullptr;
    int src_range = 0;
    int dst_range = 0;
    int brightness = 0;
    int contrast = 0;
    int saturation = 0;
    if (sws_getColorspaceDetails(sws_.get(), &inv_table, &src_range, &table,
                                 &dst_range, &brightness, &contrast,
                                 &saturation) >= 0) {
      const int* coefficients = sws_getCoefficients(colorspace);
      if (range != AVCOL_RANGE_UNSPECIFIED)
        src_range = range == AVCOL_RANGE_JPEG ? 1 : 0;
      sws_setColorspaceDetails(sws_.get(), coefficients, src_range, table,
                               dst_range, brightness, contrast, saturation);
    }
    src_format_ = f->format;
    colorspace_ = colorspace;
    range_ = range;
  }

  AVPixelFormat format_;
  int64_t expected_;
  std::string_view name_;
  int channels_ = 3;
  int width_ = 0;
  int height_ = 0;
  std::size_t frame_bytes_ = 0;
  int64_t count_ = 0;
  int64_t capacity_ = 0;
  Buffer out_;
  std::optional<FastScale> scale_;
  int src_width_ = 0;
  int src_height_ = 0;
  int scaled_width_ = 0;
  int scaled_height_ = 0;
  SwsPtr sws_;
  std::vector<uint8_t> scratch_;
  int src_format_ = -1;
  int colorspace_ = AVCOL_SPC_UNSPECIFIED;
  int range_ = AVCOL_RANGE_UNSPECIFIED;
};

AVPixelFormat fast_format(const std::string& pix_fmt) {
  if (pix_fmt == "rgb24") return AV_PIX_FMT_RGB24;
  if (pix_fmt == "bgr24") return AV_PIX_FMT_BGR24;
  if (pix_fmt == "rgba") return AV_PIX_FMT_RGBA;
  if (pix_fmt == "bgra") return AV_PIX_FMT_BGRA;
  if (pix_fmt == "gray" || pix_fmt == "gray8") return AV_PIX_FMT_GRAY8;
  throw InvalidArgument(
      "pix_fmt must be rgb24, bgr24, rgba, bgra or gray; got '" + pix_fmt +
      "' (use a filter for other formats)");
}

// Throws DecodeError when the packets' window ends past the end of the
// stream (the clip would be short).
void check_whole(const Packets& packets, const std::string& src) {
  const auto& window = packets.window();
  const auto end_ts = packets.stream_end();
  if (!window || !window->end || !end_ts) return;
  const AVRational tb = to_av(packets.time_base());
  if (!before(*end_ts, tb, *window->end)) return;
  throw DecodeError(
      src + ": the window [" + std::to_string(window->start.to_double()) +
      ", " + std::to_string(window->end->to_double()) +
      ") s extends past the end of the stream at " +
      std::to_string(seconds(*end_ts, tb)) + " s: the clip would be short");
}

// The load() calls in progress in this process, for the decoder thread
// policy of DecodeConfig::kAutoThreads.
std::atomic<int> loads_in_flight{0};

struct InFlight {
  int count = loads_in_flight.fetch_add(1) + 1;
  InFlight() = default;
  ~InFlight() { loads_in_flight.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};

Buffer load(Media media, Source source, const VideoOptions& options,
            std::string name) {
  const InFlight in_flight;
  VideoOptions o = options;
  o.decode =
      resolve_decoder_threads(o.decode, !o.window && media == Media::kVideo,
                              in_flight.count, usable_cpus());
  Demuxer demuxer(std::move(source), o.demux, std::move(name));
  const std::string& src = demuxer.name();
  std::unique_ptr<Packets> packets =
      demuxer.demux(media, media == Media::kImage ? std::nullopt : o.window);
  if (o.whole_window && media == Media::kVideo) check_whole(*packets, src);
  const std::optional<FastScale> scale =
      o.filter_desc ? fast_scale_of(*o.filter_desc) : std::nullopt;
  if (o.filter_desc && !scale) {
    std::unique_ptr<Frames> frames = decode_packets(
        std::move(*packets), o.filter_desc, o.decode, o.max_frames);
    if (frames->empty()) {
      throw DecodeError(src + ": no frame in the window");
    }
    return convert_frames(std::move(*frames));
  }
  const AVPixelFormat format = scale ? scale->format : fast_format(o.pix_fmt);
  const Codec codec = packets->require_codec();
  DecodeSession session(codec, std::nullopt, o.decode, src);
  session.set_window(packets->window());
  if (o.max_frames && *o.max_frames <= 0) {
    throw InvalidArgument("max_frames must be > 0 (got " +
                          std::to_string(*o.max_frames) +
                          "); leave it out for all");
  }
  const int64_t limit = media == Media::kImage ? 1 : o.max_frames.value_or(0);
  int64_t expected = static_cast<int64_t>(packets->size());
  if (limit > 0) expected = std::min(expected, limit);
  FrameWriter writer(format, expected, src, scale);
  DecodeSession::Sink sink = [&](AVFrame* f, AVRational) {
    writer.add(f);
    return limit <= 0 || writer.count() < limit;
  };
  send_window(session, *packets, /*skip=*/true, sink);
  const auto& window = packets->window();
  session.errors().report(src, writer.count() > 0);
  if (writer.count() == 0) {
    if (window) {
      throw DecodeError(src + ": no frame in the window [" +
                        std::to_string(window->start.to_double()) + ", " +
                        (window->end ? std::to_string(window->end->to_double())
                                     : std::string("end")) +
                        ") s (the stream lasts " +
                        std::to_string(demuxer.duration()) + " s)");
    }
    throw DecodeError(src + ": no frame decoded");
  }
  return writer.finish(media == Media::kImage);
}

}  // namespace

DecodeConfig resolve_decoder_threads(DecodeConfig config, bool whole_clip,
                                     int in_flight, int cpus) {
  if (config.threads != DecodeConfig::kAutoThreads) return config;
  config.threads = whole_clip ? std::max(1, cpus / std::max(1, in_flight)) : 1;
  return config;
}

Buffer load_video(Source source, const VideoOptions& options,
                  std::string name) {
  return load(Media::kVideo, std::move(source), options, std::move(name));
}

Buffer load_image_ffmpeg(Source source, const VideoOptions& options,
                         std::string name) {
  return load(Media::kImage, std::move(source), options, std::move(name));
}

}  // namespace feedline::media
