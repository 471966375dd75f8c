// SPDX-License-Identifier: Apache-2.0
//
// The Muxer, encode_video and encode_audio (feedline/media/encode.h).

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "media/ffmpeg/encoding.h"

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

namespace {

// Muxers that open files of their own (an image sequence, a segment list)
// cannot write to memory. `where` prefixes the error.
void refuse_own_files(const AVOutputFormat* of, const std::string& format,
                      const std::string& where) {
  if ((of->flags & AVFMT_NOFILE) != 0) {
    throw InvalidArgument(where + "the " + format +
                          " muxer writes files of its own, not to memory");
  }
}

// The encoder of a new `media` stream of `of`: `encoder` by name, else the
// format's own for the medium (for `filename`'s extension, where given).
// Throws: InvalidArgument, naming `where`, if there is none.
const AVCodec* stream_encoder(const AVOutputFormat* of, const char* filename,
                              Media media, const std::string& encoder,
                              const std::string& where) {
  const AVMediaType type =
      media == Media::kAudio ? AVMEDIA_TYPE_AUDIO : AVMEDIA_TYPE_VIDEO;
  const AVCodecID id = av_guess_codec(of, nullptr, filename, nullptr, type);
  if (encoder.empty() && id == AV_CODEC_ID_NONE) {
    throw InvalidArgument(where + ": " + of->name + " does not take " +
                          (media == Media::kAudio ? "audio" : "video"));
  }
  return find_encoder(encoder, id, type, where);
}

}  // namespace

// --- Muxer ---

struct Muxer::State {
  AVFormatContext* fmt = nullptr;
  std::vector<std::unique_ptr<Encoder>> encoders;
  bool opened = false;
  bool closed = false;
  bool failed = false;  // a close (trailer) failed: the file is incomplete
  // Streams added by add_remux_stream, whose packets must also have the
  // stream's extradata (an encode stream's packets come from its encoder).
  std::vector<bool> remuxed;
  // The thread inside a call: one AVFormatContext must not be written from
  // two threads at once (the bindings release the GIL).
  std::atomic<std::thread::id> busy{};
  // In memory: the file so far, the write position, and the AVIO on it.
  bool in_memory = false;
  std::vector<uint8_t> bytes;
  std::size_t pos = 0;
  AvioPtr memory_io;

  ~State() {
    if (fmt == nullptr) return;
    if (opened && !closed) av_write_trailer(fmt);  // finish what is there
    if (in_memory) {
      fmt->pb = nullptr;  // memory_io is freed by its owner
    } else if ((fmt->oformat->flags & AVFMT_NOFILE) == 0 &&
               fmt->pb != nullptr) {
      avio_closep(&fmt->pb);
    }
    avformat_free_context(fmt);
  }

  static int write(void* opaque, AvioWriteData buf, int size) {
    auto* s = static_cast<State*>(opaque);
    const auto n = static_cast<std::size_t>(size);
    if (s->pos + n > s->bytes.size()) s->bytes.resize(s->pos + n);
    std::memcpy(s->bytes.data() + s->pos, buf, n);
    s->pos += n;
    return size;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* s = static_cast<State*>(opaque);
    const auto size = static_cast<int64_t>(s->bytes.size());
    int64_t at = 0;
    switch (whence & ~AVSEEK_FORCE) {
      case AVSEEK_SIZE:
        return size;
      case SEEK_SET:
        at = offset;
        break;
      case SEEK_CUR:
        at = static_cast<int64_t>(s->pos) + offset;
        break;
      case SEEK_END:
        at = size + offset;
        break;
      default:
        return AVERROR(EINVAL);
    }
    if (at < 0) return AVERROR(EINVAL);
    s->pos = static_cast<std::size_t>(at);
    return at;
  }
};

Muxer::Muxer(std::string dst, const std::string& format)
    : dst_(std::move(dst)), state_(std::make_unique<State>()) {
  quiet_logging();
  const int rc = avformat_alloc_output_context2(
      &state_->fmt, nullptr, format.empty() ? nullptr : format.c_str(),
      dst_.c_str());
  if (rc < 0 || state_->fmt == nullptr) {
    throw InvalidArgument(
        dst_ + ": " +
        (format.empty() ? std::string("cannot tell the format from the name; "
                                      "give format=")
                        : "no muxer named \"" + format + "\""));
  }
}

