// SPDX-License-Identifier: Apache-2.0
//
// The one place that includes FFmpeg headers: version checks, owners for
// every FFmpeg object feedline uses, opening inputs (paths, URLs, bytes in
// memory), option dictionaries, and the FFmpeg-error-to-exception
// converter. FFmpeg 5.1 (Debian 12) is the oldest version supported: it
// introduced the AVChannelLayout API used here. Differences between 5.1 and
// 9.x are handled here and nowhere else; `make ffmpeg-compat`
// (scripts/ffmpeg_headers_check.sh) compiles the code against newer
// FFmpeg headers, with deprecations as errors.

#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/media/av.h"

#if LIBAVCODEC_VERSION_MAJOR < 59
#error "feedline needs FFmpeg 5.1 or newer (libavcodec 59)"
#endif

namespace feedline::media::ffmpeg {

// The data argument of an AVIO write callback: const from libavformat 61.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using AvioWriteData = const uint8_t*;
#else
using AvioWriteData = uint8_t*;
#endif

// FFmpeg 5.1 declares swr_alloc_set_opts2's layouts non-const (later
// versions take const): a cast valid for every version.
inline AVChannelLayout* layout_arg(const AVChannelLayout* layout) {
  return const_cast<AVChannelLayout*>(layout);
}

// A copy of `layout` (the caller uninits it), with an unspecified channel
// order, which decoders of formats that name no layout report, read as the
// default layout of its channel count. Throws: std::bad_alloc.
inline AVChannelLayout known_layout(const AVChannelLayout& layout) {
  AVChannelLayout out{};
  if (layout.order == AV_CHANNEL_ORDER_UNSPEC) {
    av_channel_layout_default(&out, layout.nb_channels);
  } else if (av_channel_layout_copy(&out, &layout) < 0) {
    throw std::bad_alloc();
  }
  return out;
}

// FFmpeg's text for an error code.
std::string av_error_text(int code);

// Throws DecodeError("<name>: <what>: <FFmpeg's message>").
[[noreturn]] inline void fail(std::string_view name, const std::string& what,
                              int code) {
  throw DecodeError(std::string(name) + ": " + what + ": " +
                    av_error_text(code));
}

// The highest sample rate decoded audio may have. Real audio stays far
// below it (DSD decoded to PCM reaches a few MHz); a rate above it comes
// from a damaged header, and resampling from it sets up a filter as many
// taps long as the rates' ratio: 805 MHz to 8 kHz took 9 s.
inline constexpr int kMaxAudioSampleRate = 8'000'000;

// Throws DecodeError naming `name` when decoded audio's sample rate is
// above kMaxAudioSampleRate.
inline void check_audio_rate(int rate, std::string_view name) {
  if (rate > kMaxAudioSampleRate) {
    throw DecodeError(std::string(name) + ": the audio's sample rate, " +
                      std::to_string(rate) + " Hz, is above " +
                      std::to_string(kMaxAudioSampleRate) +
                      " Hz: a damaged header, not audio to resample");
  }
}

struct FormatDeleter {
  void operator()(AVFormatContext* p) const { avformat_close_input(&p); }
};
struct CodecDeleter {
  void operator()(AVCodecContext* p) const { avcodec_free_context(&p); }
};
struct FrameDeleter {
  void operator()(AVFrame* p) const { av_frame_free(&p); }
};
struct PacketDeleter {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwrDeleter {
  void operator()(SwrContext* p) const { swr_free(&p); }
};
struct SwsDeleter {
  void operator()(SwsContext* p) const { sws_freeContext(p); }
};
struct GraphDeleter {
  void operator()(AVFilterGraph* p) const { avfilter_graph_free(&p); }
};
struct AvioDeleter {
  void operator()(AVIOContext* p) const {
    if (p != nullptr) av_freep(&p->buffer);
    avio_context_free(&p);
  }
};
struct FileDeleter {
  void operator()(AVIOContext* p) const { avio_closep(&p); }
};
struct ParamsDeleter {
  void operator()(AVCodecParameters* p) const { avcodec_parameters_free(&p); }
};

using FormatPtr = std::unique_ptr<AVFormatContext, FormatDeleter>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using SwrPtr = std::unique_ptr<SwrContext, SwrDeleter>;
using SwsPtr = std::unique_ptr<SwsContext, SwsDeleter>;
using GraphPtr = std::unique_ptr<AVFilterGraph, GraphDeleter>;
using AvioPtr = std::unique_ptr<AVIOContext, AvioDeleter>;
using FilePtr = std::unique_ptr<AVIOContext, FileDeleter>;

FramePtr new_frame();
PacketPtr new_packet();

// libswresample keeps back the last input samples that its filter has not
// passed, all of an input shorter than the filter, even when drained: a
// 16-sample clip at 8 kHz came out empty at 16 kHz (in the ffmpeg CLI too).
// Returns silence in the input's format (`format`, `rate`, `channels`)
// that pushes at least `missing` more output samples (at `out_rate`) out of
// `swr` when converted after the drain.
FramePtr resampler_padding(SwrContext* swr, int format, int rate, int channels,
                           int out_rate, int64_t missing);

inline AVRational to_av(media::Rational r) { return AVRational{r.num, r.den}; }
inline media::Rational from_av(AVRational r) {
  return media::Rational{r.num, r.den};
}

// Time `pts` in seconds: pts * num, then one division by den, so that a
// time the time base can state exactly (6144 / 10240) is the double nearest
// it (0.6), as multiplying by a rounded 1 / den is not.
inline double seconds(int64_t pts, AVRational tb) {
  return static_cast<double>(pts) * tb.num / tb.den;
}

// Whether time `pts` (in time base `tb`) is before `t` seconds, exactly.
inline bool before(int64_t pts, AVRational tb, media::Rational t) {
  return av_compare_ts(pts, tb, t.num, AVRational{1, t.den}) < 0;
}

// Whether `pts` lies in the window (always, without one; never for
// AV_NOPTS_VALUE).
inline bool in_window(int64_t pts, AVRational tb,
                      const std::optional<media::Window>& w) {
  if (!w) return true;
  if (pts == AV_NOPTS_VALUE) return false;
  return !before(pts, tb, w->start) && (!w->end || before(pts, tb, *w->end));
}

// An AVDictionary built from options; check_consumed() throws
// InvalidArgument naming any option the consumer did not take.
class Options {
 public:
  explicit Options(const std::map<std::string, std::string>& options);
  ~Options();
  Options(const Options&) = delete;
  Options& operator=(const Options&) = delete;
  AVDictionary** get() { return &dict_; }
  void check_consumed(std::string_view name, std::string_view what) const;

