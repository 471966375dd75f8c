// SPDX-License-Identifier: Apache-2.0
//
// feedline.io's FFmpeg objects: Demuxer, Packets, Frames, Codec, Decoder,
// FilterGraph, and the functions that connect them. The Python package
// (feedline/io/_av.py) arranges these into SPDL's API.
//
// GIL: demuxing, decoding, filtering and converting run with it released;
// property reads hold it (they are cheap). A consumed Packets or Frames
// raises TypeError, as in SPDL.

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/io/file.h"
#include "feedline/media/av.h"
#include "feedline/ops/av_ops.h"
#include "io_common.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

using media::Codec;
using media::Frames;
using media::Media;
using media::Packets;
using media::Rational;
using media::Window;
using ops::ClipRequest;
using ops::FramesItem;
using ops::PacketsItem;

template <typename T>
T& live(T& obj);

// Calls const member M of a live (not consumed) object, for properties.
template <typename T, auto M>
auto checked(T& obj) {
  return (live(obj).*M)();
}

template <typename T>
T& live(T& obj) {
  if (obj.consumed()) {
    throw nb::type_error(
        (std::string(media::media_name(obj.media())) +
         " object was consumed (decoded, converted or filtered); clone() it "
         "first to use it twice")
            .c_str());
  }
  return obj;
}

nb::tuple rational_tuple(Rational r) { return nb::make_tuple(r.num, r.den); }

// A time in seconds (int, float, fractions.Fraction, decimal.Decimal or str)
// as an exact fraction; one whose parts do not fit in 32 bits is rounded to
// the nearest with a denominator <= 2^20.
Rational time_from(nb::handle value) {
  nb::object fraction = nb::module_::import_("fractions").attr("Fraction");
  nb::object decimal = nb::module_::import_("decimal").attr("Decimal");
  nb::object f;
  if (PyFloat_Check(value.ptr())) {
    if (!std::isfinite(nb::cast<double>(value)))
      throw InvalidArgument("a time must be finite, got " +
                            nb::cast<std::string>(nb::repr(value)));
    f = fraction(nb::repr(value));
  } else if (PyLong_Check(value.ptr()) || PyUnicode_Check(value.ptr()) ||
             nb::isinstance(value, fraction) ||
             nb::isinstance(value, decimal)) {
    f = fraction(value);
  } else {
    throw nb::type_error(
        ("a time must be a number, Fraction, Decimal or str, got " +
         nb::cast<std::string>(nb::type_name(value.type())))
            .c_str());
  }
  auto too_big = [](const nb::object& x) {
    for (const char* part : {"numerator", "denominator"}) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(x.attr(part).ptr(), &overflow);
      if (overflow != 0 || v > INT32_MAX || v < -INT32_MAX) return true;
    }
    return false;
  };
  if (too_big(f)) f = f.attr("limit_denominator")(1 << 20);
  if (too_big(f)) throw InvalidArgument("a time must be below 2^31 s");
  return Rational{nb::cast<int>(f.attr("numerator")),
                  nb::cast<int>(f.attr("denominator"))};
}

bool less(Rational a, Rational b) {
  return int64_t{a.num} * b.den < int64_t{b.num} * a.den;
}

// The window [start, end) in seconds; end None or +inf: to the end.
Window window_from_times(nb::handle start, nb::handle end) {
  Window w;
  w.start = time_from(start);
  auto shown = [&] {
    return ": (" + nb::cast<std::string>(nb::repr(start)) + ", " +
           nb::cast<std::string>(nb::repr(end)) + ")";
  };
  if (w.start.num < 0)
    throw InvalidArgument("the window starts before 0" + shown());
  const bool open = end.is_none() || (PyFloat_Check(end.ptr()) &&
                                      std::isinf(nb::cast<double>(end)) &&
                                      nb::cast<double>(end) > 0);
  if (!open) {
    w.end = time_from(end);
    if (less(*w.end, w.start))
      throw InvalidArgument("the window ends before it starts" + shown());
  }
  return w;
}

