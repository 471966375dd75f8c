// SPDX-License-Identifier: Apache-2.0
//
// Demuxer: streams, codecs, windowed demuxing with key-frame seeking, and
// chunked streaming.

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "media/ffmpeg/ffmpeg.h"

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

class Demuxer::Input : public media::ffmpeg::Input {
 public:
  using media::ffmpeg::Input::Input;
  bool read_any = false;  // packets were read: a new demux must seek back
};

namespace {

std::string default_name(const Source& source) {
  if (!source.in_memory()) return source.url;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "<Bytes: %p>",
                static_cast<const void*>(source.data.data()));
  return buf;
}

AVMediaType av_type(Media media) {
  return media == Media::kAudio ? AVMEDIA_TYPE_AUDIO : AVMEDIA_TYPE_VIDEO;
}

// Stream `st` as a Codec, in time base `tb`. Its sample aspect ratio is the
// one players use (the container's, where it has one: Matroska keeps it on
// the stream, not in the codec's parameters), so decoded frames, filters
// and encoders see the picture's real shape.
Codec codec_of_stream(Media media, AVFormatContext* fmt, AVStream* st,
                      AVRational tb) {
  const AVRational rate = av_guess_frame_rate(fmt, st, nullptr);
  const AVRational sar = av_guess_sample_aspect_ratio(fmt, st, nullptr);
  if (media == Media::kAudio || sar.num <= 0 ||
      av_cmp_q(sar, st->codecpar->sample_aspect_ratio) == 0) {
    return Codec(media, st->codecpar, from_av(tb), from_av(rate));
  }
  std::unique_ptr<AVCodecParameters, ParamsDeleter> params(
      avcodec_parameters_alloc());
  if (!params || avcodec_parameters_copy(params.get(), st->codecpar) < 0)
    throw std::bad_alloc();
  params->sample_aspect_ratio = sar;
  return Codec(media, params.get(), from_av(tb), from_av(rate));
}

}  // namespace

namespace {

// Seeks so that reading starts at a key frame at or before `start`, and
// returns the packets of stream `index` read to check that (from that key
// frame on). nullopt when seeking is impossible or keeps landing late: the
// caller reads from the beginning.
std::optional<std::vector<PacketPtr>> seek_before(AVFormatContext* fmt,
                                                  int index, Rational start) {
  AVStream* st = fmt->streams[index];
  const AVRational tb = st->time_base;
  const int64_t start_ts =
      av_rescale_q_rnd(start.num, AVRational{1, start.den}, tb, AV_ROUND_DOWN);
  int64_t target = start_ts;
  int64_t step = av_rescale_q(1, AVRational{1, 1}, tb);  // 1 s
  constexpr int kAttempts = 6;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (av_seek_frame(fmt, index, target, AVSEEK_FLAG_BACKWARD) < 0) break;
    // Read up to the first key frame of the stream.
    std::vector<PacketPtr> head;
    bool found = false;
    bool late = false;
    for (int n = 0; n < 100000; ++n) {
      PacketPtr packet = new_packet();
      const int rc = av_read_frame(fmt, packet.get());
      if (rc < 0) break;
      if (packet->stream_index != index) continue;
      if (head.empty() && (packet->flags & AV_PKT_FLAG_KEY) == 0) continue;
      if (head.empty()) {
        found = true;
        const int64_t t =
            packet->pts != AV_NOPTS_VALUE ? packet->pts : packet->dts;
        late = t != AV_NOPTS_VALUE && t > start_ts;
      }
      head.push_back(std::move(packet));
      break;
    }
    if (found && !late) return head;
    if (target == INT64_MIN / 2) break;
    target = target - step < INT64_MIN / 2 ? INT64_MIN / 2 : target - step;
    step *= 2;
  }
  return std::nullopt;
}

void only_stream(AVFormatContext* fmt, int index) {
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    fmt->streams[i]->discard =
        static_cast<int>(i) == index ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
  }
}

}  // namespace

Demuxer::Demuxer(Source source, const DemuxConfig& config, std::string name)
    : source_(std::move(source)),
      config_(config),
      name_(name.empty() ? default_name(source_) : std::move(name)) {
  input_ = std::make_unique<Input>(source_, config_, name_);
}

std::string Demuxer::what() const { return name_ + ": the Demuxer"; }

void Demuxer::reopen() {
  // Seeking back to the very first packet is not exact in every container
  // (MPEG-TS/PS seek by searching timestamps, MP4 audio has priming packets
  // before 0): opening again is.
  input_.reset();
  input_ = std::make_unique<Input>(source_, config_, name_);
}

void Demuxer::rewind() {
  BusyGuard busy(busy_, what());
  if (input_->read_any) reopen();
  pending_.clear();
  chunk_started_ = false;
  eof_ = false;
  streaming_ = false;
  av_packet_free(&carry_);
}