Muxer::~Muxer() = default;

std::unique_ptr<Muxer> Muxer::in_memory(const std::string& format,
                                        std::string name) {
  if (format.empty()) throw InvalidArgument("a Muxer in memory needs a format");
  auto m = std::make_unique<Muxer>(std::move(name), format);
  State& s = *m->state_;
  refuse_own_files(s.fmt->oformat, format, "");
  constexpr int kBufferSize = 1 << 16;
  auto* buffer = static_cast<uint8_t*>(av_malloc(kBufferSize));
  if (buffer == nullptr) throw std::bad_alloc();
  s.memory_io.reset(avio_alloc_context(buffer, kBufferSize, 1, &s, nullptr,
                                       &State::write, &State::seek));
  if (!s.memory_io) {
    av_free(buffer);
    throw std::bad_alloc();
  }
  s.fmt->pb = s.memory_io.get();
  s.fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  s.in_memory = true;
  return m;
}

Buffer Muxer::take_bytes() {
  BusyGuard guard(state_->busy, dst_ + ": the Muxer");
  if (!state_->in_memory)
    throw InvalidArgument(dst_ + ": not a Muxer in memory");
  if (!state_->closed)
    throw InvalidArgument(dst_ + ": close the Muxer before taking its bytes");
  if (state_->failed) {
    throw IoError(dst_ +
                  ": the Muxer's close failed; its bytes are not a whole file");
  }
  const auto& b = state_->bytes;
  Buffer out =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(b.size())});
  if (!b.empty()) std::memcpy(out.data_as<uint8_t>(), b.data(), b.size());
  state_->bytes = {};
  return out;
}

std::string Muxer::format() const { return state_->fmt->oformat->name; }
int Muxer::num_streams() const {
  return static_cast<int>(state_->fmt->nb_streams);
}
bool Muxer::is_open() const { return state_->opened && !state_->closed; }
bool Muxer::closed() const { return state_->closed; }

namespace {

void check_adding(const Muxer& m, bool opened, bool closed) {
  if (opened || closed) {
    throw InvalidArgument(m.dst() +
                          ": streams are added before the Muxer is opened");
  }
}

}  // namespace

Encoder& Muxer::add_stream(Media media, const std::string& encoder,
                           const std::map<std::string, std::string>& options,
                           const std::function<AVCodecContext*(
                               const AVCodec* codec, bool global_header,
                               const std::string& label)>& context) {
  BusyGuard guard(state_->busy, dst_ + ": the Muxer");
  check_adding(*this, state_->opened, state_->closed);
  AVFormatContext* fmt = state_->fmt;
  const AVCodec* codec =
      stream_encoder(fmt->oformat, dst_.c_str(), media, encoder, dst_);
  const int index = num_streams();
  const std::string label = dst_ + " (stream " + std::to_string(index) + ")";
  CodecPtr ctx(
      context(codec, (fmt->oformat->flags & AVFMT_GLOBALHEADER) != 0, label));
  open_context(ctx.get(), codec, options, label);
  AVStream* st = avformat_new_stream(fmt, nullptr);
  if (st == nullptr) throw std::bad_alloc();
  if (avcodec_parameters_from_context(st->codecpar, ctx.get()) < 0)
    throw std::bad_alloc();
  st->time_base = ctx->time_base;
  Rational rate{0, 1};
  if (media != Media::kAudio) {
    st->avg_frame_rate = ctx->framerate;
    // Some muxers (Matroska) write the stream's ratio, not the codec's.
    st->sample_aspect_ratio = ctx->sample_aspect_ratio;
    rate = from_av(ctx->framerate);
  }
  state_->encoders.push_back(
      std::unique_ptr<Encoder>(new Encoder(std::make_unique<Encoder::Impl>(
          media, std::move(ctx), label, index, rate))));
  state_->remuxed.push_back(false);
  return *state_->encoders.back();
}

