// SPDX-License-Identifier: Apache-2.0
//
// The one place that includes FFmpeg headers: version checks, owners for
// every FFmpeg object feedline uses, reading from memory, and the
// FFmpeg-error-to-exception converter. FFmpeg 5.1 (Debian 12) is the oldest
// version supported: it introduced the AVChannelLayout API used here.

#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "feedline/base/error.h"

#if LIBAVCODEC_VERSION_MAJOR < 59
#error "feedline needs FFmpeg 5.1 or newer (libavcodec 59)"
#endif

namespace feedline::media::ffmpeg {

// FFmpeg 5.1 declares swr_alloc_set_opts2's layouts non-const (later
// versions take const): the one cast the version differences need.
inline AVChannelLayout* layout_arg(const AVChannelLayout* layout) {
  return const_cast<AVChannelLayout*>(layout);
}

// Throws DecodeError("<name>: <what>: <FFmpeg's message>").
[[noreturn]] inline void fail(std::string_view name, const std::string& what,
                              int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof(buf));
  throw DecodeError(std::string(name) + ": " + what + ": " + buf);
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
struct AvioDeleter {
  void operator()(AVIOContext* p) const {
    if (p != nullptr) av_freep(&p->buffer);
    avio_context_free(&p);
  }
};

using FormatPtr = std::unique_ptr<AVFormatContext, FormatDeleter>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using SwrPtr = std::unique_ptr<SwrContext, SwrDeleter>;
using AvioPtr = std::unique_ptr<AVIOContext, AvioDeleter>;

// An input opened on bytes in memory. The bytes must outlive it.
class MemoryInput {
 public:
  MemoryInput(std::span<const uint8_t> data, std::string_view name);
  AVFormatContext* format() const { return format_.get(); }

 private:
  static int read(void* opaque, uint8_t* buf, int size);
  static int64_t seek(void* opaque, int64_t offset, int whence);

  std::span<const uint8_t> data_;
  int64_t pos_ = 0;
  AvioPtr avio_;  // declared before format_: destroyed after it
  FormatPtr format_;
};

// Silences FFmpeg's logging once per process (feedline reports errors as
// exceptions; the Python layer can raise the level again).
void quiet_logging();

}  // namespace feedline::media::ffmpeg
