// SPDX-License-Identifier: Apache-2.0

#include "feedline/media/image.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "feedline/base/error.h"
#include "media/codecs.h"
#include "media/resample.h"

namespace feedline::media {
namespace {

// The longest side a resize may ask for (2^24 pixels): far past any image
// worth decoding, and well inside int.
constexpr int64_t kMaxScaledSide = int64_t{1} << 24;

// Where the output comes from: the image scaled to scaled_w x scaled_h, then
// the window at (x0, y0) of out_w x out_h.
// With padding, that window lands at (pad_x, pad_y) of a black canvas of
// canvas_w x canvas_h.
struct Plan {
  int scaled_w = 0;
  int scaled_h = 0;
  int x0 = 0;
  int y0 = 0;
  int out_w = 0;
  int out_h = 0;
  int pad_x = 0;
  int pad_y = 0;
  int canvas_w = 0;
  int canvas_h = 0;
  // A random resized crop: the box of the source image that becomes the
  // out_w x out_h output (box.width == 0: none).
  CropBox box;
  bool flip = false;
  unsigned denom = 1;  // the JPEG DCT scale denominator
};

// The larger or smaller of the two scale factors, applied to both sides.
void fit(int width, int height, int target_w, int target_h, bool cover,
         Plan* p) {
  double sx = static_cast<double>(target_w) / width;
  double sy = static_cast<double>(target_h) / height;
  double s = cover ? std::max(sx, sy) : std::min(sx, sy);
  p->scaled_w = std::max(1, static_cast<int>(std::lround(width * s)));
  p->scaled_h = std::max(1, static_cast<int>(std::lround(height * s)));
  if (cover) {
    p->scaled_w = std::max(p->scaled_w, target_w);
    p->scaled_h = std::max(p->scaled_h, target_h);
  } else {
    p->scaled_w = std::min(p->scaled_w, target_w);
    p->scaled_h = std::min(p->scaled_h, target_h);
  }
}

// The images a decode holds (the resized one and the output) are held to
// max_pixels, as the source is: a huge size asked for is an error, not an
// allocation that fails or exhausts memory.
void check_size(int64_t w, int64_t h, const ImageOptions& o,
                const std::string& what) {
  if (w * h > o.max_pixels) {
    throw InvalidArgument(what + " gives an image of " + std::to_string(w) +
                          " x " + std::to_string(h) +
                          " pixels, more than max_pixels (" +
                          std::to_string(o.max_pixels) + ")");
  }
}

Plan make_plan(int width, int height, const ImageOptions& o) {
  Plan p;
  if (o.random_resized_crop.width > 0) {
    // The box is drawn per image (augment()); the output size is fixed.
    p.scaled_w = p.out_w = p.canvas_w = o.random_resized_crop.width;
    p.scaled_h = p.out_h = p.canvas_h = o.random_resized_crop.height;
    return p;
  }
  p.scaled_w = width;
  p.scaled_h = height;
  if (o.resize_shorter > 0) {
    // As torchvision's Resize(int): the longer side is truncated.
    const int64_t s = o.resize_shorter;
    const int64_t longer =
        width <= height ? s * height / width : s * width / height;
    if (longer > kMaxScaledSide) {
      throw InvalidArgument(
          "resize_shorter=" + std::to_string(s) +
          " makes the longer side of a " + std::to_string(width) + "x" +
          std::to_string(height) + " image " + std::to_string(longer) +
          " pixels (at most " + std::to_string(kMaxScaledSide) + ")");
    }
    if (width <= height) {
      p.scaled_w = o.resize_shorter;
      p.scaled_h = static_cast<int>(std::max<int64_t>(1, longer));
    } else {
      p.scaled_h = o.resize_shorter;
      p.scaled_w = static_cast<int>(std::max<int64_t>(1, longer));
    }
  } else if (o.resize_width > 0) {
    if (o.resize_mode == ResizeMode::kStretch) {
      p.scaled_w = o.resize_width;
      p.scaled_h = o.resize_height;
    } else {
      fit(width, height, o.resize_width, o.resize_height,
          o.resize_mode == ResizeMode::kCrop, &p);
    }
  }
  p.out_w = p.scaled_w;
  p.out_h = p.scaled_h;
  if (o.resize_width > 0 && o.resize_mode == ResizeMode::kCrop) {
    p.out_w = o.resize_width;
    p.out_h = o.resize_height;
    p.x0 = (p.scaled_w - p.out_w) / 2;
    p.y0 = (p.scaled_h - p.out_h) / 2;
  }
  p.canvas_w = p.out_w;
  p.canvas_h = p.out_h;
  if (o.resize_width > 0 && o.resize_mode == ResizeMode::kPad) {
    p.canvas_w = o.resize_width;
    p.canvas_h = o.resize_height;
    p.pad_x = (p.canvas_w - p.out_w) / 2;
    p.pad_y = (p.canvas_h - p.out_h) / 2;
  }
  if (o.crop_width > 0) {
    if (o.crop_width > p.out_w || o.crop_height > p.out_h) {
      throw InvalidArgument(
          "crop " + std::to_string(o.crop_width) + "x" +
          std::to_string(o.crop_height) + " is larger than the resized image " +
          std::to_string(p.scaled_w) + "x" + std::to_string(p.scaled_h));
    }
    if (p.canvas_w != p.out_w || p.canvas_h != p.out_h) {
      throw InvalidArgument("a crop cannot follow a padded resize");
    }
    // As torchvision's CenterCrop: int(round(...)), half to even.
    p.x0 += static_cast<int>(std::nearbyint((p.out_w - o.crop_width) / 2.0));
    p.y0 += static_cast<int>(std::nearbyint((p.out_h - o.crop_height) / 2.0));
    p.out_w = p.canvas_w = o.crop_width;
    p.out_h = p.canvas_h = o.crop_height;
  }
  if (o.resize_shorter > 0) {
    check_size(p.scaled_w, p.scaled_h, o,
               "resize_shorter=" + std::to_string(o.resize_shorter) + " of a " +
                   std::to_string(width) + "x" + std::to_string(height) +
                   " image");
  } else if (o.resize_width > 0) {
    check_size(p.scaled_w, p.scaled_h, o,
               "resizing a " + std::to_string(width) + "x" +
                   std::to_string(height) + " image to " +
                   std::to_string(o.resize_width) + "x" +
                   std::to_string(o.resize_height));
  }
  return p;
}

int channels_of(const ImageOptions& o) {
  return o.pixel_format == PixelFormat::kGray ? 1 : 3;
}

std::vector<int64_t> shape_of(const Plan& p, const ImageOptions& o) {
  int64_t c = channels_of(o);
  if (o.layout == Layout::kCHW) return {c, p.canvas_h, p.canvas_w};
  return {p.canvas_h, p.canvas_w, c};
}

// Writes rows of floats in [0, 255] into the output buffer in its layout
// and dtype.
class OutputWriter final : public media::RowSink {
 public:
  OutputWriter(const ImageOptions& o, const Plan& p, void* out)
      : layout_(o.layout),
        float_(o.dtype == DType::kFloat32),
        channels_(channels_of(o)),
        w_(p.canvas_w),
        h_(p.canvas_h),
        row_w_(p.out_w),
        // A flipped image sits as far from the right as it did from the left.
        pad_x_(p.flip ? p.canvas_w - p.out_w - p.pad_x : p.pad_x),
        pad_y_(p.pad_y),
        out_(out) {
    for (int c = 0; c < 3; ++c) {
      scale_[c] = 1.f / (255.f * o.std[static_cast<std::size_t>(c)]);
      bias_[c] = -o.mean[static_cast<std::size_t>(c)] /
                 o.std[static_cast<std::size_t>(c)];
    }
    if (p.canvas_w != p.out_w || p.canvas_h != p.out_h) fill_black();
  }

