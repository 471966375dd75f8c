// SPDX-License-Identifier: Apache-2.0

#include "feedline/ops/av_ops.h"

#include <memory>
#include <string>
#include <utility>

#include "feedline/base/error.h"
#include "feedline/io/file.h"
#include "feedline/pipeline/builder.h"

namespace feedline::ops {

ClipRequest ClipRequest::from_path(std::string path,
                                   std::optional<media::Window> window) {
  ClipRequest r;
  r.name = path;
  r.source = media::Source{std::move(path), {}, nullptr};
  r.window = std::move(window);
  return r;
}

EncodedFile EncodedFile::unnamed(Buffer bytes) {
  std::string name = "<" + std::to_string(bytes.nbytes()) + " bytes>";
  return {std::move(name), std::move(bytes), /*named=*/false};
}

std::optional<uint64_t> EncodedFile::sample_key(
    const media::AugmentSeed& seed) const {
  if (named || !seed.seeded) return std::nullopt;
  return media::sample_index_of_bytes(span());
}

ClipRequest ClipRequest::from_bytes(EncodedFile file,
                                    std::optional<media::Window> window) {
  ClipRequest r;
  r.name = std::move(file.name);
  r.source = memory_source(file.bytes);
  r.window = std::move(window);
  return r;
}

media::Source memory_source(const Buffer& bytes) {
  auto owner = std::make_shared<Buffer>(bytes);
  return media::Source{"", owner->bytes(), owner};
}

OpPtr load_audio(const media::AudioOptions& options) {
  return make_map_op<EncodedFile>([options](const EncodedFile& f) {
    return media::load_audio(f.span(), options, f.name);
  });
}

OpPtr load_video(const media::VideoOptions& options) {
  return make_map_op<EncodedFile>([options](const EncodedFile& f) {
    return media::load_video(memory_source(f.bytes), options, f.name);
  });
}

OpPtr load_video_clips(const media::VideoOptions& options) {
  return make_map_op<ClipRequest>([options](ClipRequest r) {
    media::VideoOptions o = options;
    o.window = r.window;
    // A clip past the end of its video fails (a counted failure of the
    // item) rather than being short: clips of one window length stack.
    o.whole_window = true;
    if (!r.source.in_memory()) {
      // Read, not mapped: a mapping of a file that another process
      // truncates faults (SIGBUS) when the decoder touches the lost pages.
      return media::load_video(memory_source(read_file(r.source.url)), o,
                               r.name);
    }
    return media::load_video(std::move(r.source), o, r.name);
  });
}

OpPtr demux(media::Media media, std::optional<media::Window> window,
            const media::DemuxConfig& config) {
  if (media == media::Media::kImage) window.reset();
  return make_map_op<EncodedFile>(
      [media, window, config](const EncodedFile& f) {
        media::Demuxer d(memory_source(f.bytes), config, f.name);
        return PacketsItem(d.demux(media, window));
      });
}

OpPtr decode_packets(const DecodeOptions& options) {
  if (options.num_frames && *options.num_frames <= 0) {
    throw InvalidArgument("decode_packets: num_frames must be > 0 (got " +
                          std::to_string(*options.num_frames) + ")");
  }
  return make_map_op<PacketsItem>([options](PacketsItem p) {
    std::optional<std::string> filter = options.filter_desc;
    if (options.default_filter) filter = default_filter_desc(*p);
    return FramesItem(media::decode_packets(
        std::move(*p), filter, options.config, options.num_frames));
  });
}

OpPtr convert_frames() {
  return make_map_op<FramesItem>(
      [](FramesItem f) { return media::convert_frames(std::move(*f)); });
}

OpPtr encode_image(const media::ImageEncodeOptions& options) {
  return make_map_op<Buffer>([options](const Buffer& image) {
    return EncodedFile::unnamed(media::encode_image(image, options));
  });
}

OpPtr encode_video(const VideoEncodeOptions& options) {
  if (options.format.empty())
    throw InvalidArgument("encode_video: a format (muxer) is needed");
  media::check_encode(options.format, options.config, options.encoder);
  return make_map_op<FramesItem>([options](FramesItem f) {
    return EncodedFile::unnamed(media::encode_video(
        std::move(*f), options.format, options.config, options.encoder,
        options.encoder_options, options.muxer_options));
  });
}

OpPtr encode_audio(const AudioEncodeOptions& options) {
  if (options.format.empty())
    throw InvalidArgument("encode_audio: a format (muxer) is needed");
  media::check_encode(options.format, options.config, options.encoder);
  return make_map_op<FramesItem>([options](FramesItem f) {
    return EncodedFile::unnamed(media::encode_audio(
        std::move(*f), options.format, options.config, options.encoder,
        options.encoder_options, options.muxer_options));
  });
}

std::string default_filter_desc(const media::Packets& p) {
  if (p.media() != media::Media::kAudio) return "format=pix_fmts=rgb24";
  std::string out;
  if (const auto& w = p.window()) {
    out = "atrim=start=" + std::to_string(w->start.to_double());
    if (w->end) out += ":end=" + std::to_string(w->end->to_double());
    out += ",";
  }
  return out + "aformat=sample_fmts=fltp";
}

}  // namespace feedline::ops