nb::object window_to_python(const std::optional<Window>& w) {
  if (!w) return nb::none();
  return nb::make_tuple(
      w->start.to_double(),
      w->end ? nb::cast(w->end->to_double()) : nb::cast(INFINITY));
}

// A path/URL (str or os.PathLike) or a bytes-like object.
media::Source source_from(nb::handle src) {
  if (PyUnicode_Check(src.ptr()) ||
      PyObject_HasAttrString(src.ptr(), "__fspath__")) {
    nb::object fs = nb::steal(PyOS_FSPath(src.ptr()));
    if (!fs.is_valid()) throw nb::python_error();
    return media::Source{nb::cast<std::string>(fs), {}, nullptr};
  }
  return ops::memory_source(bytes_from_python(src));
}

// A clip request from Python: (src, start, end), (src, Window) or
// (src, None); src a path or bytes.
Item clip_from_python(nb::handle obj) {
  if (!nb::isinstance<nb::tuple>(obj) ||
      (nb::len(obj) != 2 && nb::len(obj) != 3)) {
    throw InvalidArgument(
        "a clip is (path or bytes, start, end) or (path or bytes, None)");
  }
  nb::tuple t = nb::borrow<nb::tuple>(obj);
  ClipRequest r;
  r.source = source_from(t[0]);
  r.name = r.source.in_memory()
               ? "<" + std::to_string(r.source.data.size()) + " bytes>"
               : r.source.url;
  try {
    if (nb::len(t) == 3) {
      r.window = window_from_times(t[1], t[2]);
    } else if (nb::isinstance<Window>(t[1])) {
      r.window = nb::cast<Window>(t[1]);
    } else if (!t[1].is_none()) {
      nb::tuple w = nb::cast<nb::tuple>(t[1]);
      if (nb::len(w) != 2) throw InvalidArgument("a window is (start, end)");
      r.window = window_from_times(w[0], w[1]);
    }
  } catch (const nb::builtin_exception& e) {
    throw InvalidArgument(e.what());  // a failed conversion, in the engine
  }
  return Item(std::move(r));
}

nb::object frames_or_none(std::unique_ptr<Frames> f) {
  if (!f) return nb::none();
  return nb::cast(std::move(f));
}

template <typename T>
nb::object unique_to_python(Item& item) {
  return nb::cast(std::move(item.as<std::unique_ptr<T>>()));
}

template <typename T>
Item unique_from_python(nb::handle obj) {
  if (!nb::isinstance<T>(obj)) {
    throw InvalidArgument(std::string("expected ") +
                          nb::type_name(nb::type<T>()).c_str() + ", got " +
                          nb::type_name(obj.type()).c_str());
  }
  T& value = live(nb::cast<T&>(obj));
  return Item(value.take());
}

}  // namespace

