// SPDX-License-Identifier: Apache-2.0
//
// Audio, video and images through FFmpeg: demux, decode, filter, convert.
//
// The flow is SPDL's: a Demuxer reads a source (a path, an FFmpeg URL, or
// bytes in memory read in place) and hands out Packets of one stream,
// optionally limited to a half-open time window [start, end). Decoding turns
// Packets into Frames, optionally through an FFmpeg filter graph (scale,
// fps, trim, format conversion, ...). convert_frames copies Frames into a
// Buffer, the one copy on the way from file to array:
//
//   video (N, H, W, C) uint8 for rgb24/rgba/gray8 ...; audio (C, N) planar or
//   (N, C) packed; an image (H, W, C).
//
// load_video / load_image / load_audio_frames chain the steps. The fast
// video path (load_video without a custom filter) converts decoded frames
// straight into the output with libswscale, skips non-reference frames that
// precede a window, and never opens a filter graph.
//
// Ownership: Packets and Frames own their FFmpeg objects. Functions that
// consume them take an rvalue and leave the source "consumed" (empty, and
// every accessor but media() and consumed() throws ObjectConsumed); clone()
// shares the payloads by reference count without copying.
//
// Errors: DecodeError (naming the source) for input that is not media, is
// truncated, has no such stream or an unknown codec, or yields no frame;
// InvalidArgument for bad options, unknown or unconsumed FFmpeg options, bad
// filter descriptions; ObjectConsumed (an InvalidArgument) for consumed
// objects; IoError when a path cannot be opened.
//
// Thread safety: distinct objects may be used from distinct threads at
// once; one object must not be used from two threads at the same time. A
// Demuxer, Decoder or FilterGraph called while another thread is inside one
// of its calls throws ObjectInUse instead of corrupting its state.
// FFmpeg's own logging is silenced unless set_ffmpeg_log_level raises it.

#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"

struct AVCodecParameters;
struct AVFrame;
struct AVPacket;

namespace feedline::media {

enum class Media { kAudio, kVideo, kImage };
const char* media_name(Media media);

// An exact time or rate: num / den.
struct Rational {
  int num = 0;
  int den = 1;
  double to_double() const {
    return den == 0 ? 0.0 : static_cast<double>(num) / den;
  }
  bool operator==(const Rational&) const = default;
};

// A half-open window [start, end) in seconds; no end means to the end.
struct Window {
  Rational start;
  std::optional<Rational> end;
};

// A time in seconds written as an integer, a decimal ("1.5", "2.5e-3") or a
// fraction ("1/3"), as an exact fraction; one whose parts do not fit in 32
// bits is rounded to the nearest with a denominator <= 2^20.
// Throws: InvalidArgument naming `text` if it is none of these, or >= 2^31 s.
Rational parse_time(std::string_view text);

// The window [start, end) from times as parse_time() reads them; no end or
// "inf": to the end. Throws: InvalidArgument if a time is bad, start < 0 or end
// < start.
Window parse_window(std::string_view start,
                    std::optional<std::string_view> end);

struct DemuxConfig {
  std::string format;  // force an input format ("rawvideo", "s16le"); "" probes
  std::map<std::string, std::string> format_options;
  int buffer_size = 65536;  // the AVIO buffer for in-memory sources
  // Read codec parameters by decoding the first packets
  // (avformat_find_stream_info). Needed for raw or headerless streams; for
  // containers that carry their codec parameters (MP4, MKV, WebM, ...) it is
  // skipped unless true, which saves decoding frames only to throw them away.
  std::optional<bool> find_stream_info;
  // Read formats refused by default: those that read other files or URLs
  // named in the input (hls, dash, concat, imf, sdp, ...), devices, and
  // text or metadata that FFmpeg would turn into media (tty, ffmetadata,
  // ...). Naming the format in `format` also allows it. A demuxer may open
  // other inputs only when allowed; the protocols stay those of the format
  // option protocol_whitelist (default "file").
  bool allow_unsafe_formats = false;
};

struct DecodeConfig {
  std::string decoder;  // by name ("h264", "libdav1d"); "" picks the default
  std::map<std::string, std::string> decoder_options;
  // Decoder threads; 0 lets FFmpeg choose. kAutoThreads (the default): one,
  // except that load_video() of a whole clip (no window) takes the cores no
  // other load_video() of this process is using, e.g. 2 on 2 cores with
  // one clip in flight and 1 with two.
  static constexpr int kAutoThreads = -1;
  int threads = kAutoThreads;
};

// A stream's codec parameters (a deep copy), with its time base and frame
// rate. Cheap to copy (shared, immutable).
class Codec {
 public:
  Codec(Media media, const AVCodecParameters* params, Rational time_base,
        Rational frame_rate);
  Media media() const { return media_; }
  std::string name() const;
  Rational time_base() const { return time_base_; }
  Rational frame_rate() const { return frame_rate_; }
  int width() const;
  int height() const;
  std::string pix_fmt() const;  // "yuv420p"; "none" when unknown
  Rational sample_aspect_ratio() const;
  int sample_rate() const;
  int num_channels() const;
  std::string sample_fmt() const;
  std::string channel_layout() const;  // "0x3", or "2c" without a mask
  int64_t bit_rate() const;
  int bits_per_sample() const;
  const AVCodecParameters* params() const { return params_.get(); }
  std::string to_string() const;