Encoder& Muxer::add_encode_stream(
    const VideoEncodeConfig& config, const std::string& encoder,
    const std::map<std::string, std::string>& options) {
  Encoder& enc = add_stream(
      Media::kVideo, encoder, options,
      [&](const AVCodec* codec, bool global_header, const std::string& label) {
        return video_context(config, codec, global_header, label,
                             AV_PIX_FMT_NONE)
            .release();
      });
  if (config.time_base) enc.impl_->keep_frame_times();
  return enc;
}

Encoder& Muxer::add_encode_stream(
    const AudioEncodeConfig& config, const std::string& encoder,
    const std::map<std::string, std::string>& options) {
  return add_stream(
      Media::kAudio, encoder, options,
      [&](const AVCodec* codec, bool global_header, const std::string& label) {
        return audio_context(config, codec, global_header, label).release();
      });
}

int Muxer::add_remux_stream(const Codec& codec) {
  BusyGuard guard(state_->busy, dst_ + ": the Muxer");
  check_adding(*this, state_->opened, state_->closed);
  AVStream* st = avformat_new_stream(state_->fmt, nullptr);
  if (st == nullptr) throw std::bad_alloc();
  if (avcodec_parameters_copy(st->codecpar, codec.params()) < 0)
    throw std::bad_alloc();
  // The input container's tag, where this format reads it as the same codec
  // or has no tag of its own for it (as the CLI's stream copy does): AVI
  // given H.264 from MP4 keeps "avc1" (its own "H264" would claim Annex B).
  // Otherwise the format picks its own.
  const AVCodecTag* const* tags = state_->fmt->oformat->codec_tag;
  const unsigned int in_tag = codec.params()->codec_tag;
  unsigned int own_tag = 0;
  const bool keep_tag =
      tags == nullptr ||
      av_codec_get_id(tags, in_tag) == codec.params()->codec_id ||
      av_codec_get_tag2(tags, codec.params()->codec_id, &own_tag) == 0;
  st->codecpar->codec_tag = keep_tag ? in_tag : 0;
  st->time_base = to_av(codec.time_base());
  if (codec.media() != Media::kAudio) {
    st->avg_frame_rate = to_av(codec.frame_rate());
    st->sample_aspect_ratio = codec.params()->sample_aspect_ratio;
  }
  state_->remuxed.push_back(true);
  return static_cast<int>(st->index);
}

void Muxer::open(const std::map<std::string, std::string>& options) {
  BusyGuard guard(state_->busy, dst_ + ": the Muxer");
  if (state_->closed) throw InvalidArgument(dst_ + ": the Muxer is closed");
  if (state_->opened)
    throw InvalidArgument(dst_ + ": the Muxer was opened already");
  AVFormatContext* fmt = state_->fmt;
  if (fmt->nb_streams == 0)
    throw InvalidArgument(dst_ + ": add a stream before opening the Muxer");
  std::map<std::string, std::string> opts = options;
  // One image to one named file, not a numbered sequence.
  if (std::strcmp(fmt->oformat->name, "image2") == 0 &&
      opts.find("update") == opts.end()) {
    opts["update"] = "1";
  }
  if (state_->in_memory) {
    auto flags = opts.find("movflags");
    if (flags != opts.end() &&
        flags->second.find("faststart") != std::string::npos) {
      // FFmpeg moves the index by reading the file back through its name.
      throw InvalidArgument(
          dst_ +
          ": movflags=faststart reads the file back by its name, "
          "which a Muxer in memory has not: write to a path, or use "
          "movflags=+frag_keyframe+empty_moov for a streamable file");
    }
  }
  const bool own_file = !state_->in_memory &&
                        (fmt->oformat->flags & AVFMT_NOFILE) == 0 &&
                        dst_.find("://") == std::string::npos;
  if (!state_->in_memory && (fmt->oformat->flags & AVFMT_NOFILE) == 0) {
    // A plain path is written with the file protocol only; a URL with the
    // protocol it names (the caller asked for it).
    std::map<std::string, std::string> io;
    if (dst_.find("://") == std::string::npos)
      io["protocol_whitelist"] = "file";
    Options io_opts(io);
    const int rc = avio_open2(&fmt->pb, dst_.c_str(), AVIO_FLAG_WRITE, nullptr,
                              io_opts.get());
    if (rc < 0) {
      throw IoError(dst_ + ": cannot open for writing: " + av_error_text(rc));
    }
  }
  Options o(opts);
  clear_ffmpeg_error();
  const int rc = avformat_write_header(fmt, o.get());
  // FFmpeg does not take a second avformat_write_header() on a context
  // whose first one failed: the Muxer is done, its file closed and removed
  // (what was written of it is no file of its format). So is one given an
  // option no part of FFmpeg took: it was probably misspelt.
  auto give_up = [&] {
    state_->closed = true;
    if (!state_->in_memory && (fmt->oformat->flags & AVFMT_NOFILE) == 0)
      avio_closep(&fmt->pb);
    if (own_file) std::remove(dst_.c_str());
  };
  if (rc < 0) {
    const std::string detail = ffmpeg_error();
    give_up();
    throw InvalidArgument(
        dst_ + ": cannot write the " + format() +
        " header: " + (detail.empty() ? av_error_text(rc) : detail));
  }
  try {
    o.check_consumed(dst_, "the " + format() + " muxer");
  } catch (...) {
    give_up();
    throw;
  }
  state_->opened = true;
}