void bind_av(nb::module_& m) {
  nb::enum_<Media>(m, "Media")
      .value("AUDIO", Media::kAudio)
      .value("VIDEO", Media::kVideo)
      .value("IMAGE", Media::kImage);

  nb::class_<Window>(m, "Window", "A half-open time window [start, end).")
      .def(
          "__init__",
          [](Window* self, nb::handle start, nb::handle end) {
            new (self) Window(window_from_times(start, end));
          },
          nb::arg("start"), nb::arg("end").none(),
          "start and end in seconds (int, float, Fraction, Decimal or str); "
          "end None or inf: to the end.")
      .def_prop_ro("start", [](const Window& w) { return w.start.to_double(); })
      .def_prop_ro("end", [](const Window& w) {
        return w.end ? w.end->to_double() : INFINITY;
      });

  nb::class_<media::DemuxConfig>(m, "DemuxConfig")
      .def(nb::init<>())
      .def_rw("format", &media::DemuxConfig::format)
      .def_rw("format_options", &media::DemuxConfig::format_options)
      .def_rw("buffer_size", &media::DemuxConfig::buffer_size)
      .def_rw("find_stream_info", &media::DemuxConfig::find_stream_info,
              nb::arg().none());
  nb::class_<media::DecodeConfig>(m, "DecodeConfig")
      .def(nb::init<>())
      .def_rw("decoder", &media::DecodeConfig::decoder)
      .def_rw("decoder_options", &media::DecodeConfig::decoder_options)
      .def_rw("threads", &media::DecodeConfig::threads);

  nb::class_<Codec>(m, "Codec",
                    "A stream's codec parameters (read-only metadata).")
      .def_prop_ro("media", &Codec::media)
      .def_prop_ro("name", &Codec::name)
      .def_prop_ro("time_base",
                   [](const Codec& c) { return rational_tuple(c.time_base()); })
      .def_prop_ro(
          "frame_rate",
          [](const Codec& c) { return rational_tuple(c.frame_rate()); })
      .def_prop_ro("width", &Codec::width)
      .def_prop_ro("height", &Codec::height)
      .def_prop_ro("pix_fmt", &Codec::pix_fmt)
      .def_prop_ro("sample_aspect_ratio",
                   [](const Codec& c) {
                     return rational_tuple(c.sample_aspect_ratio());
                   })
      .def_prop_ro("sample_rate", &Codec::sample_rate)
      .def_prop_ro("num_channels", &Codec::num_channels)
      .def_prop_ro("sample_fmt", &Codec::sample_fmt)
      .def_prop_ro("channel_layout", &Codec::channel_layout)
      .def_prop_ro("bit_rate", &Codec::bit_rate)
      .def_prop_ro("bits_per_sample", &Codec::bits_per_sample)
      .def("__repr__", [](const Codec& c) {
        const char* kind = c.media() == Media::kAudio   ? "AudioCodec"
                           : c.media() == Media::kVideo ? "VideoCodec"
                                                        : "ImageCodec";
        return std::string(kind) + "<" + c.to_string() + ">";
      });

  nb::class_<Packets>(m, "Packets", "Encoded packets of one stream.")
      .def_prop_ro("media", &Packets::media)
      .def_prop_ro("src", &checked<Packets, &Packets::src>)
      .def_prop_ro("stream_index", &checked<Packets, &Packets::stream_index>)
      .def_prop_ro(
          "time_base",
          [](Packets& p) { return rational_tuple(live(p).time_base()); })
      .def_prop_ro(
          "timestamp",
          [](Packets& p) { return window_to_python(live(p).window()); },
          "The window (start, end) in seconds, or None.")
      .def_prop_ro("codec", &checked<Packets, &Packets::codec>,
                   "The stream's Codec, or None for streamed packets.")
      .def_prop_ro("num_packets", &checked<Packets, &Packets::num_packets>,
                   "All packets held, including those before the window.")
      .def_prop_ro("consumed", &Packets::consumed)
      .def("__len__", &checked<Packets, &Packets::size>)
      .def(
          "get_timestamps",
          [](Packets& p, bool raw) { return live(p).timestamps(raw); },
          nb::kw_only(), nb::arg("raw") = false,
          "Presentation times (s) of the packets in the window, sorted; "
          "with raw=True all of them, in stored order.")
      .def("clone", &checked<Packets, &Packets::clone>,
           "A copy sharing every payload (no data is copied).")
      .def("__repr__", &Packets::to_string);
  nb::class_<media::AudioPackets, Packets>(m, "AudioPackets");
  nb::class_<media::VideoPackets, Packets>(m, "VideoPackets");
  nb::class_<media::ImagePackets, Packets>(m, "ImagePackets");

  nb::class_<Frames>(m, "Frames", "Decoded frames.")
      .def_prop_ro("media", &Frames::media)
      .def_prop_ro("num_frames", &checked<Frames, &Frames::num_frames>)
      .def("__len__", &checked<Frames, &Frames::num_frames>)
      .def_prop_ro("format", &checked<Frames, &Frames::format>)
      .def_prop_ro("width", &checked<Frames, &Frames::width>)
      .def_prop_ro("height", &checked<Frames, &Frames::height>)
      .def_prop_ro("num_planes", &checked<Frames, &Frames::num_planes>)
      .def_prop_ro("sample_rate", &checked<Frames, &Frames::sample_rate>)
      .def_prop_ro("num_channels", &checked<Frames, &Frames::num_channels>)
      .def_prop_ro(
          "time_base",
          [](Frames& f) { return rational_tuple(live(f).time_base()); })
      .def_prop_ro("metadata", &checked<Frames, &Frames::metadata>)
      .def_prop_ro("consumed", &Frames::consumed)
      .def("get_pts", &checked<Frames, &Frames::pts>)
      .def("get_timestamps", &checked<Frames, &Frames::timestamps>)
      .def("clone", &checked<Frames, &Frames::clone>,
           "A copy sharing every frame's data (no data is copied).")
      .def("_select",
           [](Frames& f, const std::vector<int64_t>& indices) {
             return live(f).select(indices);
           })
      .def("_image", [](Frames& f, int64_t i) { return live(f).image(i); })
      .def("_extend",
           [](Frames& f, Frames& other) {
             live(f).extend(std::move(live(other)));
           })
      .def("__repr__", &Frames::to_string);
  nb::class_<media::AudioFrames, Frames>(m, "AudioFrames");
  nb::class_<media::VideoFrames, Frames>(m, "VideoFrames");
  nb::class_<media::ImageFrames, Frames>(m, "ImageFrames");

  nb::class_<media::Demuxer>(m, "Demuxer")
      .def(
          "__init__",
          [](media::Demuxer* self, nb::handle src,
             const media::DemuxConfig& config, const std::string& name) {
            media::Source source = source_from(src);
            nb::gil_scoped_release release;
            new (self) media::Demuxer(std::move(source), config, name);
          },
          nb::arg("src"), nb::arg("config"), nb::arg("name"))
      .def_prop_ro("name", &media::Demuxer::name)
      .def_prop_ro("num_streams", &media::Demuxer::num_streams)
      .def_prop_ro("duration", &media::Demuxer::duration)
      .def("has_audio", &media::Demuxer::has_audio)
      .def("rewind", &media::Demuxer::rewind,
           nb::call_guard<nb::gil_scoped_release>())
      .def("best_stream", &media::Demuxer::best_stream)
      .def("codec", &media::Demuxer::codec)
      .def("stream_codec", &media::Demuxer::stream_codec)
      .def("demux", &media::Demuxer::demux, nb::arg("media"),
           nb::arg("window").none(), nb::call_guard<nb::gil_scoped_release>())
      .def(
          "next_chunk",
          [](media::Demuxer& d, const std::vector<int>& streams,
             double duration, int num_packets) {
            std::map<int, std::unique_ptr<Packets>> chunk;
            {
              nb::gil_scoped_release release;
              chunk = d.next_chunk(streams, duration, num_packets);
            }
            nb::dict out;
            for (auto& [k, v] : chunk)
              out[nb::int_(k)] = nb::cast(std::move(v));
            return out;
          },
          nb::arg("streams"), nb::arg("duration"), nb::arg("num_packets"));

  nb::class_<media::Decoder>(m, "Decoder")
      .def(nb::init<const Codec&, const std::optional<std::string>&,
                    const media::DecodeConfig&, std::string>(),
           nb::arg("codec"), nb::arg("filter_desc").none(), nb::arg("config"),
           nb::arg("name") = "")
      .def(
          "decode",
          [](media::Decoder& d, Packets& packets,
             std::optional<int64_t> max_frames) {
            live(packets);
            nb::gil_scoped_release release;
            return d.decode(std::move(packets), max_frames);
          },
          nb::arg("packets"), nb::arg("max_frames").none() = nb::none())
      .def("flush", &media::Decoder::flush,
           nb::call_guard<nb::gil_scoped_release>());

  nb::class_<media::FilterGraph>(m, "FilterGraph")
      .def(nb::init<const std::string&>(), nb::arg("filter_desc"))
      .def_prop_ro("inputs", &media::FilterGraph::inputs)
      .def_prop_ro("outputs", &media::FilterGraph::outputs)
      .def(
          "add_frames",
          [](media::FilterGraph& g, Frames& frames, const std::string& key) {
            live(frames);
            nb::gil_scoped_release release;
            g.add_frames(std::move(frames), key);
          },
          nb::arg("frames"), nb::arg("key") = "")
      .def("flush", &media::FilterGraph::flush,
           nb::call_guard<nb::gil_scoped_release>())
      .def(
          "get_frames",
          [](media::FilterGraph& g, const std::string& key) {
            std::unique_ptr<Frames> f;
            {
              nb::gil_scoped_release release;
              f = g.get_frames(key);
            }
            return frames_or_none(std::move(f));
          },
          nb::arg("key") = "")
      .def("dump", &media::FilterGraph::dump);

  m.def(
      "decode_packets",
      [](Packets& packets, const std::optional<std::string>& filter_desc,
         const media::DecodeConfig& config, std::optional<int64_t> num_frames) {
        live(packets);
        nb::gil_scoped_release release;
        return media::decode_packets(std::move(packets), filter_desc, config,
                                     num_frames);
      },
      nb::arg("packets"), nb::arg("filter_desc").none(), nb::arg("config"),
      nb::arg("num_frames").none());
  m.def(
      "sample_decode_video",
      [](Packets& packets, const std::vector<int64_t>& indices,
         const std::optional<std::string>& filter_desc,
         const media::DecodeConfig& config) {
        live(packets);
        nb::gil_scoped_release release;
        return media::sample_decode_video(std::move(packets), indices,
                                          filter_desc, config);
      },
      nb::arg("packets"), nb::arg("indices"), nb::arg("filter_desc").none(),
      nb::arg("config"));
  m.def(
      "convert_frames",
      [](nb::handle frames) {
        if (nb::isinstance<Frames>(frames)) {
          Frames& f = live(nb::cast<Frames&>(frames));
          nb::gil_scoped_release release;
          return media::convert_frames(std::move(f));
        }
        std::vector<Frames*> batch;
        for (nb::handle h : frames) {
          if (!nb::isinstance<Frames>(h)) {
            throw nb::type_error(
                "convert_frames takes Frames or a sequence of Frames");
          }
          batch.push_back(&live(nb::cast<Frames&>(h)));
        }
        nb::gil_scoped_release release;
        return media::convert_frames(std::move(batch));
      },
      nb::arg("frames"));
  m.def(
      "load_video",
      [](nb::handle src, std::optional<Window> window,
         const media::DemuxConfig& demux, const media::DecodeConfig& decode,
         const std::optional<std::string>& filter_desc,
         const std::string& pix_fmt, std::optional<int64_t> max_frames,
         const std::string& name, bool image) {
        media::Source source = source_from(src);
        media::VideoOptions o{window,      demux,   decode,
                              filter_desc, pix_fmt, max_frames};
        nb::gil_scoped_release release;
        return image ? media::load_image_ffmpeg(std::move(source), o, name)
                     : media::load_video(std::move(source), o, name);
      },
      nb::arg("src"), nb::arg("window").none(), nb::arg("demux_config"),
      nb::arg("decode_config"), nb::arg("filter_desc").none(),
      nb::arg("pix_fmt"), nb::arg("max_frames").none(), nb::arg("name"),
      nb::arg("image"));
  m.def("buffer_source_desc", &media::buffer_source_desc, nb::arg("codec"),
        nb::arg("label"), nb::arg("format"));
  m.def(
      "buffer_view",
      [](nb::handle data, const std::string& dtype,
         const std::vector<int64_t>& shape) {
        Buffer bytes = bytes_from_python(data);
        for (int d = 0; d <= static_cast<int>(DType::kComplex128); ++d) {
          const auto t = static_cast<DType>(d);
          if (dtype != dtype_name(t)) continue;
          int64_t n = 1;
          for (int64_t s : shape) n *= s;
          if (static_cast<std::size_t>(n) * dtype_size(t) != bytes.nbytes())
            throw InvalidArgument(
                "buffer_view: the shape does not fit the bytes");
          return Buffer::view(bytes.owner(), bytes.data(), t, shape, {},
                              bytes.writable());
        }
        throw InvalidArgument("buffer_view: unknown dtype " + dtype);
      },
      nb::arg("data"), nb::arg("dtype"), nb::arg("shape"));
  m.def("ffmpeg_filters", &media::ffmpeg_filters);
  m.def("ffmpeg_log_level", &media::ffmpeg_log_level);

  // Pipeline ops. Packets and Frames travel between native stages as owned
  // objects and reach Python as Packets/Frames (a Python Packets or Frames
  // given to a native stage is consumed).
  register_to_python(typeid(PacketsItem), &unique_to_python<Packets>);
  register_from_python(typeid(PacketsItem), &unique_from_python<Packets>);
  register_to_python(typeid(FramesItem), &unique_to_python<Frames>);
  register_from_python(typeid(FramesItem), &unique_from_python<Frames>);
  register_from_python(typeid(ClipRequest), &clip_from_python);
  register_type_name(typeid(PacketsItem), "feedline.io.Packets");
  register_type_name(typeid(FramesItem), "feedline.io.Frames");
  register_type_name(typeid(ClipRequest), "(src, start, end) clip");

  m.def(
      "load_video_op",
      [](std::optional<Window> window, const media::DemuxConfig& demux,
         const media::DecodeConfig& decode,
         const std::optional<std::string>& filter_desc,
         const std::string& pix_fmt, std::optional<int64_t> max_frames) {
        return native_op(
            ops::load_video(media::VideoOptions{
                window, demux, decode, filter_desc, pix_fmt, max_frames}),
            "load_video");
      },
      nb::arg("window").none(), nb::arg("demux_config"),
      nb::arg("decode_config"), nb::arg("filter_desc").none(),
      nb::arg("pix_fmt"), nb::arg("max_frames").none());
  m.def(
      "load_video_clips_op",
      [](const media::DemuxConfig& demux, const media::DecodeConfig& decode,
         const std::optional<std::string>& filter_desc,
         const std::string& pix_fmt, std::optional<int64_t> max_frames) {
        return native_op(
            ops::load_video_clips(media::VideoOptions{
                std::nullopt, demux, decode, filter_desc, pix_fmt, max_frames}),
            "load_video_clips");
      },
      nb::arg("demux_config"), nb::arg("decode_config"),
      nb::arg("filter_desc").none(), nb::arg("pix_fmt"),
      nb::arg("max_frames").none());
  m.def(
      "demux_op",
      [](Media media, std::optional<Window> window,
         const media::DemuxConfig& demux) {
        return native_op(ops::demux(media, window, demux),
                         std::string("demux_") + media::media_name(media));
      },
      nb::arg("media"), nb::arg("window").none(), nb::arg("demux_config"));
  m.def(
      "decode_packets_op",
      [](const std::optional<std::string>& filter_desc, bool default_filter,
         const media::DecodeConfig& decode, std::optional<int64_t> num_frames) {
        return native_op(ops::decode_packets(
                             {default_filter, filter_desc, decode, num_frames}),
                         "decode_packets");
      },
      nb::arg("filter_desc").none(), nb::arg("default_filter"),
      nb::arg("decode_config"), nb::arg("num_frames").none());
  m.def("convert_frames_op",
        [] { return native_op(ops::convert_frames(), "convert_frames"); });
}

}  // namespace feedline::bindings
