// SPDX-License-Identifier: Apache-2.0
//
// Filter graphs: FFmpeg's filters (scale, fps, trim, format, vstack, ...)
// between buffer sources and sinks.

#include <cinttypes>
#include <cstdio>
#include <string>
#include <string_view>

#include "media/ffmpeg/ffmpeg.h"

namespace feedline {
namespace media::ffmpeg {

namespace {

struct InOutDeleter {
  void operator()(AVFilterInOut* p) const { avfilter_inout_free(&p); }
};

std::string rational_text(AVRational r) {
  return std::to_string(r.num) + "/" + std::to_string(r.den);
}

std::string layout_text(const AVChannelLayout& l) {
  if (l.order == AV_CHANNEL_ORDER_NATIVE) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, l.u.mask);
    return buf;
  }
  return std::to_string(l.nb_channels) + "c";
}

bool is_source(std::string_view filter) {
  return filter == "buffer" || filter == "abuffer";
}
bool is_sink(std::string_view filter) {
  return filter == "buffersink" || filter == "abuffersink";
}

}  // namespace

ParsedGraph parse_graph(const std::string& desc) {
  quiet_logging();
  ParsedGraph out;
  out.graph.reset(avfilter_graph_alloc());
  if (!out.graph) throw std::bad_alloc();
  out.graph->nb_threads = 1;
  AVFilterInOut* in = nullptr;
  AVFilterInOut* outs = nullptr;
  int rc = avfilter_graph_parse2(out.graph.get(), desc.c_str(), &in, &outs);
  std::unique_ptr<AVFilterInOut, InOutDeleter> in_owner(in);
  std::unique_ptr<AVFilterInOut, InOutDeleter> out_owner(outs);
  if (rc < 0) {
    throw InvalidArgument("cannot parse the filter description '" + desc +
                          "': " + av_error_text(rc));
  }
  if (in != nullptr || outs != nullptr) {
    throw InvalidArgument("the filter description '" + desc +
                          "' leaves pads unconnected (every input needs a "
                          "buffer/abuffer source and every output a "
                          "buffersink/abuffersink)");
  }
  rc = avfilter_graph_config(out.graph.get(), nullptr);
  if (rc < 0) {
    throw InvalidArgument("cannot configure the filter graph '" + desc +
                          "': " + av_error_text(rc));
  }
  for (unsigned i = 0; i < out.graph->nb_filters; ++i) {
    AVFilterContext* f = out.graph->filters[i];
    if (is_source(f->filter->name)) out.inputs[f->name] = f;
    if (is_sink(f->filter->name)) out.outputs[f->name] = f;
  }
  return out;
}

std::string frame_source_desc(const AVFrame* f, AVRational tb, bool audio) {
  if (audio) {
    return "abuffer=time_base=" + rational_text(tb) +
           ":sample_rate=" + std::to_string(f->sample_rate) +
           ":sample_fmt=" + sample_fmt_name(f->format) +
           ":channel_layout=" + layout_text(f->ch_layout);
  }
  AVRational sar = f->sample_aspect_ratio;
  if (sar.num <= 0 || sar.den <= 0) sar = AVRational{0, 1};
  return "buffer=video_size=" + std::to_string(f->width) + "x" +
         std::to_string(f->height) + ":pix_fmt=" + pix_fmt_name(f->format) +
         ":time_base=" + rational_text(tb) +
         ":pixel_aspect=" + rational_text(sar);
}

Chain::Chain(std::string middle, bool audio, AVRational in_time_base,
             std::string_view name)
    : middle_(std::move(middle)),
      audio_(audio),
      in_tb_(in_time_base),
      name_(name) {}

void Chain::start(const AVFrame* frame) {
  if (audio_) check_audio_rate(frame->sample_rate, name_);
  source_ = frame_source_desc(frame, in_tb_, audio_);
  const std::string desc =
      source_ + "," + middle_ + "," + (audio_ ? "abuffersink" : "buffersink");
  graph_ = parse_graph(desc);
  if (graph_.inputs.size() != 1 || graph_.outputs.size() != 1) {
    throw InvalidArgument(name_ + ": the filter '" + middle_ +
                          "' must be one chain without sources or sinks");
  }
  src_ = graph_.inputs.begin()->second;
  sink_ = graph_.outputs.begin()->second;
}