namespace {

// FFmpeg's message for the failed call (captured since clear_ffmpeg_error),
// else the code's text.
std::string error_text(int rc) {
  const std::string detail = ffmpeg_error();
  return detail.empty() ? av_error_text(rc) : detail;
}

// Throws InvalidArgument unless packets of `codec` fit stream `index`, of
// parameters `st`.
void check_same_codec(const std::string& dst, const Codec& codec,
                      const AVCodecParameters* st, int index, bool remuxed) {
  const AVCodecParameters* p = codec.params();
  const std::string stream = dst + ": stream " + std::to_string(index) + " (";
  auto refuse = [&](const std::string& what, const std::string& theirs,
                    const std::string& ours) {
    throw InvalidArgument(stream + avcodec_get_name(st->codec_id) +
                          ") got packets of " + what + " " + theirs + ", not " +
                          ours + ": they would make a file nothing can decode");
  };
  if (p->codec_id != st->codec_id) {
    refuse("codec", avcodec_get_name(p->codec_id),
           avcodec_get_name(st->codec_id));
  }
  if (st->codec_type == AVMEDIA_TYPE_VIDEO && p->width > 0 && st->width > 0 &&
      (p->width != st->width || p->height != st->height)) {
    refuse("size", std::to_string(p->width) + "x" + std::to_string(p->height),
           std::to_string(st->width) + "x" + std::to_string(st->height));
  }
  if (st->codec_type == AVMEDIA_TYPE_AUDIO) {
    if (p->sample_rate > 0 && st->sample_rate > 0 &&
        p->sample_rate != st->sample_rate) {
      refuse("rate", std::to_string(p->sample_rate) + " Hz",
             std::to_string(st->sample_rate) + " Hz");
    }
    if (p->ch_layout.nb_channels > 0 && st->ch_layout.nb_channels > 0 &&
        p->ch_layout.nb_channels != st->ch_layout.nb_channels) {
      refuse("channel count", std::to_string(p->ch_layout.nb_channels),
             std::to_string(st->ch_layout.nb_channels));
    }
  }
  // Packets of another stream of the codec (another SPS, or Annex B after a
  // bit-stream filter where the stream holds avcC) decode against the wrong
  // set-up.
  if (remuxed && p->extradata_size > 0 && st->extradata_size > 0 &&
      (p->extradata_size != st->extradata_size ||
       std::memcmp(p->extradata, st->extradata,
                   static_cast<std::size_t>(st->extradata_size)) != 0)) {
    refuse("codec set-up (extradata)",
           "of " + std::to_string(p->extradata_size) + " bytes",
           "the stream's " + std::to_string(st->extradata_size) +
               " (packets of another file, or filtered by a bit-stream "
               "filter: add the stream from their codec)");
  }
}

}  // namespace

