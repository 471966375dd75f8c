// SPDX-License-Identifier: Apache-2.0
//
// Decoding: the decode session (decoder + filter chain + window), Decoder,
// decode_packets and sample_decode_video.

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>

#include "feedline/base/log.h"
#include "media/ffmpeg/ffmpeg.h"

namespace feedline {
namespace media::ffmpeg {

namespace {

// Filters that map each frame to one frame independently of the others:
// dropping a frame before them changes nothing else. (trim is not one: its
// start_frame/end_frame count the frames it sees.)
bool per_frame_filters_only(const std::string& chain) {
  static const std::set<std::string, std::less<>> kPerFrame = {
      "scale", "format", "crop",   "pad",     "hflip", "vflip",
      "null",  "setsar", "setdar", "aformat", "anull", "transpose"};
  std::size_t pos = 0;
  while (pos <= chain.size()) {
    std::size_t end = chain.find(',', pos);
    if (end == std::string::npos) end = chain.size();
    std::string part = chain.substr(pos, end - pos);
    const std::size_t eq = part.find('=');
    std::string name = part.substr(0, eq);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (kPerFrame.count(name) == 0) return false;
    pos = end + 1;
  }
  return true;
}

}  // namespace

DecodeSession::DecodeSession(const media::Codec& codec,
                             std::optional<std::string> filter,
                             const media::DecodeConfig& config,
                             std::string_view name)
    : name_(name),
      ctx_(
          open_decoder(codec.params(), to_av(codec.time_base()), config, name)),
      tb_(to_av(codec.time_base())),
      audio_(codec.media() == media::Media::kAudio),
      frame_(new_frame()),
      filtered_(new_frame()) {
  if (filter && !filter->empty()) {
    may_skip_ = per_frame_filters_only(*filter);
    chain_.emplace(*filter, audio_, tb_, name_);
  }
}

void DecodeErrors::note(const std::string& what, int code) {
  if (count_++ > 0) return;
  first_ = what + ": " + av_error_text(code);
  const std::string detail = ffmpeg_error();
  if (!detail.empty()) first_ += " (" + detail + ")";
}

void DecodeErrors::report(const std::string& name, bool decoded_any) const {
  if (count_ == 0) return;
  if (!decoded_any) throw DecodeError(name + ": no frame decoded; " + first_);
  log(LogLevel::kWarning, name + ": " + std::to_string(count_) +
                              " packet(s) failed to decode; first: " + first_);
}

bool DecodeSession::send(const AVPacket* packet, bool discard_nonref,
                         const Sink& sink) {
  if (stopped_) return false;
  errors_.before_call();
  ctx_->skip_frame = discard_nonref ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
  for (;;) {
    const int rc = avcodec_send_packet(ctx_.get(), packet);
    if (rc == AVERROR(EAGAIN)) {
      drain(sink);  // the decoder holds frames: take them, then resend
      if (stopped_) return false;
      continue;
    }
    if (rc < 0 && rc != AVERROR_EOF)
      errors_.note("a packet failed to decode", rc);
    break;
  }
  drain(sink);
  return !stopped_;
}

void DecodeSession::flush(const Sink& sink) {
  if (stopped_) return;
  errors_.before_call();
  ctx_->skip_frame = AVDISCARD_DEFAULT;
  const int rc = avcodec_send_packet(ctx_.get(), nullptr);
  if (rc < 0 && rc != AVERROR_EOF)
    errors_.note("flushing the decoder failed", rc);
  drain(sink);
  if (chain_ && !stopped_) {
    chain_->push(nullptr);
    while (!stopped_ && chain_->pull(filtered_.get()) == 0) {
      deliver(filtered_.get(), chain_->time_base(), sink);
      av_frame_unref(filtered_.get());
    }
  }
}

void DecodeSession::drain(const Sink& sink) {
  while (!stopped_) {
    const int rc = avcodec_receive_frame(ctx_.get(), frame_.get());
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
    if (rc < 0) {
      errors_.note("a frame failed to decode", rc);
      return;
    }
    if (frame_->pts == AV_NOPTS_VALUE)
      frame_->pts = frame_->best_effort_timestamp;
    emit(frame_.get(), sink);
    av_frame_unref(frame_.get());
  }
}

void DecodeSession::emit(AVFrame* frame, const Sink& sink) {
  if (!chain_) {
    deliver(frame, tb_, sink);
    return;
  }
  // Frames before the window need not be filtered (per-frame filters only).
  if (!audio_ && may_skip_ && window_ && frame->pts != AV_NOPTS_VALUE &&
      before(frame->pts, tb_, window_->start)) {
    return;
  }
  chain_->push(frame);
  while (!stopped_ && chain_->pull(filtered_.get()) == 0) {
    deliver(filtered_.get(), chain_->time_base(), sink);
    av_frame_unref(filtered_.get());
  }
}

void DecodeSession::deliver(AVFrame* frame, AVRational tb, const Sink& sink) {
  if (!audio_ && window_) {
    if (frame->pts == AV_NOPTS_VALUE) return;
    if (before(frame->pts, tb, window_->start)) return;
    if (window_->end && !before(frame->pts, tb, *window_->end)) {
      // Frames leave in presentation order: nothing later is in the window.
      stopped_ = true;
      return;
    }
  }
  if (!sink(frame, tb)) stopped_ = true;
}

void send_window(DecodeSession& session, const media::Packets& packets,
                 bool skip, const DecodeSession::Sink& sink) {
  const std::vector<AVPacket*>& pkts = packets.packets();
  const AVRational tb = to_av(packets.time_base());
  const auto& window = packets.window();
  skip = skip && window && packets.media() != media::Media::kAudio;
  std::size_t end = pkts.size();
  if (skip && window->end &&
      std::all_of(pkts.begin(), pkts.end(),
                  [](const AVPacket* p) { return p->pts != AV_NOPTS_VALUE; })) {
    end = 0;
    for (std::size_t i = 0; i < pkts.size(); ++i) {
      if (in_window(pkts[i]->pts, tb, window)) end = i + 1;
    }
  }
  for (std::size_t i = 0; i < end; ++i) {
    const bool early = skip && pkts[i]->pts != AV_NOPTS_VALUE &&
                       before(pkts[i]->pts, tb, window->start);
    if (!session.send(pkts[i], early, sink)) return;
  }
  session.flush(sink);
}

}  // namespace media::ffmpeg

namespace media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

namespace {

// The frame limit `n` (> 0) as the Collector's `max`: -1 for no limit.
int64_t frame_limit(std::optional<int64_t> n, const char* what) {
  if (!n) return -1;
  if (*n <= 0) {
    throw InvalidArgument(std::string(what) + " must be > 0 (got " +
                          std::to_string(*n) + "); leave it out for all");
  }
  return *n;
}

// Collects output frames into a Frames of `media`, up to `max` (> 0).
struct Collector {
  std::unique_ptr<Frames> frames;
  int64_t max = -1;
  DecodeSession::Sink sink() {
    return [this](AVFrame* f, AVRational tb) {
      if (frames->empty() && frames->time_base() != from_av(tb)) {
        frames = make_frames(frames->media(), from_av(tb));
      }
      FramePtr copy = new_frame();
      av_frame_move_ref(copy.get(), f);
      frames->push(copy.release());
      return max <= 0 || static_cast<int64_t>(frames->num_av_frames()) < max;
    };
  }
};

void report_errors(const DecodeSession& s, const Frames& out,
                   const std::string& name) {
  s.errors().report(name, !out.empty());
}

}  // namespace

class Decoder::Impl {
 public:
  Impl(const Codec& codec, const std::optional<std::string>& filter,
       const DecodeConfig& config, std::string name)
      : media_(codec.media()),
        name_(std::move(name)),
        session_(codec, filter, config, name_) {}