void Chain::push(const AVFrame* frame) {
  if (frame != nullptr && started()) {
    std::string source = frame_source_desc(frame, in_tb_, audio_);
    if (source != source_ && audio_) {
      // FFmpeg's abuffer refuses a frame of another rate, format or layout
      // (MP3 and ADTS streams may switch) with a bare "Invalid argument".
      throw DecodeError(name_ + ": the audio frames change mid-stream from '" +
                        source_ + "' to '" + source + "'; the filter '" +
                        middle_ +
                        "' is set up for the first (load_audio resamples "
                        "such a stream to one layout and rate)");
    }
    if (source != source_) {
      // FFmpeg's buffer source passes such a frame on to filters configured
      // for the old size: crop would read past a smaller frame. The graph
      // so far ends (its last frames are pulled first) and a new one takes
      // the new frames.
      const int rc = av_buffersrc_add_frame_flags(src_, nullptr, 0);
      if (rc < 0 && rc != AVERROR_EOF) {
        fail(name_, "the filter '" + middle_ + "' failed to finish", rc);
      }
      ended_.push_back({std::move(graph_), sink_});
      graph_ = {};
      src_ = sink_ = nullptr;
      const std::string before = source_;
      try {
        start(frame);
      } catch (const InvalidArgument& e) {
        throw DecodeError(
            name_ + ": the video frames change mid-stream from '" + before +
            "' to '" + source + "', and the filter '" + middle_ +
            "' does not take the new ones: " + e.what());
      }
    }
  }
  if (!started()) {
    if (frame == nullptr) return;
    start(frame);
  }
  const int rc = av_buffersrc_add_frame_flags(src_, const_cast<AVFrame*>(frame),
                                              AV_BUFFERSRC_FLAG_KEEP_REF);
  if (rc < 0 && rc != AVERROR_EOF) {
    fail(name_, "the filter '" + middle_ + "' rejected a frame", rc);
  }
}

int Chain::pull(AVFrame* out) {
  while (!ended_.empty()) {
    const int rc = av_buffersink_get_frame(ended_.front().sink, out);
    if (rc == 0) return 0;
    if (rc != AVERROR(EAGAIN) && rc != AVERROR_EOF) {
      fail(name_, "the filter '" + middle_ + "' failed", rc);
    }
    ended_.pop_front();  // finished: it was sent the end
  }
  if (!started()) return AVERROR(EAGAIN);
  const int rc = av_buffersink_get_frame(sink_, out);
  if (rc < 0 && rc != AVERROR(EAGAIN) && rc != AVERROR_EOF) {
    fail(name_, "the filter '" + middle_ + "' failed", rc);
  }
  return rc;
}

AVRational Chain::time_base() const {
  return started() ? av_buffersink_get_time_base(sink_) : in_tb_;
}

}  // namespace media::ffmpeg

namespace media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

class FilterGraph::Impl {
 public:
  explicit Impl(const std::string& desc) : desc_(desc), g_(parse_graph(desc)) {
    if (g_.outputs.empty()) {
      throw InvalidArgument("the filter graph '" + desc + "' has no sink");
    }
  }

  static AVFilterContext* find(
      const std::map<std::string, AVFilterContext*>& map,
      const std::string& key, const char* what) {
    if (key.empty()) {
      if (map.size() == 1) return map.begin()->second;
      std::string names;
      for (const auto& [k, v] : map) names += (names.empty() ? "" : ", ") + k;
      throw InvalidArgument(std::string("the filter graph has several ") +
                            what + "; name one of: " + names);
    }
    auto it = map.find(key);
    if (it == map.end()) {
      std::string names;
      for (const auto& [k, v] : map) names += (names.empty() ? "" : ", ") + k;
      throw InvalidArgument(std::string("the filter graph has no ") + what +
                            " '" + key + "'; it has: " + names);
    }
    return it->second;
  }

  void add(Frames&& frames, const std::string& key) {
    AVFilterContext* src = find(g_.inputs, key, "inputs");
    std::unique_ptr<Frames> owned = frames.take();
    const AVFilterLink* link = src->outputs[0];
    for (AVFrame* f : owned->frames()) {
      std::string mismatch;
      if (link->type == AVMEDIA_TYPE_VIDEO) {
        if (f->format != link->format)
          mismatch += " pix_fmt (" + pix_fmt_name(f->format) +
                      " != " + pix_fmt_name(link->format) + ")";
        if (f->width != link->w || f->height != link->h)
          mismatch += " video_size (" + std::to_string(f->width) + "x" +
                      std::to_string(f->height) +
                      " != " + std::to_string(link->w) + "x" +
                      std::to_string(link->h) + ")";
      } else {
        if (f->format != link->format)
          mismatch += " sample_fmt (" + sample_fmt_name(f->format) +
                      " != " + sample_fmt_name(link->format) + ")";
        if (f->sample_rate != link->sample_rate)
          mismatch += " sample_rate (" + std::to_string(f->sample_rate) +
                      " != " + std::to_string(link->sample_rate) + ")";
        if (f->ch_layout.nb_channels != link->ch_layout.nb_channels)
          mismatch +=
              " num_channels (" + std::to_string(f->ch_layout.nb_channels) +
              " != " + std::to_string(link->ch_layout.nb_channels) + ")";
      }
      if (!mismatch.empty()) {
        throw InvalidArgument("a frame does not match the filter input '" +
                              std::string(src->name) + "':" + mismatch);
      }
      const int rc = av_buffersrc_add_frame_flags(
          src, f, AV_BUFFERSRC_FLAG_KEEP_REF | AV_BUFFERSRC_FLAG_PUSH);
      if (rc < 0 && rc != AVERROR_EOF) {
        fail("filter graph", "cannot pass a frame to the filter", rc);
      }
    }
  }