Demuxer::~Demuxer() { av_packet_free(&carry_); }

int Demuxer::num_streams() const {
  BusyGuard busy(busy_, what());
  return static_cast<int>(input_->format()->nb_streams);
}

bool Demuxer::has_audio() const {
  BusyGuard busy(busy_, what());
  const AVFormatContext* fmt = input_->format();
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO)
      return true;
  }
  return false;
}

double Demuxer::duration() const {
  BusyGuard busy(busy_, what());
  const AVFormatContext* fmt = input_->format();
  if (fmt->duration == AV_NOPTS_VALUE || fmt->duration <= 0) return 0;
  return static_cast<double>(fmt->duration) / AV_TIME_BASE;
}

int Demuxer::best_stream(Media media) const {
  BusyGuard busy(busy_, what());
  AVFormatContext* fmt = input_->format();
  const int i = av_find_best_stream(fmt, av_type(media), -1, -1, nullptr, 0);
  if (i < 0) {
    throw DecodeError(name_ + ": no " +
                      (media == Media::kAudio ? "audio" : "video") + " stream");
  }
  return i;
}

Codec Demuxer::stream_codec(int index) const {
  BusyGuard busy(busy_, what());
  AVFormatContext* fmt = input_->format();
  if (index < 0 || index >= num_streams()) {
    throw OutOfRange(name_ + ": stream index must be in [0, " +
                     std::to_string(num_streams()) + "); got " +
                     std::to_string(index));
  }
  AVStream* st = fmt->streams[index];
  const AVMediaType type = st->codecpar->codec_type;
  if (type != AVMEDIA_TYPE_AUDIO && type != AVMEDIA_TYPE_VIDEO) {
    throw InvalidArgument(name_ + ": stream " + std::to_string(index) +
                          " is neither audio nor video");
  }
  return codec_of_stream(
      type == AVMEDIA_TYPE_AUDIO ? Media::kAudio : Media::kVideo, fmt, st,
      st->time_base);
}

Codec Demuxer::codec(Media media) const {
  BusyGuard busy(busy_, what());
  const int i = best_stream(media);
  AVFormatContext* fmt = input_->format();
  AVStream* st = fmt->streams[i];
  return codec_of_stream(media, fmt, st, st->time_base);
}

std::unique_ptr<Packets> Demuxer::demux(Media media,
                                        std::optional<Window> window) {
  BusyGuard busy(busy_, what());
  if (window) {
    if (window->start.den <= 0 || (window->end && window->end->den <= 0)) {
      throw InvalidArgument(name_ + ": invalid window");
    }
    if (window->start.num < 0) {
      throw InvalidArgument(name_ + ": the window starts before 0");
    }
    if (window->end &&
        av_cmp_q(to_av(*window->end), to_av(window->start)) < 0) {
      throw InvalidArgument(name_ + ": the window ends before it starts");
    }
  }
  if (media == Media::kImage) window.reset();
  const int index = best_stream(media);
  const bool from_start = !window || window->start.num == 0;
  // Each call reads from scratch; a stream in progress ends.
  if (input_->read_any) rewind();
  AVFormatContext* fmt = input_->format();
  only_stream(fmt, index);
  input_->read_any = true;
  // Packets read while checking where a seek landed, to keep.
  std::vector<PacketPtr> head;
  if (!from_start) {
    auto landed = seek_before(fmt, index, window->start);
    if (landed) {
      head = std::move(*landed);
    } else {
      reopen();
      fmt = input_->format();
      only_stream(fmt, index);
      input_->read_any = true;
    }
  }
  AVStream* st = fmt->streams[index];
  const AVRational tb = st->time_base;
  std::optional<Rational> stop;
  if (window && window->end) {
    stop = *window->end;
    if (media == Media::kVideo) {
      // Reordered B-frames of the window may be stored after a packet that
      // is past its end.
      const AVRational e = av_add_q(to_av(*stop), AVRational{3, 10});
      stop = Rational{e.num, e.den};
    }
  }

  auto packets = make_packets(media, name_, index, from_av(tb), window,
                              codec_of_stream(media, fmt, st, tb));
  bool done = false;
  // The latest end (pts + duration) of the stream's packets.
  const AVRational rate = av_guess_frame_rate(fmt, st, nullptr);
  const int64_t fallback_duration =
      rate.num > 0 && rate.den > 0 ? av_rescale_q(1, av_inv_q(rate), tb) : 0;
  int64_t latest_end = AV_NOPTS_VALUE;
  auto note_end = [&](const AVPacket* packet) {
    if (packet->pts == AV_NOPTS_VALUE) return;
    const int64_t d =
        packet->duration > 0 ? packet->duration : fallback_duration;
    if (packet->pts > INT64_MAX - d) return;
    latest_end = std::max(latest_end == AV_NOPTS_VALUE ? INT64_MIN : latest_end,
                          packet->pts + d);
  };
  auto keep = [&](PacketPtr packet) {
    note_end(packet.get());
    if (stop && packet->pts != AV_NOPTS_VALUE &&
        !before(packet->pts, tb, *stop)) {
      done = true;
      return;
    }
    packets->push(packet.release());
    if (media == Media::kImage) done = true;
  };
  for (PacketPtr& p : head) {
    if (done) break;
    keep(std::move(p));
  }
  bool at_end = false;
  while (!done) {
    PacketPtr packet = new_packet();
    const int rc = av_read_frame(fmt, packet.get());
    if (rc == AVERROR_EOF) {
      at_end = true;
      break;
    }
    if (rc < 0) fail(name_, "reading packets failed", rc);
    if (packet->stream_index != index) continue;
    keep(std::move(packet));
  }
  if (media == Media::kImage && packets->num_packets() == 0) {
    throw DecodeError(name_ + ": no image data");
  }
  if (at_end && latest_end != AV_NOPTS_VALUE)
    packets->set_stream_end(latest_end);
  return packets;
}