 private:
  AVDictionary* dict_ = nullptr;
};

// An opened input: a path or URL, or bytes in memory read in place through
// a custom AVIO. The memory's owner is kept alive.
//
// Safe by default: a path is opened with the file protocol only (or those
// the format option protocol_whitelist lists), the format is probed before
// any demuxer reads a header, and formats that read other files or URLs,
// open devices, or are not media (tty, hls, concat, ...) are refused with
// UnsupportedFormat unless DemuxConfig::format names one or
// allow_unsafe_formats is set; a demuxer may not open any other input
// (io_open refuses). image2 reads the one named file, not a pattern.
class Input {
 public:
  Input(const media::Source& source, const media::DemuxConfig& config,
        std::string_view name);
  ~Input();
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  AVFormatContext* format() const { return format_.get(); }
  bool stream_info_read() const { return stream_info_read_; }

 private:
  static int read(void* opaque, uint8_t* buf, int size);
  static int64_t seek(void* opaque, int64_t offset, int whence);
  void open_url(const std::string& url, const std::string& protocols,
                std::map<std::string, std::string>* options,
                std::string_view name);

  std::span<const uint8_t> data_;
  std::shared_ptr<const void> owner_;
  int64_t pos_ = 0;
  AvioPtr avio_;  // declared before format_: destroyed after it
  FilePtr file_;  // a path's input, also destroyed after format_
  FormatPtr format_;
  bool stream_info_read_ = false;
};

// Opens a decoder for `params` (by name when config.decoder is set), with
// config.threads threads unless the options say otherwise. Throws
// DecodeError when no decoder exists, InvalidArgument for unknown names or
// unconsumed options.
CodecPtr open_decoder(const AVCodecParameters* params, AVRational time_base,
                      const media::DecodeConfig& config, std::string_view name);

// Marks an object busy for one call: a call from a second thread while
// another thread's call is in progress throws ObjectInUse naming `what`;
// calls nested in the same thread pass.
class BusyGuard {
 public:
  BusyGuard(std::atomic<std::thread::id>& owner, std::string_view what);
  ~BusyGuard();
  BusyGuard(const BusyGuard&) = delete;
  BusyGuard& operator=(const BusyGuard&) = delete;