  // `v`: the row's out_w pixels in output order (already mirrored when the
  // image is flipped).
  void row(int y, const float* v) override {
    y += pad_y_;
    const std::size_t plane =
        static_cast<std::size_t>(w_) * static_cast<std::size_t>(h_);
    const std::size_t row_start = static_cast<std::size_t>(y) * w_ + pad_x_;
    if (layout_ == Layout::kHWC) {
      const std::size_t n = static_cast<std::size_t>(row_w_) * channels_;
      const std::size_t at = row_start * channels_;
      if (float_) {
        float* dst = static_cast<float*>(out_) + at;
        for (std::size_t i = 0; i < n; ++i) {
          const int c = static_cast<int>(i % channels_);
          dst[i] = v[i] * scale_[c] + bias_[c];
        }
      } else {
        store_u8(v, n, 1, static_cast<uint8_t*>(out_) + at);
      }
      return;
    }
    if (float_ && channels_ == 3) {
      float* r = static_cast<float*>(out_) + row_start;
      float* const planes[3] = {r, r + plane, r + 2 * plane};
      media::store_planes3(v, row_w_, scale_, bias_, planes);
      return;
    }
    for (int c = 0; c < channels_; ++c) {
      const std::size_t at = c * plane + row_start;
      if (float_) {
        float* dst = static_cast<float*>(out_) + at;
        const float scale = scale_[c];
        const float bias = bias_[c];
        for (int x = 0; x < row_w_; ++x)
          dst[x] = v[x * channels_ + c] * scale + bias;
      } else {
        store_u8(v + c, static_cast<std::size_t>(row_w_), channels_,
                 static_cast<uint8_t*>(out_) + at);
      }
    }
  }

