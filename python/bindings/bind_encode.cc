// SPDX-License-Identifier: Apache-2.0
//
// feedline.io's encoding objects: Muxer, Encoder, VideoEncodeConfig,
// AudioEncodeConfig, frames from arrays and encode_image. The Python
// package (feedline/io/_encode.py) arranges them into SPDL's API.
//
// GIL: encoding, writing and converting run with it released.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "feedline/base/error.h"
#include "feedline/media/encode.h"
#include "feedline/ops/av_ops.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

using media::AudioEncodeConfig;
using media::Encoder;
using media::Muxer;
using media::Rational;
using media::VideoEncodeConfig;

using Options = std::map<std::string, std::string>;

// The options of an encode op (ops::VideoEncodeOptions, AudioEncodeOptions).
template <typename OpOptions, typename Config>
OpOptions op_options(const std::string& format, const std::string& encoder,
                     const Config& config, const Options& encoder_options,
                     const Options& muxer_options) {
  OpOptions o;
  o.format = format;
  o.encoder = encoder;
  o.config = config;
  o.encoder_options = encoder_options;
  o.muxer_options = muxer_options;
  return o;
}

// A C-contiguous array given as a bytes-like object with its shape and
// dtype (the Python layer makes it contiguous).
Buffer array_from(nb::handle data, const std::vector<int64_t>& shape,
                  const std::string& dtype) {
  Buffer bytes = bytes_from_python(data);
  const DType t = dtype_from_name(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw InvalidArgument("negative dimension in the shape");
    n *= d;
  }
  if (static_cast<std::size_t>(n) * dtype_size(t) != bytes.nbytes())
    throw InvalidArgument("the array's bytes do not match its shape");
  return Buffer::view(bytes.owner(), bytes.data(), t, shape);
}

Rational rational_from(nb::handle pair) {
  if (nb::len(pair) != 2) throw InvalidArgument("a rate is (num, den)");
  int num = 0;
  int den = 0;
  if (!nb::try_cast(pair[0], num) || !nb::try_cast(pair[1], den)) {
    throw InvalidArgument(
        "a rate is (num, den), integers of 32 bits (FFmpeg's rationals), "
        "got " +
        std::string(nb::repr(pair).c_str()));
  }
  return Rational{num, den};
}

// An optional rational of the config as a property: (num, den) or None.
template <std::optional<Rational> VideoEncodeConfig::*Field>
nb::object get_rate(const VideoEncodeConfig& c) {
  const std::optional<Rational>& r = c.*Field;
  if (!r) return nb::none();
  return nb::make_tuple(r->num, r->den);
}

template <std::optional<Rational> VideoEncodeConfig::*Field>
void set_rate(VideoEncodeConfig& c, nb::handle v) {
  if (v.is_none()) {
    (c.*Field).reset();
  } else {
    c.*Field = rational_from(v);
  }
}

media::ImageEncodeOptions image_options(const std::string& format,
                                        const std::string& pix_fmt, int quality,
                                        bool lossless, int compression_level) {
  media::ImageEncodeOptions o;
  o.format = format;
  o.pix_fmt = pix_fmt;
  o.quality = quality;
  o.lossless = lossless;
  o.compression_level = compression_level;
  return o;
}

}  // namespace