 private:
  std::atomic<std::thread::id>* owner_ = nullptr;  // null when nested
};

// The first few error messages FFmpeg logged on this thread since the last
// clear_ffmpeg_error(), joined by "; " ("" if none), whatever its log
// level: the detail behind an error code ("Picture size 16000x16000
// exceeds ...").
void clear_ffmpeg_error();
std::string ffmpeg_error();

// Decode errors inside one stream, counted, with the first one's text: a
// packet that fails to decode costs its frames, not the clip (as in the
// ffmpeg CLI).
class DecodeErrors {
 public:
  // Before an FFmpeg call whose error may be noted: forgets earlier FFmpeg
  // messages while none is noted yet, so the first error's detail is its own.
  void before_call() const {
    if (count_ == 0) clear_ffmpeg_error();
  }
  void note(const std::string& what, int code);
  int count() const { return count_; }
  const std::string& first() const { return first_; }
  // Throws DecodeError naming `name` when there were errors and nothing
  // decoded; logs one warning when there were errors and something did.
  void report(const std::string& name, bool decoded_any) const;

 private:
  int count_ = 0;
  std::string first_;
};

// Silences FFmpeg's logging once per process (feedline reports errors as
// exceptions; the Python layer can raise the level again).
void quiet_logging();

// The dtype of samples in `fmt` (planar or packed). Throws InvalidArgument
// for formats without one.
DType sample_dtype(AVSampleFormat fmt);

// Returns "yuv420p", "fltp", ... or "none".
std::string pix_fmt_name(int format);
std::string sample_fmt_name(int format);

// What an encoder takes; an empty list when it does not say (it takes
// any). FFmpeg 7.1 replaced the AVCodec fields with
// avcodec_get_supported_config.
struct EncoderSupport {
  std::vector<int> pix_fmts;
  std::vector<int> sample_fmts;
  std::vector<int> sample_rates;
  std::vector<AVRational> frame_rates;
  std::vector<uint64_t> layout_masks;  // native layouts only
};
inline EncoderSupport encoder_support(const AVCodec* codec) {
  EncoderSupport s;
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(61, 13, 100)
  auto get = [codec](AVCodecConfig what, int* n) {
    const void* out = nullptr;
    *n = 0;
    if (avcodec_get_supported_config(nullptr, codec, what, 0, &out, n) < 0)
      *n = 0;
    return out;
  };
  int n = 0;
  auto* pix =
      static_cast<const AVPixelFormat*>(get(AV_CODEC_CONFIG_PIX_FORMAT, &n));
  for (int i = 0; pix != nullptr && i < n; ++i) s.pix_fmts.push_back(pix[i]);
  auto* smp = static_cast<const AVSampleFormat*>(
      get(AV_CODEC_CONFIG_SAMPLE_FORMAT, &n));
  for (int i = 0; smp != nullptr && i < n; ++i) s.sample_fmts.push_back(smp[i]);
  auto* rates = static_cast<const int*>(get(AV_CODEC_CONFIG_SAMPLE_RATE, &n));
  for (int i = 0; rates != nullptr && i < n; ++i)
    s.sample_rates.push_back(rates[i]);
  auto* fr =
      static_cast<const AVRational*>(get(AV_CODEC_CONFIG_FRAME_RATE, &n));
  for (int i = 0; fr != nullptr && i < n; ++i) s.frame_rates.push_back(fr[i]);
  auto* layouts = static_cast<const AVChannelLayout*>(
      get(AV_CODEC_CONFIG_CHANNEL_LAYOUT, &n));
  for (int i = 0; layouts != nullptr && i < n; ++i) {
    if (layouts[i].order == AV_CHANNEL_ORDER_NATIVE)
      s.layout_masks.push_back(layouts[i].u.mask);
  }
#else
  for (const AVPixelFormat* p = codec->pix_fmts; p != nullptr && *p != -1; ++p)
    s.pix_fmts.push_back(*p);
  for (const AVSampleFormat* p = codec->sample_fmts; p != nullptr && *p != -1;
       ++p)
    s.sample_fmts.push_back(*p);
  for (const int* p = codec->supported_samplerates; p != nullptr && *p != 0;
       ++p)
    s.sample_rates.push_back(*p);
  for (const AVRational* p = codec->supported_framerates;
       p != nullptr && p->den != 0; ++p)
    s.frame_rates.push_back(*p);
  for (const AVChannelLayout* p = codec->ch_layouts;
       p != nullptr && p->nb_channels != 0; ++p) {
    if (p->order == AV_CHANNEL_ORDER_NATIVE)
      s.layout_masks.push_back(p->u.mask);
  }
#endif
  return s;
}

}  // namespace feedline::media::ffmpeg

namespace feedline::media::ffmpeg {

// A configured filter graph and its buffer sources and sinks by instance
// name. Throws InvalidArgument for a description FFmpeg cannot parse or
// configure.
struct ParsedGraph {
  GraphPtr graph;
  std::map<std::string, AVFilterContext*> inputs;
  std::map<std::string, AVFilterContext*> outputs;
};
ParsedGraph parse_graph(const std::string& desc);

// The buffer/abuffer source description for frames like `frame` in time
// base `tb`.
std::string frame_source_desc(const AVFrame* frame, AVRational tb, bool audio);

// A one-input, one-output chain: "<source>,<middle>,<sink>", set up from
// the first frame it sees (so it needs no codec parameters up front).
class Chain {
 public:
  Chain(std::string middle, bool audio, AVRational in_time_base,
        std::string_view name);
  // Pushes `frame` (a new reference is taken); null signals the end. The
  // graph is set up for the first frame. A video frame of another size,
  // pixel format or aspect ends that graph and starts a new one for it, as
  // the ffmpeg CLI does (filters such as crop are configured for one input
  // size and would read past a smaller frame); an audio frame of another
  // rate, format or layout is a DecodeError.
  // Throws: DecodeError when the new frames do not fit the filter.
  void push(const AVFrame* frame);
  // 0 with a frame in `out`, AVERROR(EAGAIN) or AVERROR_EOF. The frames of
  // an ended graph come first.
  int pull(AVFrame* out);
  // The output time base (the input's until the first frame).
  AVRational time_base() const;
  bool started() const { return graph_.graph != nullptr; }