  void flush() {
    for (auto& [k, src] : g_.inputs) {
      const int rc = av_buffersrc_add_frame_flags(src, nullptr, 0);
      if (rc < 0 && rc != AVERROR_EOF) fail("filter graph", "flush failed", rc);
    }
  }

  std::unique_ptr<Frames> get(const std::string& key) {
    AVFilterContext* sink = find(g_.outputs, key, "outputs");
    const bool audio = sink->inputs[0]->type == AVMEDIA_TYPE_AUDIO;
    auto out = make_frames(audio ? Media::kAudio : Media::kVideo,
                           from_av(av_buffersink_get_time_base(sink)));
    for (;;) {
      FramePtr f = new_frame();
      const int rc = av_buffersink_get_frame(sink, f.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) break;
      if (rc < 0) fail("filter graph", "filtering failed", rc);
      out->push(f.release());
    }
    if (out->empty()) return nullptr;
    return out;
  }

  std::vector<std::string> names(bool inputs) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : inputs ? g_.inputs : g_.outputs) out.push_back(k);
    return out;
  }

  std::string dump() const {
    char* text = avfilter_graph_dump(g_.graph.get(), nullptr);
    if (text == nullptr) return "";
    std::string out = text;
    av_free(text);
    return out;
  }

  std::atomic<std::thread::id> busy{};

 private:
  std::string desc_;
  ParsedGraph g_;
};

namespace {
constexpr const char* kGraph = "the FilterGraph";
}  // namespace

FilterGraph::FilterGraph(const std::string& desc)
    : impl_(std::make_unique<Impl>(desc)) {}
FilterGraph::~FilterGraph() = default;
std::vector<std::string> FilterGraph::inputs() const {
  BusyGuard busy(impl_->busy, kGraph);
  return impl_->names(true);
}
std::vector<std::string> FilterGraph::outputs() const {
  BusyGuard busy(impl_->busy, kGraph);
  return impl_->names(false);
}
void FilterGraph::add_frames(Frames&& frames, const std::string& key) {
  BusyGuard busy(impl_->busy, kGraph);
  impl_->add(std::move(frames), key);
}
void FilterGraph::flush() {
  BusyGuard busy(impl_->busy, kGraph);
  impl_->flush();
}
std::unique_ptr<Frames> FilterGraph::get_frames(const std::string& key) {
  BusyGuard busy(impl_->busy, kGraph);
  return impl_->get(key);
}
std::string FilterGraph::dump() const {
  BusyGuard busy(impl_->busy, kGraph);
  return impl_->dump();
}

std::string buffer_source_desc(const Codec& codec, const std::string& label,
                               const std::string& format) {
  const AVCodecParameters* p = codec.params();
  const std::string at = label.empty() ? "" : "@" + label;
  const AVRational tb = to_av(codec.time_base());
  if (codec.media() == Media::kAudio) {
    return "abuffer" + at + "=time_base=" + rational_text(tb) +
           ":sample_rate=" + std::to_string(p->sample_rate) + ":sample_fmt=" +
           (format.empty() ? sample_fmt_name(p->format) : format) +
           ":channel_layout=" + layout_text(p->ch_layout);
  }
  AVRational sar = p->sample_aspect_ratio;
  if (sar.num <= 0 || sar.den <= 0) sar = AVRational{0, 1};
  return "buffer" + at + "=video_size=" + std::to_string(p->width) + "x" +
         std::to_string(p->height) +
         ":pix_fmt=" + (format.empty() ? pix_fmt_name(p->format) : format) +
         ":time_base=" + rational_text(tb) +
         ":pixel_aspect=" + rational_text(sar);
}

std::vector<std::string> ffmpeg_filters() {
  std::vector<std::string> out;
  void* it = nullptr;
  while (const AVFilter* f = av_filter_iterate(&it)) out.emplace_back(f->name);
  return out;
}

int ffmpeg_log_level() { return av_log_get_level(); }

}  // namespace media
}  // namespace feedline