void bind_encode(nb::module_& m) {
  nb::class_<VideoEncodeConfig>(m, "VideoEncodeConfig")
      .def(nb::init<>())
      .def_rw("width", &VideoEncodeConfig::width)
      .def_rw("height", &VideoEncodeConfig::height)
      .def_prop_rw("frame_rate", get_rate<&VideoEncodeConfig::frame_rate>,
                   set_rate<&VideoEncodeConfig::frame_rate>,
                   nb::arg("value").none())
      .def_rw("pix_fmt", &VideoEncodeConfig::pix_fmt)
      .def_rw("bit_rate", &VideoEncodeConfig::bit_rate)
      .def_rw("compression_level", &VideoEncodeConfig::compression_level)
      .def_rw("qscale", &VideoEncodeConfig::qscale)
      .def_rw("gop_size", &VideoEncodeConfig::gop_size)
      .def_rw("max_b_frames", &VideoEncodeConfig::max_b_frames)
      .def_rw("colorspace", &VideoEncodeConfig::colorspace)
      .def_rw("color_primaries", &VideoEncodeConfig::color_primaries)
      .def_rw("color_trc", &VideoEncodeConfig::color_trc)
      .def_rw("color_range", &VideoEncodeConfig::color_range)
      .def_prop_rw("sample_aspect_ratio",
                   get_rate<&VideoEncodeConfig::sample_aspect_ratio>,
                   set_rate<&VideoEncodeConfig::sample_aspect_ratio>,
                   nb::arg("value").none())
      .def_prop_rw("time_base", get_rate<&VideoEncodeConfig::time_base>,
                   set_rate<&VideoEncodeConfig::time_base>,
                   nb::arg("value").none());
  nb::class_<AudioEncodeConfig>(m, "AudioEncodeConfig")
      .def(nb::init<>())
      .def_rw("num_channels", &AudioEncodeConfig::num_channels)
      .def_rw("sample_rate", &AudioEncodeConfig::sample_rate)
      .def_rw("sample_fmt", &AudioEncodeConfig::sample_fmt)
      .def_rw("bit_rate", &AudioEncodeConfig::bit_rate)
      .def_rw("compression_level", &AudioEncodeConfig::compression_level)
      .def_rw("qscale", &AudioEncodeConfig::qscale);

  nb::class_<Encoder>(m, "Encoder", "Encodes frames of one stream.")
      .def_prop_ro("media", &Encoder::media)
      .def_prop_ro("name", &Encoder::name)
      .def_prop_ro("codec", &Encoder::codec)
      .def_prop_ro("frame_size", &Encoder::frame_size,
                   "Audio: samples per frame the encoder takes (0: any); "
                   "frames of other sizes are regrouped.")
      .def(
          "_encode",
          [](Encoder& e, media::Frames& frames) {
            return consuming_detached(frames, [&](media::Frames&& mine) {
              return e.encode(std::move(mine));
            });
          },
          nb::arg("frames"))
      .def("_flush", [](Encoder& e) {
        ReleaseGil release;
        return e.flush();
      });

  nb::class_<Muxer>(m, "Muxer", "An output file and its streams.")
      .def(nb::init<std::string, const std::string&>(), nb::arg("dst"),
           nb::arg("format") = "")
      .def_static(
          "in_memory",
          [](const std::string& format) { return Muxer::in_memory(format); },
          nb::arg("format"),
          "A Muxer writing to memory; take_bytes() after close().")
      .def("take_bytes",
           [](Muxer& m) {
             Buffer b;
             {
               ReleaseGil release;
               b = m.take_bytes();
             }
             return nb::bytes(b.data_as<const char>(), b.nbytes());
           })
      .def_prop_ro("dst", &Muxer::dst)
      .def_prop_ro("format", &Muxer::format)
      .def_prop_ro("num_streams", &Muxer::num_streams)
      .def_prop_ro("is_open", &Muxer::is_open)
      .def_prop_ro("closed", &Muxer::closed)
      .def(
          "add_video_stream",
          [](Muxer& m, const VideoEncodeConfig& c, const std::string& encoder,
             const Options& options) -> Encoder& {
            return m.add_encode_stream(c, encoder, options);
          },
          nb::arg("config"), nb::arg("encoder"), nb::arg("options"),
          nb::rv_policy::reference_internal)
      .def(
          "add_audio_stream",
          [](Muxer& m, const AudioEncodeConfig& c, const std::string& encoder,
             const Options& options) -> Encoder& {
            return m.add_encode_stream(c, encoder, options);
          },
          nb::arg("config"), nb::arg("encoder"), nb::arg("options"),
          nb::rv_policy::reference_internal)
      .def("add_remux_stream", &Muxer::add_remux_stream, nb::arg("codec"))
      .def(
          "open",
          [](Muxer& m, const Options& options) {
            ReleaseGil release;
            m.open(options);
          },
          nb::arg("options"))
      .def(
          "write",
          [](Muxer& m, int index, const media::Packets& packets) {
            reading_detached(packets, [&](const media::Packets& mine) {
              m.write(index, mine);
            });
          },
          nb::arg("index"), nb::arg("packets"))
      .def("flush",
           [](Muxer& m) {
             ReleaseGil release;
             m.flush();
           })
      .def("close", [](Muxer& m) {
        ReleaseGil release;
        m.close();
      });

  m.def(
      "video_frames_from",
      [](nb::handle data, const std::vector<int64_t>& shape,
         const std::string& dtype, const std::string& pix_fmt,
         nb::handle frame_rate, int64_t pts) {
        Buffer a = array_from(data, shape, dtype);
        const Rational rate = rational_from(frame_rate);
        ReleaseGil release;
        return media::video_frames_from(a, pix_fmt, rate, pts);
      },
      nb::arg("data"), nb::arg("shape"), nb::arg("dtype"), nb::arg("pix_fmt"),
      nb::arg("frame_rate"), nb::arg("pts"));
  m.def(
      "audio_frames_from",
      [](nb::handle data, const std::vector<int64_t>& shape,
         const std::string& dtype, const std::string& sample_fmt,
         int sample_rate, int64_t pts) {
        Buffer a = array_from(data, shape, dtype);
        ReleaseGil release;
        return media::audio_frames_from(a, sample_fmt, sample_rate, pts);
      },
      nb::arg("data"), nb::arg("shape"), nb::arg("dtype"),
      nb::arg("sample_fmt"), nb::arg("sample_rate"), nb::arg("pts"));
  m.def(
      "encode_image",
      [](nb::handle data, const std::vector<int64_t>& shape,
         const std::string& dtype, const std::string& format,
         const std::string& pix_fmt, int quality, bool lossless,
         int compression_level) {
        Buffer a = array_from(data, shape, dtype);
        const media::ImageEncodeOptions o = image_options(
            format, pix_fmt, quality, lossless, compression_level);
        Buffer out;
        {
          ReleaseGil release;
          out = media::encode_image(a, o);
        }
        return nb::bytes(out.data_as<const char>(), out.nbytes());
      },
      nb::arg("data"), nb::arg("shape"), nb::arg("dtype"), nb::arg("format"),
      nb::arg("pix_fmt"), nb::arg("quality"), nb::arg("lossless"),
      nb::arg("compression_level"));

  m.def(
      "encode_image_op",
      [](const std::string& format, const std::string& pix_fmt, int quality,
         bool lossless, int compression_level) {
        return NativeOp{
            ops::encode_image(image_options(format, pix_fmt, quality, lossless,
                                            compression_level)),
            "encode_image"};
      },
      nb::arg("format"), nb::arg("pix_fmt"), nb::arg("quality"),
      nb::arg("lossless"), nb::arg("compression_level"));
  m.def(
      "encode_video_op",
      [](const std::string& format, const std::string& encoder,
         const VideoEncodeConfig& config, const Options& encoder_options,
         const Options& muxer_options) {
        return NativeOp{
            ops::encode_video(op_options<ops::VideoEncodeOptions>(
                format, encoder, config, encoder_options, muxer_options)),
            "encode_video"};
      },
      nb::arg("format"), nb::arg("encoder"), nb::arg("config"),
      nb::arg("encoder_options"), nb::arg("muxer_options"));
  m.def(
      "encode_audio_op",
      [](const std::string& format, const std::string& encoder,
         const AudioEncodeConfig& config, const Options& encoder_options,
         const Options& muxer_options) {
        return NativeOp{
            ops::encode_audio(op_options<ops::AudioEncodeOptions>(
                format, encoder, config, encoder_options, muxer_options)),
            "encode_audio"};
      },
      nb::arg("format"), nb::arg("encoder"), nb::arg("config"),
      nb::arg("encoder_options"), nb::arg("muxer_options"));
}

}  // namespace feedline::bindings