  std::unique_ptr<Frames> decode(Packets&& packets, int64_t max_frames) {
    if (flushed_ || session_.stopped()) {
      throw InvalidArgument(name_ + ": the Decoder is done (" +
                            (flushed_ ? "flushed at the end of its stream"
                                      : "stopped after max_frames frames") +
                            "); make a new one to decode more packets");
    }
    std::unique_ptr<Packets> owned = packets.take();
    if (media_ != Media::kAudio) session_.set_window(owned->window());
    Collector c{make_frames(media_, from_av(session_.context()->pkt_timebase)),
                max_frames};
    // A streaming decoder is not flushed between batches: feed everything.
    for (const AVPacket* p : owned->packets()) {
      if (!session_.send(p, false, c.sink())) break;
    }
    return std::move(c.frames);
  }

  std::unique_ptr<Frames> flush() {
    Collector c{make_frames(media_, from_av(session_.context()->pkt_timebase)),
                -1};
    if (!flushed_) session_.flush(c.sink());
    flushed_ = true;
    return std::move(c.frames);
  }

  Media media() const { return media_; }
  std::string what() const { return name_ + ": the Decoder"; }

  std::atomic<std::thread::id> busy{};

 private:
  Media media_;
  std::string name_;
  DecodeSession session_;
  bool flushed_ = false;
};

Decoder::Decoder(const Codec& codec,
                 const std::optional<std::string>& filter_desc,
                 const DecodeConfig& config, std::string name)
    : impl_(std::make_unique<Impl>(
          codec, filter_desc, config,
          name.empty() ? codec.name() : std::move(name))) {}
Decoder::~Decoder() = default;
std::unique_ptr<Frames> Decoder::decode(Packets&& packets,
                                        std::optional<int64_t> max_frames) {
  BusyGuard busy(impl_->busy, impl_->what());
  const int64_t limit = frame_limit(max_frames, "max_frames");
  return impl_->decode(std::move(packets), limit);
}
std::unique_ptr<Frames> Decoder::flush() {
  BusyGuard busy(impl_->busy, impl_->what());
  return impl_->flush();
}
Media Decoder::media() const { return impl_->media(); }

std::unique_ptr<Frames> decode_packets(
    Packets&& packets, const std::optional<std::string>& filter_desc,
    const DecodeConfig& config, std::optional<int64_t> num_frames) {
  const int64_t limit = frame_limit(num_frames, "num_frames");
  const Codec codec = packets.require_codec();
  std::unique_ptr<Packets> owned = packets.take();
  const std::string& name = owned->src();
  DecodeSession session(codec, filter_desc, config, name);
  const Media media = owned->media();
  if (media != Media::kAudio) session.set_window(owned->window());
  const bool image = media == Media::kImage;
  Collector c{make_frames(image ? Media::kVideo : media, owned->time_base()),
              image ? 1 : limit};
  send_window(session, *owned, session.may_skip_frames(), c.sink());
  report_errors(session, *c.frames, name);
  c.frames->set_src(name);
  if (image) {
    if (c.frames->empty()) throw DecodeError(name + ": no image decoded");
    return c.frames->image(0);
  }
  return std::move(c.frames);
}

std::vector<std::unique_ptr<Frames>> sample_decode_video(
    Packets&& packets, const std::vector<int64_t>& indices,
    const std::optional<std::string>& filter_desc, const DecodeConfig& config) {
  const Codec codec = packets.require_codec();
  if (packets.media() != Media::kVideo)
    throw InvalidArgument("sample_decode_video needs video packets");
  if (indices.empty()) throw InvalidArgument("no frame index given");
  for (std::size_t i = 1; i < indices.size(); ++i) {
    if (indices[i] <= indices[i - 1]) {
      throw InvalidArgument(
          "frame indices must be sorted ascending without duplicates");
    }
  }
  std::unique_ptr<Packets> owned = packets.take();
  const std::string& name = owned->src();
  const AVRational tb = to_av(owned->time_base());
  const std::vector<AVPacket*>& pkts = owned->packets();
  const auto& window = owned->window();

  const bool timed =
      std::all_of(pkts.begin(), pkts.end(),
                  [](const AVPacket* p) { return p->pts != AV_NOPTS_VALUE; });
  if (!timed) {
    // Presentation times are known only after decoding: decode the window
    // and pick the frames.
    DecodeSession session(codec, filter_desc, config, name);
    session.set_window(window);
    auto all = make_frames(Media::kVideo, owned->time_base());
    Collector c{std::move(all), indices.back() + 1};
    for (const AVPacket* p : pkts) {
      if (!session.send(p, false, c.sink())) break;
    }
    session.flush(c.sink());
    c.frames->set_src(name);
    const auto n = static_cast<int64_t>(c.frames->num_av_frames());
    if (indices.front() < 0 || indices.back() >= n) {
      throw OutOfRange("frame indices must be in [0, " + std::to_string(n) +
                       "); got " +
                       std::to_string(indices.front() < 0 ? indices.front()
                                                          : indices.back()));
    }
    std::vector<std::unique_ptr<Frames>> out;
    out.reserve(indices.size());
    for (int64_t i : indices) out.push_back(c.frames->image(i));
    return out;
  }

  // The window's frames in presentation order.
  std::vector<int64_t> shown;
  for (const AVPacket* p : pkts) {
    if (!in_window(p->pts, tb, window) || p->pts == AV_NOPTS_VALUE) continue;
    shown.push_back(p->pts);
  }
  std::sort(shown.begin(), shown.end());
  if (indices.front() < 0 ||
      indices.back() >= static_cast<int64_t>(shown.size())) {
    throw OutOfRange(
        "frame indices must be in [0, " + std::to_string(shown.size()) +
        "); got " +
        std::to_string(indices.front() < 0 ? indices.front() : indices.back()));
  }
  std::unordered_map<int64_t, std::size_t> slot;  // pts -> result index
  for (std::size_t i = 0; i < indices.size(); ++i)
    slot[shown[static_cast<std::size_t>(indices[i])]] = i;

  // Splits at key frames. A split also decodes the next key frame and the
  // packets stored after it that show before it (open GOPs), since those
  // belong to this split's presentation span.
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < pkts.size(); ++i) {
    if (i == 0 || (pkts[i]->flags & AV_PKT_FLAG_KEY) != 0) starts.push_back(i);
  }
  std::vector<std::unique_ptr<Frames>> out(indices.size());
  std::size_t found = 0;
  for (std::size_t s = 0; s < starts.size() && found < indices.size(); ++s) {
    const std::size_t begin = starts[s];
    const std::size_t next =
        s + 1 < starts.size() ? starts[s + 1] : pkts.size();
    std::size_t end = next;
    if (next < pkts.size()) {
      const int64_t key_pts = pkts[next]->pts;
      end = next + 1;
      while (end < pkts.size() && pkts[end]->pts != AV_NOPTS_VALUE &&
             key_pts != AV_NOPTS_VALUE && pkts[end]->pts < key_pts &&
             (pkts[end]->flags & AV_PKT_FLAG_KEY) == 0) {
        ++end;
      }
    }
    // The wanted frames this split owns: stored in it, not leading strays
    // of the previous split, not the next key frame.
    const int64_t own_from = pkts[begin]->pts;
    std::set<int64_t> wanted;
    for (std::size_t i = begin; i < next; ++i) {
      const int64_t pts = pkts[i]->pts;
      if (pts == AV_NOPTS_VALUE || slot.count(pts) == 0) continue;
      if (s > 0 && own_from != AV_NOPTS_VALUE && pts < own_from) continue;
      if (out[slot[pts]] == nullptr) wanted.insert(pts);
    }
    if (s + 1 < starts.size()) {
      for (std::size_t i = next + 1; i < end; ++i) {
        const int64_t pts = pkts[i]->pts;
        if (slot.count(pts) != 0 && out[slot[pts]] == nullptr)
          wanted.insert(pts);
      }
    }
    if (wanted.empty()) continue;

    DecodeSession session(codec, std::nullopt, config, name);
    std::optional<Chain> chain;
    if (filter_desc && !filter_desc->empty())
      chain.emplace(*filter_desc, false, tb, name);
    FramePtr filtered = new_frame();
    std::size_t remaining = wanted.size();
    auto keep = [&](AVFrame* f, AVRational ftb) {
      auto frames = make_frames(Media::kImage, from_av(ftb));
      frames->set_src(name);
      FramePtr copy = new_frame();
      av_frame_move_ref(copy.get(), f);
      frames->push(copy.release());
      return frames;
    };
    DecodeSession::Sink sink = [&](AVFrame* f, AVRational) {
      if (wanted.count(f->pts) == 0) return true;
      const std::size_t at = slot[f->pts];
      wanted.erase(f->pts);
      if (chain) {
        chain->push(f);
        if (chain->pull(filtered.get()) == 0) {
          out[at] = keep(filtered.get(), chain->time_base());
          av_frame_unref(filtered.get());
        }
      } else {
        out[at] = keep(f, tb);
      }
      if (out[at] != nullptr) ++found;
      return --remaining > 0;
    };
    for (std::size_t i = begin; i < end && !session.stopped(); ++i) {
      const bool wanted_here = wanted.count(pkts[i]->pts) != 0;
      session.send(pkts[i], !wanted_here, sink);
    }
    session.flush(sink);
    if (remaining > 0 && session.errors().count() > 0) {
      throw DecodeError(name + ": frames could not be decoded; " +
                        session.errors().first());
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == nullptr) {
      throw DecodeError(name + ": frame " + std::to_string(indices[i]) +
                        " did not decode");
    }
  }
  return out;
}

}  // namespace media
}  // namespace feedline
