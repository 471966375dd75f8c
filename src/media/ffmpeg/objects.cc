// SPDX-License-Identifier: Apache-2.0
//
// Codec, Packets and Frames: owners of FFmpeg parameters, packets and frames.

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <string>

#include "media/ffmpeg/ffmpeg.h"

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

const char* media_name(Media media) {
  switch (media) {
    case Media::kAudio:
      return "audio";
    case Media::kVideo:
      return "video";
    case Media::kImage:
      return "image";
  }
  return "media";
}

namespace {

std::string fixed3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

std::string rational_text(Rational r) {
  return std::to_string(r.num) + "/" + std::to_string(r.den);
}

}  // namespace

// --- Codec -------------------------------------------------------------------

Codec::Codec(Media media, const AVCodecParameters* params, Rational time_base,
             Rational frame_rate)
    : media_(media), time_base_(time_base), frame_rate_(frame_rate) {
  AVCodecParameters* copy = avcodec_parameters_alloc();
  if (copy == nullptr) throw std::bad_alloc();
  std::shared_ptr<AVCodecParameters> owner(copy, ParamsDeleter{});
  if (avcodec_parameters_copy(copy, params) < 0) throw std::bad_alloc();
  params_ = std::move(owner);
}

std::string Codec::name() const { return avcodec_get_name(params_->codec_id); }
int Codec::width() const { return params_->width; }
int Codec::height() const { return params_->height; }
std::string Codec::pix_fmt() const { return pix_fmt_name(params_->format); }
Rational Codec::sample_aspect_ratio() const {
  return from_av(params_->sample_aspect_ratio);
}
int Codec::sample_rate() const { return params_->sample_rate; }
int Codec::num_channels() const { return params_->ch_layout.nb_channels; }
std::string Codec::sample_fmt() const {
  return sample_fmt_name(params_->format);
}
std::string Codec::channel_layout() const {
  const AVChannelLayout& l = params_->ch_layout;
  if (l.order == AV_CHANNEL_ORDER_NATIVE) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, l.u.mask);
    return buf;
  }
  return std::to_string(l.nb_channels) + "c";
}
int64_t Codec::bit_rate() const { return params_->bit_rate; }
int Codec::bits_per_sample() const { return params_->bits_per_raw_sample; }

std::string Codec::to_string() const {
  std::string s = "codec=\"" + name() + "\"";
  if (media_ == Media::kAudio) {
    s += ", sample_rate=" + std::to_string(sample_rate()) +
         ", num_channels=" + std::to_string(num_channels()) +
         ", sample_fmt=\"" + sample_fmt() + "\"";
  } else {
    s += ", width=" + std::to_string(width()) +
         ", height=" + std::to_string(height()) + ", pix_fmt=\"" + pix_fmt() +
         "\"";
    if (media_ == Media::kVideo)
      s += ", frame_rate=" + rational_text(frame_rate_);
  }
  s += ", time_base=" + rational_text(time_base_);
  return s;
}

// --- Packets -----------------------------------------------------------------

Packets::Packets(Media media, std::string src, int stream_index,
                 Rational time_base, std::optional<Window> window,
                 std::optional<Codec> codec)
    : media_(media),
      src_(std::move(src)),
      stream_index_(stream_index),
      time_base_(time_base),
      window_(std::move(window)),
      codec_(std::move(codec)) {
  if (time_base_.den == 0 || time_base_.num <= 0) {
    throw InvalidArgument(src_ + ": invalid time base " +
                          rational_text(time_base_));
  }
}

Packets::~Packets() {
  for (AVPacket* p : packets_) av_packet_free(&p);
}

void Packets::check() const {
  if (consumed_) {
    throw ObjectConsumed(std::string(media_name(media_)) + " packets of " +
                         src_ +
                         " were consumed (decoded or converted); clone() "
                         "them first to use them twice");
  }
}