 private:
  Media media_;
  std::shared_ptr<const AVCodecParameters> params_;
  Rational time_base_;
  Rational frame_rate_;
};

// A Packets or Frames used after it was consumed. Python: TypeError.
class ObjectConsumed : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// A Demuxer, Decoder or FilterGraph called from a second thread while a
// call of another thread is in progress. Python: feedline.Error.
class ObjectInUse : public Error {
 public:
  using Error::Error;
};

// Encoded packets of one stream.
class Packets {
 public:
  Packets(Media media, std::string src, int stream_index, Rational time_base,
          std::optional<Window> window, std::optional<Codec> codec);
  virtual ~Packets();
  Packets(const Packets&) = delete;
  Packets& operator=(const Packets&) = delete;

  Media media() const { return media_; }
  const std::string& src() const;
  int stream_index() const;
  Rational time_base() const;
  const std::optional<Window>& window() const;
  const std::optional<Codec>& codec() const;
  // Throws InvalidArgument when there is none (streamed packets).
  const Codec& require_codec() const;

  // Number of packets whose pts lies in the window (all without one).
  std::size_t size() const;
  std::size_t num_packets() const;
  // Presentation times in seconds, sorted; only those in the window unless
  // `raw` (then all, in stored order, NaN where a packet has none: some
  // containers leave B-frames' times to the decoder). Without a window,
  // size() counts every packet; with one, only packets with a time in it.
  std::vector<double> timestamps(bool raw = false) const;
  bool consumed() const { return consumed_; }
  // Throws ObjectConsumed if consumed.
  void check() const;

  // A new Packets sharing every payload (no copy), or, when the payloads
  // view memory this object does not own (views()), with copies of them:
  // the clone outlives that memory.
  std::unique_ptr<Packets> clone() const;
  // A new Packets sharing every payload, viewed ones too (views() stays
  // set): for work that ends while the viewed memory is still held.
  std::unique_ptr<Packets> share() const;
  // Moves the contents into a new object of the same kind; this one becomes
  // consumed.
  std::unique_ptr<Packets> take();

