// SPDX-License-Identifier: Apache-2.0
//
// feedline.io's FFmpeg objects: Demuxer, Packets, Frames, Codec, Decoder,
// FilterGraph, and the functions that connect them. The Python package
// (feedline/io/_av.py) arranges these into SPDL's API.
//
// GIL: demuxing, decoding, filtering and converting run with it released;
// property reads hold it (they are cheap). A consumed Packets or Frames
// raises TypeError, as in SPDL.

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

Rational rational_from(nb::handle t) {
  auto pair = nb::cast<std::pair<int64_t, int64_t>>(t);
  if (pair.second <= 0 || pair.first < INT32_MIN || pair.first > INT32_MAX ||
      pair.second > INT32_MAX) {
    throw InvalidArgument("a time must be a fraction with 32-bit parts");
  }
  return Rational{static_cast<int>(pair.first), static_cast<int>(pair.second)};
}

// None, or ((num, den), (num, den) | None).
std::optional<Window> window_from(nb::handle w) {
  if (w.is_none()) return std::nullopt;
  nb::tuple t = nb::cast<nb::tuple>(w);
  Window out;
  out.start = rational_from(t[0]);
  if (!t[1].is_none()) out.end = rational_from(t[1]);
  return out;
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
  Buffer bytes = bytes_from_python(src);
  auto owner = std::make_shared<Buffer>(bytes);
  return media::Source{"", span_of(*owner), owner};
}

nb::object frames_or_none(std::unique_ptr<Frames> f) {
  if (!f) return nb::none();
  return nb::cast(std::move(f));
}

using PacketsItem = std::unique_ptr<Packets>;
using FramesItem = std::unique_ptr<Frames>;

// One clip to load in a pipeline: a file (path, or bytes named by position)
// and an optional window. From Python: (src, start, end) or (src, None).
struct ClipRequest {
  std::string name;
  media::Source source;
  std::optional<Window> window;
};

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
  if (nb::len(t) == 3) {
    nb::object fractions = nb::module_::import_("feedline.io._av");
    r.window =
        window_from(fractions.attr("_window")(nb::make_tuple(t[1], t[2])));
  } else if (!t[1].is_none()) {
    nb::object fractions = nb::module_::import_("feedline.io._av");
    r.window = window_from(fractions.attr("_window")(t[1]));
  }
  return Item(std::move(r));
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

// Functions applied by the native ops below.
class FnOp final : public MapOp {
 public:
  using Fn = std::function<Item(Item)>;
  explicit FnOp(Fn fn) : fn_(std::move(fn)) {}
  Item call(Item input) override { return fn_(std::move(input)); }

 private:
  const Fn fn_;
};

NativeOp fn_op(std::string name, const std::type_info& in,
               const std::type_info& out, FnOp::Fn fn) {
  return NativeOp{std::make_shared<FnOp>(std::move(fn)), std::move(name), &in,
                  &out};
}

media::VideoOptions video_options(nb::handle window, const media::DemuxConfig& demux,
                               const media::DecodeConfig& decode,
                               const std::optional<std::string>& filter_desc,
                               const std::string& pix_fmt, int64_t max_frames) {
  media::VideoOptions o;
  o.window = window_from(window);
  o.demux = demux;
  o.decode = decode;
  o.filter_desc = filter_desc;
  o.pix_fmt = pix_fmt;
  o.max_frames = max_frames;
  return o;
}

// SPDL's default chain: audio trimmed to the window as float planar;
// video and images as rgb24 (the decoder applies video windows itself).
std::string default_filter_desc(const Packets& p) {
  if (p.media() != Media::kAudio) return "format=pix_fmts=rgb24";
  std::string out;
  if (const auto& w = p.window()) {
    out = "atrim=start=" + std::to_string(w->start.to_double());
    if (w->end) out += ":end=" + std::to_string(w->end->to_double());
    out += ",";
  }
  return out + "aformat=sample_fmts=fltp";
}

media::Source memory_source(const Buffer& bytes) {
  auto owner = std::make_shared<Buffer>(bytes);
  return media::Source{"", span_of(*owner), owner};
}

}  // namespace