 private:
  std::string middle_;
  bool audio_;
  AVRational in_tb_;
  std::string name_;
  // Sets up the graph for `frame`.
  void start(const AVFrame* frame);

  std::string source_;  // the buffer source's arguments, from the first frame
  ParsedGraph graph_;
  AVFilterContext* src_ = nullptr;
  AVFilterContext* sink_ = nullptr;
  // Graphs ended by a change of video frames, with frames still to pull.
  struct Ended {
    ParsedGraph graph;
    AVFilterContext* sink;
  };
  std::deque<Ended> ended_;
};

}  // namespace feedline::media::ffmpeg

namespace feedline::media::ffmpeg {

// A decoder, an optional filter chain after it, and the window its video
// output is limited to. Decode errors of single packets are counted, not
// thrown (a damaged packet costs its frames, not the clip); callers decide
// when too few frames came out.
class DecodeSession {
 public:
  // Receives each output frame (the sink may take its data with
  // av_frame_move_ref) and its time base; returns false to stop.
  using Sink = std::function<bool(AVFrame* frame, AVRational tb)>;

  DecodeSession(const media::Codec& codec, std::optional<std::string> filter,
                const media::DecodeConfig& config, std::string_view name);

  // Limits video output to frames whose pts lies in the window; the first
  // frame at or past its end stops the session.
  void set_window(std::optional<media::Window> window) { window_ = window; }
  // Sends one packet; with `discard_nonref` the decoder drops the frame if
  // no other frame refers to it. Returns false once stopped.
  bool send(const AVPacket* packet, bool discard_nonref, const Sink& sink);
  // Drains the decoder and the filter.
  void flush(const Sink& sink);
  bool stopped() const { return stopped_; }
  AVCodecContext* context() const { return ctx_.get(); }
  const DecodeErrors& errors() const { return errors_; }
  // Whether skipping non-reference frames before a window leaves the output
  // unchanged (no filter, or only per-frame filters).
  bool may_skip_frames() const { return may_skip_; }

 private:
  void drain(const Sink& sink);
  void emit(AVFrame* frame, const Sink& sink);
  void deliver(AVFrame* frame, AVRational tb, const Sink& sink);

  std::string name_;
  CodecPtr ctx_;
  std::optional<Chain> chain_;
  std::optional<media::Window> window_;
  AVRational tb_;
  bool audio_;
  bool may_skip_ = true;
  bool stopped_ = false;
  DecodeErrors errors_;
  FramePtr frame_;
  FramePtr filtered_;
};

}  // namespace feedline::media::ffmpeg

namespace feedline::media::ffmpeg {

// Sends the packets of a windowed video decode, doing only the work the
// window's frames need: a frame no other frame refers to is dropped by the
// decoder while it is before the window, and once the last packet that shows
// in the window has been sent (in decode order; nothing after it can be a
// reference of a frame in the window) the decoder is flushed instead of fed
// more. `skip` turns both off (time-based filters see every frame). Ends
// with the session flushed.
void send_window(DecodeSession& session, const media::Packets& packets,
                 bool skip, const DecodeSession::Sink& sink);

}  // namespace feedline::media::ffmpeg