// The accessors of a live object.
const std::string& Packets::src() const {
  check();
  return src_;
}
int Packets::stream_index() const {
  check();
  return stream_index_;
}
Rational Packets::time_base() const {
  check();
  return time_base_;
}
const std::optional<Window>& Packets::window() const {
  check();
  return window_;
}
const std::optional<Codec>& Packets::codec() const {
  check();
  return codec_;
}
std::size_t Packets::num_packets() const {
  check();
  return packets_.size();
}

const Codec& Packets::require_codec() const {
  check();
  if (!codec_) {
    throw InvalidArgument(
        src_ +
        ": the packets carry no codec (streamed packets do not); take it from "
        "the Demuxer");
  }
  return *codec_;
}

void Packets::push(AVPacket* packet) { packets_.push_back(packet); }

Packets::PacketView Packets::packet(std::size_t i) const {
  check();
  if (i >= packets_.size()) {
    throw OutOfRange(src_ + ": packet " + std::to_string(i) + " of " +
                     std::to_string(packets_.size()));
  }
  const AVPacket* p = packets_[i];
  PacketView v;
  v.pts = p->pts;
  v.dts = p->dts;
  v.duration = p->duration;
  v.flags = p->flags;
  v.data = {p->data, static_cast<std::size_t>(p->size)};
  for (int s = 0; s < p->side_data_elems; ++s) {
    const AVPacketSideData& sd = p->side_data[s];
    v.side_data.emplace_back(static_cast<int>(sd.type),
                             std::span<const uint8_t>(sd.data, sd.size));
  }
  return v;
}

std::size_t Packets::size() const {
  check();
  if (!window_) return packets_.size();
  const AVRational tb = to_av(time_base_);
  return static_cast<std::size_t>(std::count_if(
      packets_.begin(), packets_.end(),
      [&](const AVPacket* p) { return in_window(p->pts, tb, window_); }));
}