  const std::vector<AVPacket*>& packets() const { return packets_; }
  // Packet i (< num_packets()) without FFmpeg's headers: times in the time
  // base (INT64_MIN when unknown), flags (1: key frame), the payload and the
  // side data (FFmpeg's type, bytes). The spans live as long as the packet.
  struct PacketView {
    int64_t pts = 0;
    int64_t dts = 0;
    int64_t duration = 0;
    int flags = 0;
    std::span<const uint8_t> data;
    std::vector<std::pair<int, std::span<const uint8_t>>> side_data;
  };
  PacketView packet(std::size_t i) const;
  // Takes ownership of `packet`.
  void push(AVPacket* packet);
  void set_window(std::optional<Window> w) { window_ = std::move(w); }
  void set_codec(std::optional<Codec> c) { codec_ = std::move(c); }
  // Where the stream ends (the latest pts + duration of its packets, in
  // the time base) when the demux read to the end of the input; nullopt
  // when it stopped earlier.
  std::optional<int64_t> stream_end() const { return stream_end_; }
  void set_stream_end(std::optional<int64_t> t) { stream_end_ = t; }
  // Whether the payloads may point into memory the packets only borrow
  // (deserialize_packets with `view`).
  bool views() const { return views_; }
  void set_views(bool v) { views_ = v; }

  std::string to_string() const;

 private:
  Media media_;
  std::string src_;
  int stream_index_;
  Rational time_base_;
  std::optional<Window> window_;
  std::optional<Codec> codec_;
  std::vector<AVPacket*> packets_;
  std::optional<int64_t> stream_end_;
  bool views_ = false;
  bool consumed_ = false;
};

class AudioPackets final : public Packets {
 public:
  using Packets::Packets;
};
class VideoPackets final : public Packets {
 public:
  using Packets::Packets;
};
class ImagePackets final : public Packets {
 public:
  using Packets::Packets;
};
// Makes the Packets subclass for `media`.
std::unique_ptr<Packets> make_packets(Media media, std::string src,
                                      int stream_index, Rational time_base,
                                      std::optional<Window> window,
                                      std::optional<Codec> codec);

// Decoded frames. Video frames share one size and format; audio frames one
// sample format, rate and channel count. An ImageFrames holds one frame.
class Frames {
 public:
  Frames(Media media, Rational time_base);
  virtual ~Frames();
  Frames(const Frames&) = delete;
  Frames& operator=(const Frames&) = delete;

  Media media() const { return media_; }
  Rational time_base() const;
  // Video and image: frames; audio: samples (summed over frames).
  int64_t num_frames() const;
  std::size_t num_av_frames() const { return frames_.size(); }
  bool empty() const { return frames_.empty(); }
  int width() const;
  int height() const;
  std::string format() const;  // pix_fmt or sample_fmt; "none" when empty
  int num_planes() const;
  int sample_rate() const;
  int num_channels() const;
  std::vector<int64_t> pts() const;
  std::vector<double> timestamps() const;
  // The first frame's metadata (EXIF tags and the like).
  std::map<std::string, std::string> metadata() const;
  // What the frames were decoded from (the packets' src), for messages; ""
  // for frames made from arrays. Kept by clone(), take(), select(), image()
  // and serialize_frames().
  const std::string& src() const { return src_; }
  void set_src(std::string src) { src_ = std::move(src); }
  bool consumed() const { return consumed_; }
  void check() const;

  std::unique_ptr<Frames> clone() const;
  std::unique_ptr<Frames> take();
  // Video: the frames at `indices` (each in [-n, n)), sharing data.
  std::unique_ptr<Frames> select(const std::vector<int64_t>& indices) const;
  // Appends the frames of `other` (consumed), which must be of one media.
  void extend(Frames&& other);
  // Video: frame i as ImageFrames.
  std::unique_ptr<Frames> image(int64_t i) const;

  const std::vector<AVFrame*>& frames() const { return frames_; }
  void push(AVFrame* frame);  // takes ownership
  std::string to_string() const;