 private:
  // Rounds half up, as Pillow does; the filter's weights are non-negative,
  // so values lie in [0, 255] up to float error.
  // The contiguous case (step 1, every HWC row) is a loop of its own, which
  // the compiler vectorises.
  static void store_u8(const float* v, std::size_t n, int step, uint8_t* dst) {
    if (step == 1) {
      for (std::size_t i = 0; i < n; ++i)
        dst[i] = static_cast<uint8_t>(std::clamp(v[i] + 0.5f, 0.f, 255.f));
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      float f = v[i * static_cast<std::size_t>(step)] + 0.5f;
      dst[i] = static_cast<uint8_t>(std::clamp(f, 0.f, 255.f));
    }
  }

  // Pixel value 0 everywhere (the padding).
  void fill_black() {
    const std::size_t n = static_cast<std::size_t>(w_) * h_ * channels_;
    if (!float_) {
      std::memset(out_, 0, n);
      return;
    }
    float* f = static_cast<float*>(out_);
    for (std::size_t i = 0; i < n; ++i) {
      int c = layout_ == Layout::kHWC ? static_cast<int>(i % channels_)
                                      : static_cast<int>(i / (n / channels_));
      f[i] = bias_[c];
    }
  }

  const Layout layout_;
  const bool float_;
  const int channels_;
  const int w_;
  const int h_;
  const int row_w_;
  const int pad_x_;
  const int pad_y_;
  void* const out_;
  float scale_[3];
  float bias_[3];
};

// Whether the decoded pixels (width x height, true extent extent_w x
// extent_h) need resampling to give the plan's scaled image.
bool needs_resize(const Plan& plan, int width, int height, double extent_w,
                  double extent_h) {
  return plan.scaled_w != width || plan.scaled_h != height ||
         (extent_w > 0 && extent_w != width) ||
         (extent_h > 0 && extent_h != height);
}

// The largest libjpeg-turbo scale denominator whose decode still covers the
// output: for a resize, a decoded image at least scaled_w x scaled_h (libjpeg
// rounds a scaled side up: ceil(W / denom)); for a random crop, a box at
// least out_w x out_h in decoded pixels. Only 1/2, 1/4 and 1/8 are used:
// libjpeg-turbo's other reduced IDCTs (7/8, 3/4, 5/8) have no SIMD path and
// decode slower than full size does (measured on 500x375 photos: 3/4 takes
// 1.33 ms, full size 1.07 ms, 1/2 0.93 ms).
unsigned jpeg_scale_denom(int width, int height, const Plan& plan,
                          const ImageOptions& o) {
  const bool resize = o.resize_shorter > 0 || o.resize_width > 0;
  if (!o.dct_scaling || (!resize && plan.box.width == 0)) return 1;
  unsigned denom = 1;
  for (unsigned f : {2u, 4u, 8u}) {
    bool covers = false;
    if (plan.box.width > 0) {
      covers = plan.box.width >= int64_t{plan.out_w} * f &&
               plan.box.height >= int64_t{plan.out_h} * f;
    } else {
      covers = (int64_t{width} + f - 1) / f >= plan.scaled_w &&
               (int64_t{height} + f - 1) / f >= plan.scaled_h;
    }
    if (covers) denom = f;
  }
  return denom;
}

// The plan of one image: the random crop box and the flip, drawn from the
// image's own stream of numbers (see AugmentSeed).
void augment(int width, int height, const ImageOptions& o,
             std::string_view name, std::optional<uint64_t> index, Plan* plan) {
  const uint64_t key = index ? *index : sample_index_of(name);
  if (o.random_resized_crop.width > 0) {
    UniformDraws draws(o.seed, key, 0);
    plan->box = sample_resized_crop(width, height, o.random_resized_crop,
                                    [&draws] { return draws.next(); });
  }
  if (o.flip_probability > 0) {
    UniformDraws draws(o.seed, key, 1);
    plan->flip = draws.next() < o.flip_probability;
  }
}

// Turns decoded pixels into the output: the part of decode_to() after the
// decoder, also the whole of transform_image(). Planned before decoding (the
// decoder calls region_for() once it knows the decoded size): the
// resampler's source region is all the decoder has to produce.
class Renderer {
 public:
  Renderer(const ImageOptions& o, const Plan& plan) : o_(o), plan_(plan) {}