void bind_av(nb::module_& m) {
  nb::enum_<Media>(m, "Media")
      .value("AUDIO", Media::kAudio)
      .value("VIDEO", Media::kVideo)
      .value("IMAGE", Media::kImage);

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
      .def_prop_ro("src", [](Packets& p) { return live(p).src(); })
      .def_prop_ro("stream_index",
                   [](Packets& p) { return live(p).stream_index(); })
      .def_prop_ro(
          "time_base",
          [](Packets& p) { return rational_tuple(live(p).time_base()); })
      .def_prop_ro(
          "timestamp",
          [](Packets& p) { return window_to_python(live(p).window()); },
          "The window (start, end) in seconds, or None.")
      .def_prop_ro(
          "codec", [](Packets& p) { return live(p).codec(); },
          "The stream's Codec, or None for streamed packets.")
      .def_prop_ro(
          "num_packets", [](Packets& p) { return live(p).num_packets(); },
          "All packets held, including those before the window.")
      .def_prop_ro("consumed", &Packets::consumed)
      .def("__len__", [](Packets& p) { return live(p).size(); })
      .def(
          "get_timestamps",
          [](Packets& p, bool raw) { return live(p).timestamps(raw); },
          nb::kw_only(), nb::arg("raw") = false,
          "Presentation times (s) of the packets in the window, sorted; "
          "with raw=True all of them, in stored order.")
      .def(
          "clone", [](Packets& p) { return live(p).clone(); },
          "A copy sharing every payload (no data is copied).")
      .def("__repr__", &Packets::to_string);
  nb::class_<media::AudioPackets, Packets>(m, "AudioPackets");
  nb::class_<media::VideoPackets, Packets>(m, "VideoPackets");
  nb::class_<media::ImagePackets, Packets>(m, "ImagePackets");

  nb::class_<Frames>(m, "Frames", "Decoded frames.")
      .def_prop_ro("media", &Frames::media)
      .def_prop_ro("num_frames", [](Frames& f) { return live(f).num_frames(); })
      .def("__len__", [](Frames& f) { return live(f).num_frames(); })
      .def_prop_ro("format", [](Frames& f) { return live(f).format(); })
      .def_prop_ro("width", [](Frames& f) { return live(f).width(); })
      .def_prop_ro("height", [](Frames& f) { return live(f).height(); })
      .def_prop_ro("num_planes", [](Frames& f) { return live(f).num_planes(); })
      .def_prop_ro("sample_rate",
                   [](Frames& f) { return live(f).sample_rate(); })
      .def_prop_ro("num_channels",
                   [](Frames& f) { return live(f).num_channels(); })
      .def_prop_ro(
          "time_base",
          [](Frames& f) { return rational_tuple(live(f).time_base()); })
      .def_prop_ro("metadata", [](Frames& f) { return live(f).metadata(); })
      .def_prop_ro("consumed", &Frames::consumed)
      .def("get_pts", [](Frames& f) { return live(f).pts(); })
      .def("get_timestamps", [](Frames& f) { return live(f).timestamps(); })
      .def(
          "clone", [](Frames& f) { return live(f).clone(); },
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
          [](media::Demuxer* self, nb::handle src, const media::DemuxConfig& config,
             const std::string& name) {
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
      .def(
          "demux",
          [](media::Demuxer& d, Media media, nb::handle window) {
            std::optional<Window> w = window_from(window);
            nb::gil_scoped_release release;
            return d.demux(media, w);
          },
          nb::arg("media"), nb::arg("window").none())
      .def(
          "next_chunk",
          [](media::Demuxer& d, const std::vector<int>& streams, double duration,
             int num_packets) {
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
          [](media::Decoder& d, Packets& packets, int64_t max_frames) {
            live(packets);
            nb::gil_scoped_release release;
            return d.decode(std::move(packets), max_frames);
          },
          nb::arg("packets"), nb::arg("max_frames") = -1)
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
         const media::DecodeConfig& config, int64_t num_frames) {
        live(packets);
        nb::gil_scoped_release release;
        return media::decode_packets(std::move(packets), filter_desc, config,
                                  num_frames);
      },
      nb::arg("packets"), nb::arg("filter_desc").none(), nb::arg("config"),
      nb::arg("num_frames"));
  m.def(
      "sample_decode_video",
      [](Packets& packets, const std::vector<int64_t>& indices,
         const std::optional<std::string>& filter_desc,
         const media::DecodeConfig& config) {
        live(packets);
        nb::gil_scoped_release release;
        return media::sample_decode_video(std::move(packets), indices, filter_desc,
                                       config);
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
      [](nb::handle src, nb::handle window, const media::DemuxConfig& demux,
         const media::DecodeConfig& decode,
         const std::optional<std::string>& filter_desc,
         const std::string& pix_fmt, int64_t max_frames,
         const std::string& name, bool image) {
        media::Source source = source_from(src);
        media::VideoOptions o = video_options(window, demux, decode, filter_desc,
                                           pix_fmt, max_frames);
        nb::gil_scoped_release release;
        return image ? media::load_image_ffmpeg(std::move(source), o, name)
                     : media::load_video(std::move(source), o, name);
      },
      nb::arg("src"), nb::arg("window").none(), nb::arg("demux_config"),
      nb::arg("decode_config"), nb::arg("filter_desc").none(),
      nb::arg("pix_fmt"), nb::arg("max_frames"), nb::arg("name"),
      nb::arg("image"));
  m.def(
      "buffer_source_desc",
      [](const Codec& codec, const std::string& label,
         const std::string& format) {
        return media::buffer_source_desc(codec, label, format);
      },
      nb::arg("codec"), nb::arg("label"), nb::arg("format"));
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
      [](nb::handle window, const media::DemuxConfig& demux,
         const media::DecodeConfig& decode,
         const std::optional<std::string>& filter_desc,
         const std::string& pix_fmt, int64_t max_frames) {
        media::VideoOptions o = video_options(window, demux, decode, filter_desc,
                                           pix_fmt, max_frames);
        return load_op("load_video", [o](const EncodedFile& f) {
          return media::load_video(memory_source(f.bytes), o, f.name);
        });
      },
      nb::arg("window").none(), nb::arg("demux_config"),
      nb::arg("decode_config"), nb::arg("filter_desc").none(),
      nb::arg("pix_fmt"), nb::arg("max_frames"));
  m.def(
      "load_video_clips_op",
      [](const media::DemuxConfig& demux, const media::DecodeConfig& decode,
         const std::optional<std::string>& filter_desc,
         const std::string& pix_fmt, int64_t max_frames) {
        media::VideoOptions base = video_options(nb::none(), demux, decode,
                                              filter_desc, pix_fmt, max_frames);
        return fn_op(
            "load_video_clips", typeid(ClipRequest), typeid(Buffer),
            [base](Item in) {
              ClipRequest r = in.take_as<ClipRequest>();
              media::VideoOptions o = base;
              o.window = r.window;
              if (!r.source.in_memory()) {
                // Memory-mapped: no read() copy of the file.
                Buffer bytes = map_file(r.source.url);
                return Item(media::load_video(memory_source(bytes), o, r.name));
              }
              return Item(media::load_video(r.source, o, r.name));
            });
      },
      nb::arg("demux_config"), nb::arg("decode_config"),
      nb::arg("filter_desc").none(), nb::arg("pix_fmt"), nb::arg("max_frames"));
  m.def(
      "demux_op",
      [](Media media, nb::handle window, const media::DemuxConfig& demux) {
        std::optional<Window> w = window_from(window);
        return fn_op(std::string("demux_") + media::media_name(media),
                     typeid(EncodedFile), typeid(PacketsItem),
                     [media, w, demux](Item in) {
                       const EncodedFile& f = in.as<EncodedFile>();
                       media::Demuxer d(memory_source(f.bytes), demux, f.name);
                       return Item(PacketsItem(d.demux(media, w)));
                     });
      },
      nb::arg("media"), nb::arg("window").none(), nb::arg("demux_config"));
  m.def(
      "decode_packets_op",
      [](const std::optional<std::string>& filter_desc, bool default_filter,
         const media::DecodeConfig& decode, int64_t num_frames) {
        return fn_op(
            "decode_packets", typeid(PacketsItem), typeid(FramesItem),
            [filter_desc, default_filter, decode, num_frames](Item in) {
              PacketsItem p = in.take_as<PacketsItem>();
              std::optional<std::string> fd = filter_desc;
              if (default_filter) fd = default_filter_desc(*p);
              return Item(FramesItem(
                  media::decode_packets(std::move(*p), fd, decode, num_frames)));
            });
      },
      nb::arg("filter_desc").none(), nb::arg("default_filter"),
      nb::arg("decode_config"), nb::arg("num_frames"));
  m.def("convert_frames_op", [] {
    return fn_op("convert_frames", typeid(FramesItem), typeid(Buffer),
                 [](Item in) {
                   FramesItem f = in.take_as<FramesItem>();
                   return Item(media::convert_frames(std::move(*f)));
                 });
  });
}

}  // namespace feedline::bindings