 private:
  Media media_;
  Rational time_base_;
  std::vector<AVFrame*> frames_;
  std::string src_;
  bool consumed_ = false;
};

class AudioFrames final : public Frames {
 public:
  using Frames::Frames;
};
class VideoFrames final : public Frames {
 public:
  using Frames::Frames;
};
class ImageFrames final : public Frames {
 public:
  using Frames::Frames;
};
std::unique_ptr<Frames> make_frames(Media media, Rational time_base);

// Where a Demuxer reads from: a path or URL, or bytes in memory that `owner`
// keeps alive for as long as the Demuxer and the Packets it made need them.
struct Source {
  std::string url;
  std::span<const uint8_t> data;
  std::shared_ptr<const void> owner;
  bool in_memory() const { return owner != nullptr || !data.empty(); }
};

class Demuxer {
 public:
  // `name` names the source in errors and reprs (default: the url, or
  // "<Bytes: 0x...>").
  Demuxer(Source source, const DemuxConfig& config, std::string name = "");
  ~Demuxer();
  Demuxer(const Demuxer&) = delete;
  Demuxer& operator=(const Demuxer&) = delete;

  const std::string& name() const { return name_; }
  int num_streams() const;
  bool has_audio() const;
  // The best stream of the kind (images: the best video stream). Throws
  // DecodeError when there is none.
  int best_stream(Media media) const;
  Codec codec(Media media) const;
  Codec stream_codec(int index) const;
  // Duration in seconds, or 0 when the container does not say.
  double duration() const;

  // Packets of the best stream of `media`. With a window, seeks to the key
  // frame at or before its start and reads until the first packet at or
  // past its end (video: end + 0.3 s, for reordered B-frames). The packets
  // before the start stay (the decoder needs them) and the window goes with
  // the packets. Where a container's seek lands past the start or off a key
  // frame (MPEG-TS and -PS have no index), it seeks further back until the
  // first key frame read is at or before the start, or reads from the
  // beginning. Each call reads from scratch, whatever earlier calls read.
  std::unique_ptr<Packets> demux(Media media, std::optional<Window> window);

  // Reads packets of `streams` until one of them holds `num_packets` (> 0),
  // or until a packet more than `duration` (> 0) seconds after the chunk's
  // first arrives (that packet starts the next chunk). Returns an empty map
  // at the end. The packets carry no codec.
  std::map<int, std::unique_ptr<Packets>> next_chunk(
      const std::vector<int>& streams, double duration, int num_packets);
  // Starts reading from the beginning again (the next next_chunk returns
  // the first chunk).
  void rewind();