  media::Region region_for(int width, int height, double extent_w,
                           double extent_h) {
    const media::Region region = plan_region(width, height, extent_w, extent_h);
    if (!o_.partial_decode) return media::Region{0, 0, width, height};
    return region;
  }

  void render(const media::DecodedPixels& px, void* out) const {
    OutputWriter writer(o_, plan_, out);
    if (resampler_) {
      media::Pixels src{px.data,     px.width,  px.height,
                        px.channels, px.stride, px.extent_w,
                        px.extent_h, px.left,   px.top};
      resampler_->run(src, writer);
      return;
    }
    const int c = px.channels;
    std::vector<float> row(static_cast<std::size_t>(plan_.out_w) * c);
    for (int y = 0; y < plan_.out_h; ++y) {
      const uint8_t* s =
          px.data +
          static_cast<std::ptrdiff_t>(y + plan_.y0 - px.top) * px.stride +
          static_cast<std::ptrdiff_t>(plan_.x0 - px.left) * c;
      if (plan_.flip) {
        for (int x = 0; x < plan_.out_w; ++x) {
          const uint8_t* from = s + static_cast<std::ptrdiff_t>(x) * c;
          float* to =
              row.data() + static_cast<std::ptrdiff_t>(plan_.out_w - 1 - x) * c;
          for (int k = 0; k < c; ++k) to[k] = from[k];
        }
      } else {
        for (std::size_t i = 0; i < row.size(); ++i) row[i] = s[i];
      }
      writer.row(y, row.data());
    }
  }

 private:
  media::Region plan_region(int width, int height, double extent_w,
                            double extent_h) {
    const Plan& plan = plan_;
    if (plan.box.width > 0) {
      // Decoded pixels per source pixel (1 / the DCT scale denominator).
      const double sx = extent_w > 0 ? extent_w / plan.scaled_w : 1.0;
      const double sy = extent_h > 0 ? extent_h / plan.scaled_h : 1.0;
      resampler_ = media::Resampler::for_box(
          width, height, plan.box.left * sx, plan.box.top * sy,
          plan.box.width * sx, plan.box.height * sy, plan.out_w, plan.out_h);
    } else if (!needs_resize(plan, width, height, extent_w, extent_h)) {
      return media::Region{plan.x0, plan.y0, plan.out_w, plan.out_h};
    } else {
      resampler_.emplace(width, height, extent_w, extent_h, plan.scaled_w,
                         plan.scaled_h, plan.x0, plan.y0, plan.out_w,
                         plan.out_h);
    }
    // The flip happens in the resampler's horizontal pass.
    if (plan.flip) resampler_->mirror();
    return resampler_->region();
  }