void Muxer::write(int index, const Packets& packets) {
  BusyGuard guard(state_->busy, dst_ + ": the Muxer");
  if (!state_->opened || state_->closed) {
    throw InvalidArgument(dst_ + (state_->closed
                                      ? ": the Muxer is closed"
                                      : ": open the Muxer before writing"));
  }
  packets.check();
  AVFormatContext* fmt = state_->fmt;
  if (index < 0 || index >= num_streams()) {
    throw InvalidArgument(dst_ + ": no stream " + std::to_string(index) +
                          " (it has " + std::to_string(num_streams()) + ")");
  }
  AVStream* st = fmt->streams[index];
  const bool audio_stream = st->codecpar->codec_type == AVMEDIA_TYPE_AUDIO;
  if (audio_stream != (packets.media() == Media::kAudio)) {
    throw InvalidArgument(dst_ + ": stream " + std::to_string(index) + " is " +
                          (audio_stream ? "audio" : "video") + ", got " +
                          media_name(packets.media()) + " packets");
  }
  if (packets.codec()) {
    check_same_codec(dst_, *packets.codec(), st->codecpar, index,
                     state_->remuxed[static_cast<std::size_t>(index)]);
  }
  const AVRational tb = to_av(packets.time_base());
  for (const AVPacket* p : packets.packets()) {
    PacketPtr c = new_packet();
    if (av_packet_ref(c.get(), p) < 0) throw std::bad_alloc();
    av_packet_rescale_ts(c.get(), tb, st->time_base);
    c->stream_index = index;
    c->pos = -1;
    clear_ffmpeg_error();
    const int rc = av_interleaved_write_frame(fmt, c.get());
    if (rc < 0) {
      throw IoError(dst_ + ": cannot write a packet of stream " +
                    std::to_string(index) + ": " + error_text(rc));
    }
  }
}

void Muxer::flush() {
  BusyGuard guard(state_->busy, dst_ + ": the Muxer");
  if (!state_->opened || state_->closed) return;
  clear_ffmpeg_error();
  const int rc = av_interleaved_write_frame(state_->fmt, nullptr);
  if (rc < 0) throw IoError(dst_ + ": cannot flush: " + error_text(rc));
}

void Muxer::close() {
  BusyGuard guard(state_->busy, dst_ + ": the Muxer");
  if (state_->closed) throw InvalidArgument(dst_ + ": the Muxer is closed");
  state_->closed = true;
  if (!state_->opened) return;
  AVFormatContext* fmt = state_->fmt;
  clear_ffmpeg_error();
  const int rc = av_write_trailer(fmt);
  const std::string detail = rc < 0 ? error_text(rc) : "";
  int rc_close = 0;
  if (state_->in_memory) {
    avio_flush(fmt->pb);
  } else if ((fmt->oformat->flags & AVFMT_NOFILE) == 0) {
    rc_close = avio_closep(&fmt->pb);
  }
  state_->failed = rc < 0 || rc_close < 0;
  if (rc < 0) throw IoError(dst_ + ": cannot write the trailer: " + detail);
  if (rc_close < 0)
    throw IoError(dst_ + ": cannot close: " + av_error_text(rc_close));
}

// --- encode_video, encode_audio ---