 private:
  class Input;
  void reopen();
  std::string what() const;
  std::unique_ptr<Input> input_;
  Source source_;
  DemuxConfig config_;
  std::string name_;
  // Streaming state.
  std::map<int, std::unique_ptr<Packets>> pending_;
  double chunk_start_ = 0;
  bool chunk_started_ = false;
  bool eof_ = false;
  bool streaming_ = false;
  AVPacket* carry_ = nullptr;
  // The thread inside a call (none: idle).
  mutable std::atomic<std::thread::id> busy_{};
};

// Decodes packets one batch at a time, optionally through a filter chain.
class Decoder {
 public:
  // `filter_desc` is the middle of a chain ("scale=w=224:h=224,format=
  // pix_fmts=rgb24"); the buffer source and sink are added. nullopt: frames
  // keep the decoder's format.
  Decoder(const Codec& codec, const std::optional<std::string>& filter_desc,
          const DecodeConfig& config, std::string name = "");
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Decodes `packets` (consumed). Video frames outside the packets' window
  // are dropped. Stops once `max_frames` (> 0; nullopt: no limit) frames are
  // out: the decoder is then done, like after flush().
  // Throws: InvalidArgument for max_frames <= 0, and once the decoder is
  // done (flushed, or stopped by max_frames): what it would decode would be
  // lost.
  std::unique_ptr<Frames> decode(
      Packets&& packets, std::optional<int64_t> max_frames = std::nullopt);
  // Drains the decoder and the filter at the end of the stream; the
  // decoder is then done (a second flush() returns no frames).
  std::unique_ptr<Frames> flush();
  Media media() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot decode of a whole Packets (consumed) to Frames, stopping after
// `num_frames` (> 0; nullopt: all). Throws: InvalidArgument for
// num_frames <= 0.
std::unique_ptr<Frames> decode_packets(
    Packets&& packets, const std::optional<std::string>& filter_desc,
    const DecodeConfig& config,
    std::optional<int64_t> num_frames = std::nullopt);

// Decodes only what frames `indices` (sorted, unique, in [0, packets.size())
// relative to the window) need: the packets are split at key frames and
// each split is decoded up to its last wanted frame. Returns one ImageFrames
// per index.
std::vector<std::unique_ptr<Frames>> sample_decode_video(
    Packets&& packets, const std::vector<int64_t>& indices,
    const std::optional<std::string>& filter_desc, const DecodeConfig& config);

// A bit-stream filter (or a chain, "h264_mp4toannexb,dump_extra"): rewrites
// packets without decoding them, e.g. MP4's length-prefixed H.264/HEVC into
// the Annex B start codes hardware decoders take. "null" passes packets
// through.
class BitstreamFilter {
 public:
  // Set up for packets of `codec`. Throws InvalidArgument for an unknown
  // filter, bad options, or a filter that does not take this codec (naming
  // the codecs it does take).
  BitstreamFilter(const Codec& codec, const std::string& filters);
  ~BitstreamFilter();
  BitstreamFilter(const BitstreamFilter&) = delete;
  BitstreamFilter& operator=(const BitstreamFilter&) = delete;

  // The parameters and time base of the packets that come out.
  const Codec& codec() const { return out_; }
  const std::string& filters() const { return filters_; }

  // Filters `packets` (consumed; of the codec's media and codec). The
  // result keeps the src, stream index and window, in the output time base,
  // with codec() when the input had a codec. With `flush`, the filter is
  // also drained and reset, so that the next call starts a new stream.
  // Throws: InvalidArgument for packets of another media or codec,
  // DecodeError (naming the src) when FFmpeg rejects a packet.
  std::unique_ptr<Packets> filter(Packets&& packets, bool flush = false);
  // Drains what the filter still holds and resets it. Packets with no src
  // and stream index -1 when no filter() call came first.
  std::unique_ptr<Packets> flush();

 private:
  void drain(Packets& out);
  struct Context;
  std::unique_ptr<Context> ctx_;
  Codec in_;
  Codec out_;
  std::string filters_;
  std::string src_;
  int stream_index_ = -1;
  std::optional<Window> window_;
  bool had_codec_ = true;
  bool views_ = false;  // some packets sent in viewed borrowed memory
  mutable std::atomic<std::thread::id> busy_{};
};

// BitstreamFilter(packets.require_codec(), filters).filter(packets, true).
std::unique_ptr<Packets> apply_bsf(Packets&& packets,
                                   const std::string& filters);

// Packets as one byte string, so that they can cross processes (demux in
// one, decode in another) or sit in shared memory. The layout is internal
// and versioned (a string of another feedline version is refused): a
// header with the src, stream, time base, window and codec parameters, one
// record per packet (times, flags, side data), then the payloads, each at a
// 64-byte offset from the start and followed by 64 zero bytes, so that a
// decoder may read past a payload's end in place.
// Throws ObjectConsumed for consumed packets.
std::size_t serialized_size(const Packets& packets);
// Writes exactly serialized_size(packets) bytes to `out`. Throws
// InvalidArgument when `out` has another size.
void serialize_packets_into(const Packets& packets, std::span<uint8_t> out);
Buffer serialize_packets(const Packets& packets);
// Packets from a string serialize_packets wrote; bytes past its end are
// ignored. With `view`, the payloads are not copied: each packet points into
// `blob` and keeps its storage alive. Throws FormatError, naming `name` and
// what is wrong, for anything else (never reads outside `blob`).
std::unique_ptr<Packets> deserialize_packets(const Buffer& blob, bool view,
                                             std::string_view name = "");

// Frames as one byte string, as Packets above (a header, then per frame its
// format, size, pts, colour properties, metadata and planes, rows packed
// without padding). Software frames only. Throws ObjectConsumed for
// consumed frames.
Buffer serialize_frames(const Frames& frames);
// Frames from a string serialize_frames wrote (copied into new frames).
// Throws FormatError, naming `name` and what is wrong.
std::unique_ptr<Frames> deserialize_frames(const Buffer& blob,
                                           std::string_view name = "");

// An FFmpeg filter graph with named buffer/abuffer inputs and
// buffersink/abuffersink outputs.
class FilterGraph {
 public:
  explicit FilterGraph(const std::string& desc);
  ~FilterGraph();
  FilterGraph(const FilterGraph&) = delete;
  FilterGraph& operator=(const FilterGraph&) = delete;

