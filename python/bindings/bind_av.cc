// SPDX-License-Identifier: Apache-2.0
//
// feedline.io's FFmpeg objects: Demuxer, Packets, Frames, Codec, Decoder,
// FilterGraph, and the functions that connect them. The Python package
// (feedline/io/_av.py) arranges these into SPDL's API.
//
// GIL: demuxing, decoding, filtering and converting run with it released;
// property reads hold it (they are cheap). A consumed Packets or Frames
// throws media::ObjectConsumed, which becomes TypeError (module.cc).

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/io/file.h"
#include "feedline/media/av.h"
#include "feedline/ops/av_ops.h"

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

// f(obj, args...) with the GIL released, for a function f that consumes
// `obj` (a Packets or Frames; see consuming_detached()). The other
// arguments are copied first: a config object held by Python could be
// changed by another thread while f reads it.
template <typename T, typename... Args, typename F>
auto consuming(F f) {
  return [f](T& obj, Args... args) {
    std::tuple<std::decay_t<Args>...> held(args...);
    return consuming_detached(obj, [&](T&& mine) {
      return std::apply(
          [&](const auto&... a) { return f(std::move(mine), a...); }, held);
    });
  };
}

// Serialized Packets smaller than this are copied with the GIL held.
constexpr std::size_t kCopyWithGilBelow = std::size_t{1} << 20;

nb::tuple rational_tuple(Rational r) { return nb::make_tuple(r.num, r.den); }

// A time in seconds as media::parse_time() reads it: str(value) of an int,
// float, Fraction, Decimal or str (other objects' text does not parse).
std::string time_text(nb::handle value) { return nb::str(value).c_str(); }

// The window [start, end) in seconds; end None or inf: to the end.
Window window_from_times(nb::handle start, nb::handle end) {
  if (end.is_none()) return media::parse_window(time_text(start), {});
  return media::parse_window(time_text(start), time_text(end));
}

nb::object window_to_python(const std::optional<Window>& w) {
  if (!w) return nb::none();
  return nb::make_tuple(
      w->start.to_double(),
      w->end ? nb::cast(w->end->to_double()) : nb::cast(INFINITY));
}

// A path/URL (str or os.PathLike) or a bytes-like object.
media::Source source_from(nb::handle src) {
  if (auto path = path_from(src)) return media::Source{*path, {}, nullptr};
  return ops::memory_source(bytes_from_python(src));
}