  const ImageOptions& o_;
  const Plan& plan_;
  std::optional<media::Resampler> resampler_;
};

void decode_to(std::span<const uint8_t> data, const ImageOptions& o,
               std::string_view name, const Plan& plan, void* out) {
  Renderer renderer(o, plan);
  auto region_for = [&renderer](int width, int height, double extent_w,
                                double extent_h) {
    return renderer.region_for(width, height, extent_w, extent_h);
  };
  media::DecodedPixels px;
  if (media::is_jpeg(data)) {
    px = media::decode_jpeg(data, o.pixel_format, plan.denom, o.max_pixels,
                            name, region_for);
  } else if (media::is_png(data)) {
    px = media::decode_png(data, o.pixel_format, o.max_pixels, name);
    region_for(px.width, px.height, px.extent_w, px.extent_h);
  } else if (data.empty()) {
    throw DecodeError(std::string(name) + ": empty input, not an image");
  } else {
    throw UnsupportedFormat(std::string(name) + ": not a JPEG or PNG image");
  }
  renderer.render(px, out);
}

// Everything about one image's decode that its header and the options
// decide, before any pixel is decoded.
Plan plan_image(const ImageInfo& info, const ImageOptions& options,
                std::string_view name, std::optional<uint64_t> index) {
  Plan plan = make_plan(info.width, info.height, options);
  augment(info.width, info.height, options, name, index, &plan);
  if (std::string_view(info.format) == "jpeg")
    plan.denom = jpeg_scale_denom(info.width, info.height, plan, options);
  if (plan.box.width > 0) {
    // For a box, scaled_w x scaled_h is the source image's size: what the
    // decoder's extent is measured against.
    plan.scaled_w = info.width;
    plan.scaled_h = info.height;
  }
  return plan;
}

Plan plan_image(std::span<const uint8_t> data, const ImageOptions& options,
                std::string_view name, std::optional<uint64_t> index) {
  ImageInfo info = probe_image(data, name);
  media::check_dimensions(info.width, info.height, options.max_pixels, name);
  return plan_image(info, options, name, index);
}

// `pixels` (H x W x C uint8, C = 3 for RGB or 1 for grey) as 8-bit pixels
// in `format`: a view when they already are, else a converted copy (grey
// as Pillow's convert("L"), ITU-R 601-2 luma).
media::DecodedPixels pixels_in(const Buffer& pixels, PixelFormat format) {
  const auto h = static_cast<int>(pixels.shape()[0]);
  const auto w = static_cast<int>(pixels.shape()[1]);
  const int in_c =
      pixels.shape().size() == 3 ? static_cast<int>(pixels.shape()[2]) : 1;
  media::DecodedPixels px;
  px.width = w;
  px.height = h;
  px.channels = format == PixelFormat::kGray ? 1 : 3;
  px.stride = static_cast<std::ptrdiff_t>(w) * px.channels;
  const uint8_t* src = pixels.data_as<uint8_t>();
  if ((in_c == 1) == (format == PixelFormat::kGray) &&
      format != PixelFormat::kBgr) {
    px.data = src;
    return px;
  }
  const std::size_t n = static_cast<std::size_t>(w) * h;
  px.owned.reset(new uint8_t[n * static_cast<std::size_t>(px.channels)]);
  uint8_t* dst = px.owned.get();
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* p = src + i * static_cast<std::size_t>(in_c);
    const uint8_t r = p[0];
    const uint8_t g = in_c == 1 ? p[0] : p[1];
    const uint8_t b = in_c == 1 ? p[0] : p[2];
    switch (format) {
      case PixelFormat::kRgb:
        dst[3 * i] = r, dst[3 * i + 1] = g, dst[3 * i + 2] = b;
        break;
      case PixelFormat::kBgr:
        dst[3 * i] = b, dst[3 * i + 1] = g, dst[3 * i + 2] = r;
        break;
      case PixelFormat::kGray:
        dst[i] = static_cast<uint8_t>(
            (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
        break;
    }
  }
  px.data = dst;
  return px;
}

}  // namespace

void check_dimensions(int width, int height, int64_t max_pixels,
                      std::string_view name) {
  if (width <= 0 || height <= 0 || int64_t{width} * height > max_pixels) {
    throw DecodeError(std::string(name) + ": image of " +
                      std::to_string(width) + " x " + std::to_string(height) +
                      " pixels is empty or exceeds the limit of " +
                      std::to_string(max_pixels) + " pixels");
  }
}

void check_image_options(const ImageOptions& o) {
  auto positive_pair = [](int a, int b, const char* what) {
    if ((a > 0) != (b > 0) || a < 0 || b < 0) {
      throw InvalidArgument(
          std::string(what) + " needs both a width and a height > 0 (got " +
          std::to_string(a) + " x " + std::to_string(b) + ")");
    }
  };
  positive_pair(o.resize_width, o.resize_height, "resize");
  positive_pair(o.crop_width, o.crop_height, "crop");
  if (o.resize_shorter < 0)
    throw InvalidArgument("resize_shorter must be >= 0");
  if (o.resize_shorter > 0 && o.resize_width > 0) {
    throw InvalidArgument(
        "give either resize_shorter or resize_width/height, not both");
  }
  if (o.dtype != DType::kUint8 && o.dtype != DType::kFloat32) {
    throw InvalidArgument(
        std::string("image dtype must be uint8 or float32, got ") +
        dtype_name(o.dtype));
  }
  for (float s : o.std) {
    if (!(s != 0.f)) throw InvalidArgument("std must be non-zero");
  }
  if (o.max_pixels <= 0) throw InvalidArgument("max_pixels must be > 0");
  const RandomResizedCrop& rrc = o.random_resized_crop;
  positive_pair(rrc.width, rrc.height, "random_resized_crop");
  check_size(o.resize_width, o.resize_height, o, "width x height");
  check_size(o.crop_width, o.crop_height, o, "crop");
  check_size(rrc.width, rrc.height, o, "random_resized_crop");
  if (rrc.width > 0) {
    if (o.resize_width > 0 || o.resize_shorter > 0 || o.crop_width > 0) {
      throw InvalidArgument(
          "random_resized_crop sets the output size: give no resize or crop "
          "with it");
    }
    if (!(rrc.scale[0] > 0 && rrc.scale[0] <= rrc.scale[1] &&
          std::isfinite(rrc.scale[1]))) {
      throw InvalidArgument(
          "random_resized_crop scale must be (min, max) with 0 < min <= max, "
          "got (" +
          std::to_string(rrc.scale[0]) + ", " + std::to_string(rrc.scale[1]) +
          ")");
    }
    if (!(rrc.ratio[0] > 0 && rrc.ratio[0] <= rrc.ratio[1] &&
          std::isfinite(rrc.ratio[1]))) {
      throw InvalidArgument(
          "random_resized_crop ratio must be (min, max) with 0 < min <= max, "
          "got (" +
          std::to_string(rrc.ratio[0]) + ", " + std::to_string(rrc.ratio[1]) +
          ")");
    }
  }
  if (!(o.flip_probability >= 0 && o.flip_probability <= 1)) {
    throw InvalidArgument("flip probability must be in [0, 1], got " +
                          std::to_string(o.flip_probability));
  }
}

ImageInfo probe_image(std::span<const uint8_t> data, std::string_view name) {
  if (media::is_jpeg(data)) return media::probe_jpeg(data, name);
  if (media::is_png(data)) return media::probe_png(data, name);
  if (data.empty())
    throw DecodeError(std::string(name) + ": empty input, not an image");
  throw UnsupportedFormat(std::string(name) + ": not a JPEG or PNG image");
}

std::vector<int64_t> image_output_shape(int width, int height,
                                        const ImageOptions& options) {
  return shape_of(make_plan(width, height, options), options);
}

Buffer decode_image(std::span<const uint8_t> data, const ImageOptions& options,
                    std::string_view name, std::optional<uint64_t> index) {
  check_image_options(options);
  Plan plan = plan_image(data, options, name, index);
  Buffer out = Buffer::allocate(options.dtype, shape_of(plan, options));
  decode_to(data, options, name, plan, out.data());
  return out;
}

Buffer transform_image(const Buffer& pixels, const ImageOptions& options,
                       std::string_view name, std::optional<uint64_t> index) {
  check_image_options(options);
  const std::vector<int64_t>& shape = pixels.shape();
  const bool hwc = shape.size() == 3 && (shape[2] == 1 || shape[2] == 3);
  if (pixels.dtype() != DType::kUint8 || !(hwc || shape.size() == 2) ||
      !pixels.contiguous() || shape[0] <= 0 || shape[1] <= 0 ||
      shape[0] > std::numeric_limits<int>::max() ||
      shape[1] > std::numeric_limits<int>::max()) {
    throw InvalidArgument(std::string(name) +
                          ": transform_image takes contiguous uint8 pixels "
                          "of shape (H, W, 3) (RGB), (H, W, 1) or (H, W) "
                          "(grey), got " +
                          pixels.to_string());
  }
  const ImageInfo info{static_cast<int>(shape[1]), static_cast<int>(shape[0]),
                       "pixels"};
  media::check_dimensions(info.width, info.height, options.max_pixels, name);
  const Plan plan = plan_image(info, options, name, index);
  Buffer out = Buffer::allocate(options.dtype, shape_of(plan, options));
  media::DecodedPixels px = pixels_in(pixels, options.pixel_format);
  Renderer renderer(options, plan);
  renderer.region_for(px.width, px.height, 0, 0);
  renderer.render(px, out.data());
  return out;
}

void decode_image_into(std::span<const uint8_t> data,
                       const ImageOptions& options, std::string_view name,
                       const Buffer& out, std::optional<uint64_t> index) {
  check_image_options(options);
  Plan plan = plan_image(data, options, name, index);
  std::vector<int64_t> shape = shape_of(plan, options);
  if (!out.writable())
    throw InvalidArgument(std::string(name) +
                          ": the output buffer is read-only");
  if (out.shape() != shape || out.dtype() != options.dtype ||
      !out.contiguous()) {
    throw InvalidArgument(
        std::string(name) + ": decodes to " +
        Buffer::view(nullptr, nullptr, options.dtype, shape).to_string() +
        ", which does not fit the output " + out.to_string() +
        " (give a resize or crop so that every image has the same size)");
  }
  decode_to(data, options, name, plan, out.data());
}

Buffer decode_image_batch(std::span<const EncodedImage> images,
                          const ImageOptions& options,
                          std::vector<ImageFailure>* failures) {
  check_image_options(options);
  const auto first_failure = static_cast<std::ptrdiff_t>(failures->size());
  // Probe first: the batch is allocated once, for the images that can go in.
  std::vector<std::size_t> good;
  std::vector<int64_t> shape;
  for (std::size_t i = 0; i < images.size(); ++i) {
    try {
      ImageInfo info = probe_image(images[i].data, images[i].name);
      media::check_dimensions(info.width, info.height, options.max_pixels,
                              images[i].name);
      std::vector<int64_t> s =
          image_output_shape(info.width, info.height, options);
      if (shape.empty()) shape = s;
      if (s != shape) {
        throw InvalidArgument(
            std::string(images[i].name) +
            ": decodes to a different size than the batch (give a resize to "
            "width x height, or a crop)");
      }
      good.push_back(i);
    } catch (const std::exception& e) {
      failures->push_back({i, e.what()});
    }
  }
  std::vector<int64_t> batch_shape =
      shape.empty() ? std::vector<int64_t>{0} : shape;
  if (!shape.empty())
    batch_shape.insert(batch_shape.begin(), static_cast<int64_t>(good.size()));
  Buffer batch = Buffer::allocate(options.dtype, batch_shape);
  if (good.empty()) return batch;
  const std::size_t slot_bytes = batch.nbytes() / good.size();
  std::size_t filled = 0;
  for (std::size_t i : good) {
    // A later failure leaves its slot to the next image: the batch stays
    // dense, in input order.
    Buffer slot = Buffer::view(batch.owner(),
                               batch.data_as<uint8_t>() + filled * slot_bytes,
                               options.dtype, shape);
    try {
      decode_image_into(images[i].data, options, images[i].name, slot,
                        images[i].index);
      ++filled;
    } catch (const std::exception& e) {
      failures->push_back({i, e.what()});
    }
  }
  if (filled == good.size()) return batch;
  // Failures of both passes, in input order.
  std::stable_sort(failures->begin() + first_failure, failures->end(),
                   [](const ImageFailure& a, const ImageFailure& b) {
                     return a.index < b.index;
                   });
  batch_shape[0] = static_cast<int64_t>(filled);
  return Buffer::view(batch.owner(), batch.data(), options.dtype, batch_shape);
}

}  // namespace feedline::media