  std::vector<std::string> inputs() const;
  std::vector<std::string> outputs() const;
  // Pushes every frame (consumed) into input `key` ("" when there is one).
  void add_frames(Frames&& frames, const std::string& key = "");
  // Signals the end of every input.
  void flush();
  // Every frame the output `key` has ready; nullptr when none.
  std::unique_ptr<Frames> get_frames(const std::string& key = "");
  std::string dump() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// "buffer=video_size=WxH:pix_fmt=P:time_base=N/D:pixel_aspect=N/D" and
// "abuffer=time_base=...:sample_rate=...:sample_fmt=...:channel_layout=...".
std::string buffer_source_desc(const Codec& codec,
                               const std::string& label = "",
                               const std::string& format = "");

// Copies frames into one Buffer (frames are consumed): video (N, H, W, C) for
// interleaved formats, (N, P, H, W) or the packed planar layouts for YUV;
// images drop N; audio (C, N) planar / (N, C) packed. A batch of several
// Frames of one shape adds a leading dimension.
Buffer convert_frames(Frames&& frames);
Buffer convert_frames(std::vector<Frames*> batch);

// Options of the one-call loaders.
struct VideoOptions {
  std::optional<Window> window;
  DemuxConfig demux;
  DecodeConfig decode;
  // nullopt: the fast path to rgb24 (or pix_fmt below), no filter graph.
  std::optional<std::string> filter_desc;
  std::string pix_fmt = "rgb24";  // fast path: rgb24, bgr24, rgba, gray
  // Decode at most this many frames (> 0) of the window; nullopt: all.
  std::optional<int64_t> max_frames;
  // A window whose end lies past the end of the stream fails (DecodeError
  // naming the source and the window) instead of giving fewer frames: the
  // clips of ops::load_video_clips() have one length per window.
  bool whole_window = false;
};

// The thread count of DecodeConfig::kAutoThreads: a whole clip (no
// window) gets its share of `cpus` with `in_flight` loads in progress (this
// one included), at least one; a window gets one thread, which decodes its
// few frames sooner than frame threads that fill their pipeline first. Any
// other value is kept.
DecodeConfig resolve_decoder_threads(DecodeConfig config, bool whole_clip,
                                     int in_flight, int cpus);

// Video (N, H, W, C) uint8.
Buffer load_video(Source source, const VideoOptions& options,
                  std::string name = "");
// One image (H, W, C) through FFmpeg (any format it reads).
Buffer load_image_ffmpeg(Source source, const VideoOptions& options,
                         std::string name = "");

std::vector<std::string> ffmpeg_filters();
// (codec, decoder) for every decoder this FFmpeg has, in FFmpeg's order:
// ("h264", "h264"), ("av1", "libdav1d"), ("vp9", "libvpx-vp9"), ...
std::vector<std::pair<std::string, std::string>> ffmpeg_decoders();
int ffmpeg_log_level();

}  // namespace feedline::media