// A clip request from Python: (src, start, end), (src, Window),
// (src, (start, end)) or (src, None); src a path or bytes.
Item clip_from_python(nb::handle obj) {
  const size_t n = nb::isinstance<nb::tuple>(obj) ? nb::len(obj) : 0;
  if (n != 2 && n != 3)
    throw InvalidArgument(
        "a clip is (path or bytes, start, end) or "
        "(path or bytes, window or None)");
  nb::tuple t = nb::borrow<nb::tuple>(obj);
  std::optional<Window> window;
  if (n == 3) {
    window = window_from_times(t[1], t[2]);
  } else if (nb::isinstance<Window>(t[1])) {
    window = nb::cast<Window>(t[1]);
  } else if (!t[1].is_none()) {
    nb::handle w = t[1];
    if (!nb::isinstance<nb::tuple>(w) || nb::len(w) != 2)
      throw InvalidArgument("a window is (start, end)");
    window = window_from_times(w[0], w[1]);
  }
  if (auto path = path_from(t[0]))
    return Item(ClipRequest::from_path(*path, window));
  return Item(ClipRequest::from_bytes(
      ops::EncodedFile::unnamed(bytes_from_python(t[0])), window));
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
  return Item(nb::cast<T&>(obj).take());
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
              nb::arg().none())
      .def_rw("allow_unsafe_formats",
              &media::DemuxConfig::allow_unsafe_formats);
  nb::class_<media::DecodeConfig>(m, "DecodeConfig")
      .def(nb::init<>())
      .def_ro_static("AUTO_THREADS", &media::DecodeConfig::kAutoThreads)
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
      .def_prop_ro("src", &Packets::src)
      .def_prop_ro("stream_index", &Packets::stream_index)
      .def_prop_ro("time_base",
                   [](Packets& p) { return rational_tuple(p.time_base()); })
      .def_prop_ro(
          "timestamp", [](Packets& p) { return window_to_python(p.window()); },
          "The window (start, end) in seconds, or None.")
      .def_prop_ro("codec", &Packets::codec,
                   "The stream's Codec, or None for streamed packets.")
      .def_prop_ro("num_packets", &Packets::num_packets,
                   "All packets held, including those before the window.")
      .def_prop_ro("consumed", &Packets::consumed)
      .def("__len__", &Packets::size)
      .def(
          "get_timestamps",
          [](Packets& p, bool raw) { return p.timestamps(raw); }, nb::kw_only(),
          nb::arg("raw") = false,
          "Presentation times (s) of the packets in the window, sorted; "
          "with raw=True all of them, in stored order.")
      .def("clone", &Packets::clone,
           "A copy sharing every payload (no data is copied); the payloads "
           "of deserialize_view packets are copied, so that the copy "
           "outlives the viewed memory.")
      .def(
          "_payloads",
          [](const Packets& p) {
            nb::list out;
            for (std::size_t i = 0; i < p.num_packets(); ++i) {
              const auto d = p.packet(i).data;
              out.append(
                  nb::bytes(reinterpret_cast<const char*>(d.data()), d.size()));
            }
            return out;
          },
          "Each packet's payload as bytes (for tests and debugging).")
      .def(
          "serialize",
          [](const Packets& p) {
            const std::size_t n = media::serialized_size(p);
            nb::object out = nb::steal(
                PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n)));
            if (!out.is_valid()) throw nb::python_error();
            std::span<uint8_t> span(
                reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(out.ptr())), n);
            // A small copy is made with the GIL held (no other thread can
            // change `p` meanwhile), which costs less than the clone that a
            // copy without the GIL needs (45 us for 300 packets).
            if (n < kCopyWithGilBelow) {
              media::serialize_packets_into(p, span);
            } else {
              reading_detached(p, [&](const Packets& mine) {
                media::serialize_packets_into(mine, span);
              });
            }
            return nb::borrow<nb::bytes>(out);
          },
          "The packets as bytes (for another process, or shared memory).")
      .def_static(
          "deserialize",
          [](nb::handle data) {
            Buffer blob = bytes_from_python(data);
            ReleaseGil release;
            return media::deserialize_packets(blob, false);
          },
          nb::arg("data"),
          "Packets from serialize() output (bytes-like), copied.")
      .def_static(
          "deserialize_view",
          [](nb::handle data) {
            Buffer blob = bytes_from_python(data);
            ReleaseGil release;
            return media::deserialize_packets(blob, true);
          },
          nb::arg("data"),
          "Packets from serialize() output whose payloads stay in `data` (a "
          "bytes-like object, e.g. a memoryview of shared memory), which they "
          "keep alive; nothing is copied. `data` must not change while they "
          "live.")
      .def("__repr__", &Packets::to_string);
  nb::class_<media::AudioPackets, Packets>(m, "AudioPackets");
  nb::class_<media::VideoPackets, Packets>(m, "VideoPackets");
  nb::class_<media::ImagePackets, Packets>(m, "ImagePackets");

  m.def(
      "deserialize_packets",
      [](nb::handle data, bool view, const std::string& name) {
        Buffer blob = bytes_from_python(data);
        ReleaseGil release;
        return media::deserialize_packets(blob, view, name);
      },
      nb::arg("data"), nb::arg("view") = false, nb::arg("name") = "",
      "Packets from Packets.serialize() output; with view=True the payloads "
      "stay in `data` (kept alive) instead of being copied.");

  nb::class_<media::BitstreamFilter>(
      m, "BSF", "A bit-stream filter (or chain) for packets of one codec.")
      .def(nb::init<const Codec&, const std::string&>(), nb::arg("codec"),
           nb::arg("bsf"))
      .def_prop_ro("codec", &media::BitstreamFilter::codec,
                   "The codec of the packets that come out.")
      .def_prop_ro("bsf", &media::BitstreamFilter::filters)
      .def(
          "_filter",
          [](media::BitstreamFilter& f, Packets& packets, bool flush) {
            return consuming_detached(packets, [&](Packets&& mine) {
              return f.filter(std::move(mine), flush);
            });
          },
          nb::arg("packets"), nb::arg("flush") = false)
      .def("_flush",
           [](media::BitstreamFilter& f) {
             ReleaseGil release;
             return f.flush();
           })
      .def("__repr__", [](const media::BitstreamFilter& f) {
        return "BSF<\"" + f.filters() + "\", " + f.codec().to_string() + ">";
      });

  nb::class_<Frames>(m, "Frames", "Decoded frames.")
      .def_prop_ro("media", &Frames::media)
      .def_prop_ro("num_frames", &Frames::num_frames)
      .def("__len__", &Frames::num_frames)
      .def_prop_ro("format", &Frames::format)
      .def_prop_ro("width", &Frames::width)
      .def_prop_ro("height", &Frames::height)
      .def_prop_ro("num_planes", &Frames::num_planes)
      .def_prop_ro("sample_rate", &Frames::sample_rate)
      .def_prop_ro("num_channels", &Frames::num_channels)
      .def_prop_ro("time_base",
                   [](Frames& f) { return rational_tuple(f.time_base()); })
      .def_prop_ro("metadata", &Frames::metadata)
      .def_prop_ro("consumed", &Frames::consumed)
      .def("get_pts", &Frames::pts)
      .def("get_timestamps", &Frames::timestamps)
      .def("clone", &Frames::clone,
           "A copy sharing every frame's data (no data is copied).")
      .def("_select", &Frames::select)
      .def("_image", &Frames::image)
      .def("_extend",
           [](Frames& f, Frames& other) { f.extend(std::move(other)); })
      .def(
          "serialize",
          [](const Frames& f) {
            const Buffer blob = reading_detached(f, [](const Frames& mine) {
              return media::serialize_frames(mine);
            });
            return nb::bytes(blob.data_as<const char>(), blob.nbytes());
          },
          "The frames as bytes (for another process); planes are copied.")
      .def_static(
          "deserialize",
          [](nb::handle data) {
            Buffer blob = bytes_from_python(data);
            ReleaseGil release;
            return media::deserialize_frames(blob);
          },
          nb::arg("data"), "Frames from serialize() output (copied).")
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
            // A copy: Python may change `config` while the GIL is released.
            const media::DemuxConfig held =  // NOLINT(performance-*)
                config;
            ReleaseGil release;
            new (self) media::Demuxer(std::move(source), held, name);
          },
          nb::arg("src"), nb::arg("config"), nb::arg("name"))
      .def_prop_ro("name", &media::Demuxer::name)
      .def_prop_ro("num_streams", &media::Demuxer::num_streams)
      .def_prop_ro("duration", &media::Demuxer::duration)
      .def("has_audio", &media::Demuxer::has_audio)
      .def("rewind", &media::Demuxer::rewind, nb::call_guard<ReleaseGil>())
      .def("best_stream", &media::Demuxer::best_stream)
      .def("codec", &media::Demuxer::codec)
      .def("stream_codec", &media::Demuxer::stream_codec)
      .def("demux", &media::Demuxer::demux, nb::arg("media"),
           nb::arg("window").none(), nb::call_guard<ReleaseGil>())
      .def("next_chunk", &media::Demuxer::next_chunk, nb::arg("streams"),
           nb::arg("duration"), nb::arg("num_packets"),
           nb::call_guard<ReleaseGil>());

  nb::class_<media::Decoder>(m, "Decoder")
      .def(nb::init<const Codec&, const std::optional<std::string>&,
                    const media::DecodeConfig&, std::string>(),
           nb::arg("codec"), nb::arg("filter_desc").none(), nb::arg("config"),
           nb::arg("name") = "")
      .def(
          "decode",
          [](media::Decoder& d, Packets& packets,
             std::optional<int64_t> max_frames) {
            return consuming_detached(packets, [&](Packets&& mine) {
              return d.decode(std::move(mine), max_frames);
            });
          },
          nb::arg("packets"), nb::arg("max_frames").none() = nb::none())
      .def("flush", &media::Decoder::flush, nb::call_guard<ReleaseGil>());

  nb::class_<media::FilterGraph>(m, "FilterGraph")
      .def(nb::init<const std::string&>(), nb::arg("filter_desc"))
      .def_prop_ro("inputs", &media::FilterGraph::inputs)
      .def_prop_ro("outputs", &media::FilterGraph::outputs)
      .def(
          "add_frames",
          [](media::FilterGraph& g, Frames& frames, const std::string& key) {
            consuming_detached(frames, [&](Frames&& mine) {
              g.add_frames(std::move(mine), key);
            });
          },
          nb::arg("frames"), nb::arg("key") = "")
      .def("flush", &media::FilterGraph::flush, nb::call_guard<ReleaseGil>())
      .def("get_frames", &media::FilterGraph::get_frames, nb::arg("key") = "",
           nb::call_guard<ReleaseGil>())
      .def("dump", &media::FilterGraph::dump);

  m.def("decode_packets",
        consuming<Packets, const std::optional<std::string>&,
                  const media::DecodeConfig&, std::optional<int64_t>>(
            &media::decode_packets),
        nb::arg("packets"), nb::arg("filter_desc").none(), nb::arg("config"),
        nb::arg("num_frames").none());
  m.def(
      "sample_decode_video",
      consuming<Packets, const std::vector<int64_t>&,
                const std::optional<std::string>&, const media::DecodeConfig&>(
          &media::sample_decode_video),
      nb::arg("packets"), nb::arg("indices"), nb::arg("filter_desc").none(),
      nb::arg("config"));
  m.def("convert_frames", consuming<Frames>([](Frames&& f) {
          return media::convert_frames(std::move(f));
        }),
        nb::arg("frames"));
  m.def(
      "convert_frames",
      [](const std::vector<Frames*>& frames) {
        for (std::size_t i = 0; i < frames.size(); ++i) {
          if (frames[i] == nullptr)
            throw InvalidArgument("convert_frames: item " + std::to_string(i) +
                                  " of the list is None, not Frames");
          for (std::size_t j = 0; j < i; ++j) {
            if (frames[j] == frames[i])
              throw InvalidArgument(
                  "convert_frames: items " + std::to_string(j) + " and " +
                  std::to_string(i) + " of the list are one Frames object");
          }
        }
        // Clones, as consuming_detached() explains: other threads may use
        // the originals meanwhile; each original is consumed, under the
        // GIL, when the batch is converted.
        std::vector<std::unique_ptr<Frames>> copies;
        std::vector<Frames*> mine;
        for (Frames* f : frames) {
          copies.push_back(f->clone());
          mine.push_back(copies.back().get());
        }
        Buffer out;
        {
          ReleaseGil release;
          out = media::convert_frames(mine);
        }
        // The GIL is held again: no other thread can consume one of the
        // originals between the checks and the takes, so either every
        // original is consumed or (one was consumed meanwhile) none is.
        for (Frames* f : frames) f->check();
        for (Frames* f : frames) f->take();
        return out;
      },
      nb::arg("frames"));
  nb::class_<media::VideoOptions>(m, "VideoOptions")
      .def(
          "__init__",
          [](media::VideoOptions* self, std::optional<Window> window,
             const media::DemuxConfig& demux, const media::DecodeConfig& decode,
             const std::optional<std::string>& filter_desc,
             const std::string& pix_fmt, std::optional<int64_t> max_frames) {
            new (self) media::VideoOptions{window,      demux,   decode,
                                           filter_desc, pix_fmt, max_frames};
          },
          nb::arg("window").none(), nb::arg("demux_config"),
          nb::arg("decode_config"), nb::arg("filter_desc").none(),
          nb::arg("pix_fmt"), nb::arg("max_frames").none());
  m.def(
      "load_video",
      [](nb::handle src, const media::VideoOptions& o, const std::string& name,
         bool image) {
        media::Source source = source_from(src);
        ReleaseGil release;
        return image ? media::load_image_ffmpeg(std::move(source), o, name)
                     : media::load_video(std::move(source), o, name);
      },
      nb::arg("src"), nb::arg("options"), nb::arg("name"), nb::arg("image"));
  m.def("buffer_source_desc", &media::buffer_source_desc, nb::arg("codec"),
        nb::arg("label"), nb::arg("format"));
  m.def(
      "buffer_view",
      [](nb::handle data, const std::string& dtype,
         std::vector<int64_t> shape) {
        return bytes_from_python(data).view_as(dtype_from_name(dtype),
                                               std::move(shape));
      },
      nb::arg("data"), nb::arg("dtype"), nb::arg("shape"));
  m.def("ffmpeg_filters", &media::ffmpeg_filters);
  m.def("ffmpeg_decoders", &media::ffmpeg_decoders);
  m.def("ffmpeg_log_level", &media::ffmpeg_log_level);

  // Pipeline ops. Packets and Frames travel between native stages as owned
  // objects and reach Python as Packets/Frames (a Python Packets or Frames
  // given to a native stage is consumed).
  register_type(typeid(PacketsItem), "feedline.io.Packets",
                &unique_to_python<Packets>, &unique_from_python<Packets>);
  register_type(typeid(FramesItem), "feedline.io.Frames",
                &unique_to_python<Frames>, &unique_from_python<Frames>);
  register_type(typeid(ClipRequest), "(src, start, end) clip", nullptr,
                &clip_from_python);

  m.def(
      "load_video_op",
      [](const media::VideoOptions& o) {
        return NativeOp{ops::load_video(o), "load_video"};
      },
      nb::arg("options"));
  m.def(
      "load_video_clips_op",
      [](const media::VideoOptions& o) {
        return NativeOp{ops::load_video_clips(o), "load_video_clips"};
      },
      nb::arg("options"), "The options' window is not used.");
  m.def(
      "demux_op",
      [](Media media, std::optional<Window> window,
         const media::DemuxConfig& demux) {
        return NativeOp{ops::demux(media, window, demux),
                        std::string("demux_") + media::media_name(media)};
      },
      nb::arg("media"), nb::arg("window").none(), nb::arg("demux_config"));
  m.def(
      "decode_packets_op",
      [](const std::optional<std::string>& filter_desc, bool default_filter,
         const media::DecodeConfig& decode, std::optional<int64_t> num_frames) {
        return NativeOp{ops::decode_packets(
                            {default_filter, filter_desc, decode, num_frames}),
                        "decode_packets"};
      },
      nb::arg("filter_desc").none(), nb::arg("default_filter"),
      nb::arg("decode_config"), nb::arg("num_frames").none());
  m.def("convert_frames_op", [] {
    return NativeOp{ops::convert_frames(), "convert_frames"};
  });
}

}  // namespace feedline::bindings