namespace {

// Frames as one stream of a file in memory. Messages name the frames'
// source: "<memory: frames of clip.mp4> (stream 0): ...".
template <typename Config>
Buffer encode_in_memory(
    Frames&& frames, const std::string& format, const Config& config,
    const std::string& encoder,
    const std::map<std::string, std::string>& options,
    const std::map<std::string, std::string>& muxer_options) {
  auto muxer = Muxer::in_memory(
      format, frames.src().empty()
                  ? "<memory>"
                  : "<memory: frames of " + frames.src() + ">");
  Encoder& enc = muxer->add_encode_stream(config, encoder, options);
  muxer->open(muxer_options);
  muxer->write(0, *enc.encode(std::move(frames)));
  muxer->write(0, *enc.flush());
  muxer->close();
  return muxer->take_bytes();
}

// The encoder a stream of a `format` Muxer in memory would get, checked as
// Muxer::in_memory() and add_stream() check it, without making either.
const AVCodec* encode_target(Media media, const std::string& format,
                             const std::string& encoder,
                             const std::string& label) {
  const AVOutputFormat* of = av_guess_format(format.c_str(), nullptr, nullptr);
  if (format.empty() || of == nullptr)
    throw InvalidArgument(label + ": no muxer named \"" + format + "\"");
  refuse_own_files(of, format, label + ": ");
  return stream_encoder(of, nullptr, media, encoder, label);
}

// The frame rate (and, for unevenly spaced frames, the time base) of a
// config that gives none, from the frames' times: evenly spaced frames (to
// a tick of the time base, which rounds 29.97 fps in milliseconds to 33 and
// 34) are numbered at their average rate; others keep their own times where
// `codec` takes any rate. One frame: the time base's rate.
void frames_timing(const Frames& frames, const AVCodec* codec,
                   VideoEncodeConfig* c) {
  const Rational tb = frames.time_base();
  const std::vector<int64_t> pts = frames.pts();
  const std::size_t n = pts.size();
  int64_t lo = INT64_MAX;
  int64_t hi = 0;
  bool ok = tb.num > 0 && tb.den > 0;
  for (std::size_t i = 1; ok && i < n; ++i) {
    int64_t step = 0;
    // Timestamps from a deserialized string may be anything.
    ok = pts[i] > pts[i - 1] &&
         !__builtin_sub_overflow(pts[i], pts[i - 1], &step);
    lo = std::min(lo, step);
    hi = std::max(hi, step);
  }
  // (n - 1) frames in `span` ticks: (n - 1) * den / (span * num) per second.
  int64_t span = 1;
  int64_t ticks = 0;
  int64_t frames_den = 0;
  ok = ok && (n < 2 || !__builtin_sub_overflow(pts[n - 1], pts[0], &span)) &&
       !__builtin_mul_overflow(int64_t{tb.num}, span, &ticks) &&
       !__builtin_mul_overflow(
           static_cast<int64_t>(std::max<std::size_t>(n, 2) - 1),
           int64_t{tb.den}, &frames_den);
  int num = 0;
  int den = 0;
  if (ok) av_reduce(&num, &den, frames_den, ticks, 1 << 30);
  if (num <= 0 || den <= 0) {
    throw InvalidArgument(
        "encode_video: the frames' timestamps (" + std::to_string(pts[0]) +
        (n >= 2 ? " ... " + std::to_string(pts[n - 1]) : std::string()) +
        " in time base " + std::to_string(tb.num) + "/" +
        std::to_string(tb.den) +
        ") give no usable frame rate; give the config a frame_rate");
  }
  c->frame_rate = Rational{num, den};
  const std::vector<AVRational> fixed = encoder_support(codec).frame_rates;
  if (fixed.empty()) {
    if (n >= 3 && hi - lo > 1 && !c->time_base) c->time_base = tb;
    return;
  }
  // An encoder of fixed rates (MPEG-1/2): the listed rate nearest the
  // average, at which the frames are numbered (the clip keeps its length).
  const double want = static_cast<double>(num) / den;
  AVRational best = fixed.front();
  for (const AVRational& r : fixed) {
    if (std::abs(av_q2d(r) - want) < std::abs(av_q2d(best) - want)) best = r;
  }
  c->frame_rate = from_av(best);
}

std::string tag_name(const char* name) { return name != nullptr ? name : ""; }

// The tags `c` leaves unset, from the frames' first: a decoded clip encoded
// again keeps its colour matrix, range, primaries, transfer and pixel shape
// (an untagged stream is read as BT.601, limited range, square pixels).
void inherit_tags(const AVFrame* f, VideoEncodeConfig* c) {
  const AVPixFmtDescriptor* d =
      av_pix_fmt_desc_get(static_cast<AVPixelFormat>(f->format));
  // An RGB frame's matrix and range are not the encoder's: it converts.
  const bool rgb = d == nullptr || (d->flags & AV_PIX_FMT_FLAG_RGB) != 0;
  if (!rgb && c->colorspace.empty() && f->colorspace != AVCOL_SPC_UNSPECIFIED) {
    c->colorspace = tag_name(av_color_space_name(f->colorspace));
  }
  if (!rgb && c->color_range.empty() &&
      f->color_range != AVCOL_RANGE_UNSPECIFIED) {
    c->color_range = tag_name(av_color_range_name(f->color_range));
  }
  if (c->color_primaries.empty() &&
      f->color_primaries != AVCOL_PRI_UNSPECIFIED) {
    c->color_primaries = tag_name(av_color_primaries_name(f->color_primaries));
  }
  if (c->color_trc.empty() && f->color_trc != AVCOL_TRC_UNSPECIFIED)
    c->color_trc = tag_name(av_color_transfer_name(f->color_trc));
  // (The encoder takes frames of its own size only: no rescaling.)
  const AVRational sar = f->sample_aspect_ratio;
  if (!c->sample_aspect_ratio && sar.num > 0 && sar.den > 0)
    c->sample_aspect_ratio = from_av(sar);
}

}  // namespace