std::map<int, std::unique_ptr<Packets>> Demuxer::next_chunk(
    const std::vector<int>& streams, double duration, int num_packets) {
  BusyGuard busy(busy_, what());
  if ((duration > 0) == (num_packets > 0)) {
    throw InvalidArgument(
        "streaming demux needs exactly one of duration (> 0) and num_packets "
        "(> 0)");
  }
  AVFormatContext* fmt = input_->format();
  std::map<int, Media> selected;
  for (int s : streams) {
    if (s < 0 || s >= num_streams()) {
      throw OutOfRange(name_ + ": stream index must be in [0, " +
                       std::to_string(num_streams()) + "); got " +
                       std::to_string(s));
    }
    const AVMediaType type = fmt->streams[s]->codecpar->codec_type;
    if (type != AVMEDIA_TYPE_AUDIO && type != AVMEDIA_TYPE_VIDEO) {
      throw InvalidArgument(name_ + ": stream " + std::to_string(s) +
                            " is neither audio nor video; only audio and "
                            "video streams can be streamed");
    }
    selected[s] = type == AVMEDIA_TYPE_AUDIO ? Media::kAudio : Media::kVideo;
  }
  if (selected.empty()) throw InvalidArgument("no stream selected");
  if (eof_) return {};
  if (!streaming_) {
    if (input_->read_any) {
      reopen();
      fmt = input_->format();
    }
    streaming_ = true;
    for (unsigned i = 0; i < fmt->nb_streams; ++i) {
      fmt->streams[i]->discard = selected.count(static_cast<int>(i)) != 0
                                     ? AVDISCARD_DEFAULT
                                     : AVDISCARD_ALL;
    }
    input_->read_any = true;
  }

  auto take_pending = [&] {
    std::map<int, std::unique_ptr<Packets>> out;
    out.swap(pending_);
    chunk_started_ = false;
    return out;
  };
  // Adds `p` (owned); returns whether the chunk is complete.
  auto add = [&](AVPacket* p) {
    const int s = p->stream_index;
    auto it = selected.find(s);
    if (it == selected.end()) {
      av_packet_free(&p);
      return false;
    }
    AVStream* st = fmt->streams[s];
    auto& slot = pending_[s];
    if (!slot) {
      slot = make_packets(it->second, name_, s, from_av(st->time_base),
                          std::nullopt, std::nullopt);
    }
    slot->push(p);
    return num_packets > 0 &&
           slot->num_packets() >= static_cast<std::size_t>(num_packets);
  };
  // The chunk boundary by duration: true when `p` starts a new chunk.
  auto starts_new_chunk = [&](const AVPacket* p) {
    if (duration <= 0 || selected.count(p->stream_index) == 0) return false;
    if (p->pts == AV_NOPTS_VALUE) return false;
    const double t = seconds(p->pts, fmt->streams[p->stream_index]->time_base);
    if (!chunk_started_) {
      chunk_started_ = true;
      chunk_start_ = t;
      return false;
    }
    if (t - chunk_start_ > duration) return true;
    return false;
  };

  if (carry_ != nullptr) {
    AVPacket* p = carry_;
    carry_ = nullptr;
    starts_new_chunk(p);  // starts the chunk's clock
    if (add(p)) return take_pending();
  }
  PacketPtr packet = new_packet();
  for (;;) {
    const int rc = av_read_frame(fmt, packet.get());
    if (rc == AVERROR_EOF) {
      eof_ = true;
      return take_pending();
    }
    if (rc < 0) fail(name_, "reading packets failed", rc);
    if (selected.count(packet->stream_index) == 0) {
      av_packet_unref(packet.get());
      continue;
    }
    if (starts_new_chunk(packet.get())) {
      carry_ = packet.release();
      return take_pending();
    }
    if (add(packet.release())) return take_pending();
    packet = new_packet();
  }
}

}  // namespace feedline::media