std::vector<double> Packets::timestamps(bool raw) const {
  check();
  const AVRational tb = to_av(time_base_);
  std::vector<double> out;
  for (const AVPacket* p : packets_) {
    if (p->pts == AV_NOPTS_VALUE) {
      // Unknown until decoded (MPEG-PS B-frames, say).
      if (raw) out.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    if (raw || in_window(p->pts, tb, window_))
      out.push_back(seconds(p->pts, tb));
  }
  if (!raw) std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<Packets> Packets::share() const {
  check();
  auto out =
      make_packets(media_, src_, stream_index_, time_base_, window_, codec_);
  for (const AVPacket* p : packets_) {
    AVPacket* c = av_packet_clone(p);
    if (c == nullptr) throw std::bad_alloc();
    out->push(c);
  }
  out->stream_end_ = stream_end_;
  out->views_ = views_;
  return out;
}

std::unique_ptr<Packets> Packets::clone() const {
  auto out = share();
  if (views_) {
    // A viewed payload is read-only, so this copies it.
    for (AVPacket* c : out->packets_) {
      if (av_packet_make_writable(c) < 0) throw std::bad_alloc();
    }
    out->views_ = false;
  }
  return out;
}

std::unique_ptr<Packets> Packets::take() {
  check();
  auto out =
      make_packets(media_, src_, stream_index_, time_base_, window_, codec_);
  out->packets_ = std::move(packets_);
  out->stream_end_ = stream_end_;
  out->views_ = views_;
  packets_.clear();
  consumed_ = true;
  return out;
}

std::string Packets::to_string() const {
  std::string kind = media_ == Media::kAudio   ? "AudioPackets"
                     : media_ == Media::kVideo ? "VideoPackets"
                                               : "ImagePackets";
  if (consumed_) return kind + "<consumed>";
  std::string s = kind + "<src=\"" + src_ + "\"";
  if (media_ != Media::kImage) {
    s += ", num_packets=" + std::to_string(size());
    std::vector<double> ts = timestamps();
    if (!ts.empty())
      s += ", pts=[" + fixed3(ts.front()) + ", " + fixed3(ts.back()) + "]";
    if (window_) {
      s += ", timestamp=(" + fixed3(window_->start.to_double()) + ", " +
           (window_->end ? fixed3(window_->end->to_double()) : "inf") + ")";
    }
  }
  s += ", codec=";
  s += codec_ ? "<" + codec_->to_string() + ">" : "None";
  return s + ">";
}

std::unique_ptr<Packets> make_packets(Media media, std::string src,
                                      int stream_index, Rational time_base,
                                      std::optional<Window> window,
                                      std::optional<Codec> codec) {
  switch (media) {
    case Media::kAudio:
      return std::make_unique<AudioPackets>(media, std::move(src), stream_index,
                                            time_base, std::move(window),
                                            std::move(codec));
    case Media::kVideo:
      return std::make_unique<VideoPackets>(media, std::move(src), stream_index,
                                            time_base, std::move(window),
                                            std::move(codec));
    case Media::kImage:
      break;
  }
  return std::make_unique<ImagePackets>(media, std::move(src), stream_index,
                                        time_base, std::move(window),
                                        std::move(codec));
}

// --- Frames ------------------------------------------------------------------

Frames::Frames(Media media, Rational time_base)
    : media_(media), time_base_(time_base) {
  if (time_base_.den == 0) {
    throw InvalidArgument("frames: invalid time base " +
                          rational_text(time_base_));
  }
}

Frames::~Frames() {
  for (AVFrame* f : frames_) av_frame_free(&f);
}

Rational Frames::time_base() const {
  check();
  return time_base_;
}

void Frames::check() const {
  if (consumed_) {
    throw ObjectConsumed(std::string(media_name(media_)) +
                         " frames were consumed (converted or filtered); "
                         "clone() them first to use them twice");
  }
}

void Frames::push(AVFrame* frame) {
  if (media_ == Media::kImage && !frames_.empty()) {
    av_frame_free(&frame);
    throw Internal("an ImageFrames holds one frame");
  }
  frames_.push_back(frame);
}

int64_t Frames::num_frames() const {
  check();
  if (media_ != Media::kAudio) return static_cast<int64_t>(frames_.size());
  int64_t n = 0;
  for (const AVFrame* f : frames_) n += f->nb_samples;
  return n;
}

int Frames::width() const {
  check();
  return frames_.empty() ? 0 : frames_[0]->width;
}
int Frames::height() const {
  check();
  return frames_.empty() ? 0 : frames_[0]->height;
}
std::string Frames::format() const {
  check();
  if (frames_.empty()) return "none";
  return media_ == Media::kAudio ? sample_fmt_name(frames_[0]->format)
                                 : pix_fmt_name(frames_[0]->format);
}
int Frames::num_planes() const {
  check();
  if (frames_.empty()) return 0;
  if (media_ == Media::kAudio) {
    return av_sample_fmt_is_planar(
               static_cast<AVSampleFormat>(frames_[0]->format)) != 0
               ? frames_[0]->ch_layout.nb_channels
               : 1;
  }
  return av_pix_fmt_count_planes(
      static_cast<AVPixelFormat>(frames_[0]->format));
}
int Frames::sample_rate() const {
  check();
  return frames_.empty() ? 0 : frames_[0]->sample_rate;
}
int Frames::num_channels() const {
  check();
  return frames_.empty() ? 0 : frames_[0]->ch_layout.nb_channels;
}

std::vector<int64_t> Frames::pts() const {
  check();
  std::vector<int64_t> out;
  out.reserve(frames_.size());
  for (const AVFrame* f : frames_) out.push_back(f->pts);
  return out;
}

std::vector<double> Frames::timestamps() const {
  check();
  std::vector<double> out;
  out.reserve(frames_.size());
  const AVRational tb = to_av(time_base_);
  for (const AVFrame* f : frames_)
    out.push_back(f->pts == AV_NOPTS_VALUE ? 0.0 : seconds(f->pts, tb));
  return out;
}

std::map<std::string, std::string> Frames::metadata() const {
  check();
  std::map<std::string, std::string> out;
  if (frames_.empty()) return out;
  const AVDictionaryEntry* e = nullptr;
  while ((e = av_dict_get(frames_[0]->metadata, "", e,
                          AV_DICT_IGNORE_SUFFIX)) != nullptr) {
    out[e->key] = e->value;
  }
  return out;
}

std::unique_ptr<Frames> Frames::clone() const {
  check();
  auto out = make_frames(media_, time_base_);
  out->src_ = src_;
  for (const AVFrame* f : frames_) {
    AVFrame* c = av_frame_clone(f);
    if (c == nullptr) throw std::bad_alloc();
    out->frames_.push_back(c);
  }
  return out;
}

std::unique_ptr<Frames> Frames::take() {
  check();
  auto out = make_frames(media_, time_base_);
  out->src_ = src_;
  out->frames_ = std::move(frames_);
  frames_.clear();
  consumed_ = true;
  return out;
}

std::unique_ptr<Frames> Frames::select(
    const std::vector<int64_t>& indices) const {
  check();
  const auto n = static_cast<int64_t>(frames_.size());
  auto out = make_frames(media_, time_base_);
  out->src_ = src_;
  for (int64_t i : indices) {
    if (i < -n || i >= n) {
      throw OutOfRange("frame index " + std::to_string(i) +
                       " is out of range for " + std::to_string(n) + " frames");
    }
    AVFrame* c =
        av_frame_clone(frames_[static_cast<std::size_t>(i < 0 ? i + n : i)]);
    if (c == nullptr) throw std::bad_alloc();
    out->frames_.push_back(c);
  }
  return out;
}

void Frames::extend(Frames&& other) {
  check();
  if (other.media_ != media_ || media_ == Media::kImage)
    throw InvalidArgument(
        "only video or audio frames of one kind can be joined");
  std::unique_ptr<Frames> taken = other.take();
  frames_.insert(frames_.end(), taken->frames_.begin(), taken->frames_.end());
  taken->frames_.clear();
}

std::unique_ptr<Frames> Frames::image(int64_t i) const {
  auto one = select({i});
  auto out = make_frames(Media::kImage, time_base_);
  out->src_ = src_;
  out->frames_ = std::move(one->frames_);
  one->frames_.clear();
  return out;
}

std::string Frames::to_string() const {
  std::string kind = media_ == Media::kAudio   ? "AudioFrames"
                     : media_ == Media::kVideo ? "VideoFrames"
                                               : "ImageFrames";
  if (consumed_) return kind + "<consumed>";
  std::string s = kind + "<num_frames=" + std::to_string(num_frames());
  if (media_ == Media::kAudio) {
    s += ", sample_format=\"" + format() +
         "\", sample_rate=" + std::to_string(sample_rate()) +
         ", num_channels=" + std::to_string(num_channels());
  } else {
    s += ", pixel_format=\"" + format() +
         "\", num_planes=" + std::to_string(num_planes()) +
         ", width=" + std::to_string(width()) +
         ", height=" + std::to_string(height());
  }
  std::vector<double> ts = timestamps();
  if (!ts.empty()) {
    s += ", timestamp=[" + fixed3(ts.front()) + ", " + fixed3(ts.back()) + "]";
  }
  return s + ">";
}

std::unique_ptr<Frames> make_frames(Media media, Rational time_base) {
  switch (media) {
    case Media::kAudio:
      return std::make_unique<AudioFrames>(media, time_base);
    case Media::kVideo:
      return std::make_unique<VideoFrames>(media, time_base);
    case Media::kImage:
      break;
  }
  return std::make_unique<ImageFrames>(media, time_base);
}

}  // namespace feedline::media