Buffer encode_video(Frames&& frames, const std::string& format,
                    VideoEncodeConfig config, const std::string& encoder,
                    const std::map<std::string, std::string>& options,
                    const std::map<std::string, std::string>& muxer_options) {
  frames.check();
  if (frames.media() == Media::kAudio)
    throw InvalidArgument("encode_video: got audio frames");
  if (frames.empty()) throw InvalidArgument("encode_video: no frames");
  if (config.width == 0) config.width = frames.width();
  if (config.height == 0) config.height = frames.height();
  inherit_tags(frames.frames()[0], &config);
  if (!config.frame_rate) {
    frames_timing(frames,
                  encode_target(Media::kVideo, format, encoder, "encode_video"),
                  &config);
  }
  return encode_in_memory(std::move(frames), format, config, encoder, options,
                          muxer_options);
}

Buffer encode_audio(Frames&& frames, const std::string& format,
                    AudioEncodeConfig config, const std::string& encoder,
                    const std::map<std::string, std::string>& options,
                    const std::map<std::string, std::string>& muxer_options) {
  frames.check();
  if (frames.media() != Media::kAudio) {
    throw InvalidArgument(std::string("encode_audio: got ") +
                          media_name(frames.media()) + " frames");
  }
  if (frames.empty()) throw InvalidArgument("encode_audio: no frames");
  if (config.num_channels == 0) config.num_channels = frames.num_channels();
  if (config.sample_rate == 0) config.sample_rate = frames.sample_rate();
  return encode_in_memory(std::move(frames), format, config, encoder, options,
                          muxer_options);
}

void check_encode(const std::string& format, const VideoEncodeConfig& config,
                  const std::string& encoder) {
  const std::string label = "encode_video";
  const AVCodec* codec = encode_target(Media::kVideo, format, encoder, label);
  VideoEncodeConfig c = config;
  if (c.width == 0) c.width = 64;
  if (c.height == 0) c.height = 64;
  if (!c.frame_rate && encoder_support(codec).frame_rates.empty())
    c.frame_rate = Rational{25, 1};
  (void)video_context(c, codec, false, label, AV_PIX_FMT_NONE);
}

void check_encode(const std::string& format, const AudioEncodeConfig& config,
                  const std::string& encoder) {
  const std::string label = "encode_audio";
  const AVCodec* codec = encode_target(Media::kAudio, format, encoder, label);
  AudioEncodeConfig c = config;
  if (c.num_channels == 0) c.num_channels = 2;
  if (c.sample_rate == 0 && encoder_support(codec).sample_rates.empty())
    c.sample_rate = 48000;
  (void)audio_context(c, codec, false, label);
}

}  // namespace feedline::media
