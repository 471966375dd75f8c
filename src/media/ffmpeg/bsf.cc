// SPDX-License-Identifier: Apache-2.0
//
// BitstreamFilter: FFmpeg's bit-stream filters over Packets.

#include <string>
#include <utility>
#include <vector>

#include "media/ffmpeg/ffmpeg.h"

extern "C" {
#include <libavcodec/bsf.h>
}

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

struct BitstreamFilter::Context {
  AVBSFContext* bsf = nullptr;
  ~Context() { av_bsf_free(&bsf); }
};

namespace {

// The names in a chain description "a=opt=v:opt2=w,b" (a, b).
std::vector<std::string> filter_names(const std::string& filters) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= filters.size()) {
    std::size_t end = filters.find(',', start);
    if (end == std::string::npos) end = filters.size();
    std::string part = filters.substr(start, end - start);
    names.push_back(part.substr(0, part.find('=')));
    start = end + 1;
  }
  return names;
}

[[noreturn]] void unknown_filter(const std::string& name,
                                 const std::string& filters) {
  throw InvalidArgument("unknown bit-stream filter \"" + name + "\" in \"" +
                        filters + "\"");
}

[[noreturn]] void wrong_codec(const std::string& name, const Codec& codec,
                              const AVBitStreamFilter* f) {
  std::string takes;
  for (const AVCodecID* c = f->codec_ids; *c != AV_CODEC_ID_NONE; ++c) {
    if (!takes.empty()) takes += ", ";
    takes += avcodec_get_name(*c);
  }
  throw InvalidArgument("bit-stream filter \"" + name + "\" does not take " +
                        codec.name() + " packets (it takes " + takes + ")");
}

// Throws InvalidArgument if a filter of the chain does not exist or does
// not take `codec`: FFmpeg's own error for both is a bare EINVAL.
void check_filters(const Codec& codec, const std::string& filters) {
  const AVCodecID id = codec.params()->codec_id;
  for (const std::string& name : filter_names(filters)) {
    const AVBitStreamFilter* f = av_bsf_get_by_name(name.c_str());
    if (f == nullptr) unknown_filter(name, filters);
    if (f->codec_ids == nullptr) continue;  // takes any codec
    bool takes = false;
    for (const AVCodecID* c = f->codec_ids; *c != AV_CODEC_ID_NONE; ++c)
      takes = takes || *c == id;
    if (!takes) wrong_codec(name, codec, f);
  }
}

}  // namespace

BitstreamFilter::BitstreamFilter(const Codec& codec, const std::string& filters)
    : ctx_(std::make_unique<Context>()),
      in_(codec),
      out_(codec),
      filters_(filters) {
  check_filters(codec, filters);
  clear_ffmpeg_error();
  int rc = av_bsf_list_parse_str(filters.c_str(), &ctx_->bsf);
  if (rc < 0 || ctx_->bsf == nullptr) {
    throw InvalidArgument("bit-stream filters \"" + filters +
                          "\": " + av_error_text(rc));
  }
  rc = avcodec_parameters_copy(ctx_->bsf->par_in, codec.params());
  if (rc < 0) throw std::bad_alloc();
  ctx_->bsf->time_base_in = to_av(codec.time_base());
  rc = av_bsf_init(ctx_->bsf);
  if (rc < 0) {
    std::string detail = ffmpeg_error();
    throw InvalidArgument(
        "bit-stream filters \"" + filters + "\" cannot take " + codec.name() +
        " packets: " + (detail.empty() ? av_error_text(rc) : detail));
  }
  out_ = Codec(codec.media(), ctx_->bsf->par_out,
               from_av(ctx_->bsf->time_base_out), codec.frame_rate());
}

BitstreamFilter::~BitstreamFilter() = default;

void BitstreamFilter::drain(Packets& out) {
  for (;;) {
    PacketPtr p = new_packet();
    const int rc = av_bsf_receive_packet(ctx_->bsf, p.get());
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
    if (rc < 0) fail(src_, "bit-stream filter \"" + filters_ + "\"", rc);
    out.push(p.release());
  }
}

std::unique_ptr<Packets> BitstreamFilter::filter(Packets&& packets,
                                                 bool flush) {
  BusyGuard busy(busy_, "BSF");
  packets.check();
  if (packets.media() != in_.media()) {
    throw InvalidArgument(std::string("BSF for ") + media_name(in_.media()) +
                          " packets got " + media_name(packets.media()) +
                          " packets of " + packets.src());
  }
  if (packets.codec() &&
      packets.codec()->params()->codec_id != in_.params()->codec_id) {
    throw InvalidArgument("BSF for " + in_.name() + " packets got " +
                          packets.codec()->name() + " packets of " +
                          packets.src());
  }
  if (!(packets.time_base() == in_.time_base())) {
    throw InvalidArgument(
        "BSF for packets in time base " + std::to_string(in_.time_base().num) +
        "/" + std::to_string(in_.time_base().den) + " got packets of " +
        packets.src() + " in " + std::to_string(packets.time_base().num) + "/" +
        std::to_string(packets.time_base().den));
  }
  std::unique_ptr<Packets> in = packets.take();
  src_ = in->src();
  stream_index_ = in->stream_index();
  window_ = in->window();
  had_codec_ = in->codec().has_value();
  views_ = views_ || in->views();
  auto out =
      make_packets(in_.media(), src_, stream_index_, out_.time_base(), window_,
                   had_codec_ ? std::optional(out_) : std::nullopt);
  out->set_views(views_);
  clear_ffmpeg_error();
  for (AVPacket* p : in->packets()) {
    // An empty packet would read as the end of the stream.
    if (p->size == 0 && p->side_data_elems == 0) continue;
    // The filter takes this reference; `p` is left blank (freed with `in`).
    const int rc = av_bsf_send_packet(ctx_->bsf, p);
    if (rc < 0) fail(src_, "bit-stream filter \"" + filters_ + "\"", rc);
    drain(*out);
  }
  if (flush) {
    const int rc = av_bsf_send_packet(ctx_->bsf, nullptr);
    if (rc < 0) fail(src_, "bit-stream filter \"" + filters_ + "\"", rc);
    drain(*out);
    av_bsf_flush(ctx_->bsf);
  }
  if (auto end = in->stream_end()) {
    out->set_stream_end(
        av_rescale_q(*end, to_av(in_.time_base()), to_av(out_.time_base())));
  }
  return out;
}

std::unique_ptr<Packets> BitstreamFilter::flush() {
  BusyGuard busy(busy_, "BSF");
  auto out =
      make_packets(in_.media(), src_, stream_index_, out_.time_base(), window_,
                   had_codec_ ? std::optional(out_) : std::nullopt);
  out->set_views(views_);
  clear_ffmpeg_error();
  const int rc = av_bsf_send_packet(ctx_->bsf, nullptr);
  if (rc < 0) fail(src_, "bit-stream filter \"" + filters_ + "\"", rc);
  drain(*out);
  av_bsf_flush(ctx_->bsf);
  return out;
}

std::unique_ptr<Packets> apply_bsf(Packets&& packets,
                                   const std::string& filters) {
  BitstreamFilter bsf(packets.require_codec(), filters);
  return bsf.filter(std::move(packets), true);
}

}  // namespace feedline::media
