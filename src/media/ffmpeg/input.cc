// SPDX-License-Identifier: Apache-2.0

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "feedline/base/log.h"
#include "feedline/media/image.h"
#include "media/ffmpeg/ffmpeg.h"

namespace feedline::media::ffmpeg {

std::string av_error_text(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof(buf));
  return buf;
}

namespace {

// The first errors FFmpeg logged on this thread since clear_ffmpeg_error(),
// joined by "; ".
thread_local std::string t_errors;
thread_local int t_error_count = 0;
constexpr int kKeptErrors = 3;

// FFmpeg's messages (at or below its log level) go to feedline's log sink,
// which the Python layer routes to the `feedline` logger; its errors are
// also kept for the exception that may follow (ffmpeg_error()).
void forward_log(void* avcl, int level, const char* fmt, va_list args) {
  const bool shown = level <= av_log_get_level();
  const bool kept = level <= AV_LOG_ERROR && t_error_count < kKeptErrors;
  if (!shown && !kept) return;
  // One line, with the "[codec @ 0x...]" prefix or without.
  auto format = [&](va_list list, int prefix) {
    char line[1024];
    av_log_format_line2(avcl, level, fmt, list, line, sizeof(line), &prefix);
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
      text.pop_back();
    return text;
  };
  if (kept) {
    va_list copy;
    va_copy(copy, args);
    const std::string text = format(copy, 0);
    va_end(copy);
    if (!text.empty()) {
      t_errors += (t_error_count++ == 0 ? "" : "; ") + text;
    }
  }
  if (!shown) return;
  const std::string text = format(args, 1);
  if (text.empty()) return;
  const LogLevel to = level <= AV_LOG_ERROR     ? LogLevel::kError
                      : level <= AV_LOG_WARNING ? LogLevel::kWarning
                                                : LogLevel::kInfo;
  log(to, "ffmpeg: " + text);
}

}  // namespace

void clear_ffmpeg_error() {
  t_errors.clear();
  t_error_count = 0;
}

std::string ffmpeg_error() { return t_errors; }

void quiet_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    av_log_set_level(AV_LOG_QUIET);
    av_log_set_callback(&forward_log);
  });
}

BusyGuard::BusyGuard(std::atomic<std::thread::id>& owner,
                     std::string_view what) {
  const std::thread::id self = std::this_thread::get_id();
  std::thread::id idle{};
  if (owner.compare_exchange_strong(idle, self, std::memory_order_acquire)) {
    owner_ = &owner;
    return;
  }
  if (idle == self) return;  // a call nested in the same thread
  throw media::ObjectInUse(
      std::string(what) +
      " is in use by another thread (one object must not be used from two "
      "threads at once: give each thread its own)");
}

BusyGuard::~BusyGuard() {
  if (owner_ != nullptr)
    owner_->store(std::thread::id{}, std::memory_order_release);
}

FramePtr new_frame() {
  FramePtr f(av_frame_alloc());
  if (!f) throw std::bad_alloc();
  return f;
}

FramePtr resampler_padding(SwrContext* swr, int format, int rate, int channels,
                           int out_rate, int64_t missing) {
  const int64_t in_missing =
      av_rescale_rnd(missing, rate, out_rate, AV_ROUND_UP);
  const int64_t pad = swr_get_delay(swr, rate) + in_missing + 32;
  FramePtr silence = new_frame();
  silence->format = format;
  silence->sample_rate = rate;
  silence->nb_samples = static_cast<int>(std::min<int64_t>(pad, 1 << 20));
  av_channel_layout_default(&silence->ch_layout, channels);
  if (av_frame_get_buffer(silence.get(), 0) < 0) throw std::bad_alloc();
  av_samples_set_silence(silence->extended_data, 0, silence->nb_samples,
                         channels, static_cast<AVSampleFormat>(format));
  return silence;
}

PacketPtr new_packet() {
  PacketPtr p(av_packet_alloc());
  if (!p) throw std::bad_alloc();
  return p;
}

std::string pix_fmt_name(int format) {
  const char* n = av_get_pix_fmt_name(static_cast<AVPixelFormat>(format));
  return n != nullptr ? n : "none";
}

std::string sample_fmt_name(int format) {
  const char* n = av_get_sample_fmt_name(static_cast<AVSampleFormat>(format));
  return n != nullptr ? n : "none";
}

Options::Options(const std::map<std::string, std::string>& options) {
  for (const auto& [k, v] : options) {
    if (av_dict_set(&dict_, k.c_str(), v.c_str(), 0) < 0)
      throw std::bad_alloc();
  }
}

Options::~Options() { av_dict_free(&dict_); }

void Options::check_consumed(std::string_view name,
                             std::string_view what) const {
  if (av_dict_count(dict_) == 0) return;
  std::string left;
  const AVDictionaryEntry* e = nullptr;
  while ((e = av_dict_get(dict_, "", e, AV_DICT_IGNORE_SUFFIX)) != nullptr) {
    if (!left.empty()) left += ", ";
    left += e->key;
  }
  throw InvalidArgument(std::string(name) + ": " + std::string(what) +
                        " did not take these options: " + left);
}

namespace {

// Containers whose headers carry complete codec parameters: probing their
// streams by decoding (avformat_find_stream_info) adds nothing a decoder
// needs.
bool carries_codec_parameters(const AVFormatContext* fmt) {
  const std::string_view format = fmt->iformat->name;
  if (format != "mov,mp4,m4a,3gp,3g2,mj2" && format != "matroska,webm")
    return false;
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    const AVCodecParameters* p = fmt->streams[i]->codecpar;
    if (p->codec_type == AVMEDIA_TYPE_VIDEO) {
      if (p->codec_id == AV_CODEC_ID_NONE || p->width <= 0 || p->height <= 0)
        return false;
    } else if (p->codec_type == AVMEDIA_TYPE_AUDIO) {
      if (p->codec_id == AV_CODEC_ID_NONE || p->sample_rate <= 0 ||
          p->ch_layout.nb_channels <= 0)
        return false;
    }
  }
  return true;
}

}  // namespace

namespace {

// Demuxers that read other files or URLs named in their input (playlists,
// manifests, scripts), open devices or network streams, or turn text into
// "media": refused unless the caller names the format or sets
// DemuxConfig::allow_unsafe_formats.
bool unsafe_format(const AVInputFormat* format) {
  static const std::set<std::string, std::less<>> kUnsafe = {
      // Read other files or URLs.
      "hls", "applehttp", "dash", "concat", "imf", "vobsub", "sdp", "rtsp",
      "rtp", "sap", "avisynth", "vapoursynth",
      // Text, metadata or filter graphs rather than media.
      "tty", "bin", "xbin", "adf", "idf", "ffmetadata", "sbg", "data", "lavfi"};
  if (kUnsafe.count(std::string_view(format->name)) != 0) return true;
  // Capture devices, and demuxers that open their input themselves (but
  // image2, which reads one named file once its patterns are off).
  if (format->priv_class != nullptr &&
      AV_IS_INPUT_DEVICE(format->priv_class->category))
    return true;
  return (format->flags & AVFMT_NOFILE) != 0 &&
         std::string_view(format->name) != "image2";
}

// The io_open of a safe input: a demuxer may not open anything besides the
// input it was given.
int refuse_nested_open(AVFormatContext* /*s*/, AVIOContext** /*pb*/,
                       const char* url, int /*flags*/,
                       AVDictionary** /*options*/) {
  log(LogLevel::kWarning, std::string("ffmpeg: refused to open '") +
                              (url ? url : "") +
                              "' named inside a media input (see DemuxConfig::"
                              "allow_unsafe_formats)");
  return AVERROR(EPERM);
}

std::string option_or(const std::map<std::string, std::string>& options,
                      const std::string& key, const char* fallback) {
  auto it = options.find(key);
  return it != options.end() ? it->second : std::string(fallback);
}

}  // namespace

Input::Input(const media::Source& source, const media::DemuxConfig& config,
             std::string_view name)
    : data_(source.data), owner_(source.owner) {
  quiet_logging();
  clear_ffmpeg_error();
  // Throws DecodeError with FFmpeg's own account of what went wrong.
  auto fail = [&](const char* what, int rc) {
    const std::string detail = ffmpeg_error();
    ffmpeg::fail(name, detail.empty() ? what : what + (" (" + detail + ")"),
                 rc);
  };
  const AVInputFormat* forced = nullptr;
  if (!config.format.empty()) {
    forced = av_find_input_format(config.format.c_str());
    if (forced == nullptr) {
      throw InvalidArgument(std::string(name) + ": unknown input format '" +
                            config.format + "'");
    }
  }
  const bool in_memory = source.in_memory();
  if (in_memory && data_.empty())
    throw DecodeError(std::string(name) + ": empty input, not media");
  // Protocols the input (and, when allowed, what it names) may use: local
  // files only unless the caller's format options say otherwise.
  const std::string protocols =
      option_or(config.format_options, "protocol_whitelist", "file");
  std::map<std::string, std::string> opts = config.format_options;
  opts.erase("protocol_whitelist");  // applied here, to the input and below
  if (in_memory) {
    const int size = config.buffer_size > 0 ? config.buffer_size : 65536;
    auto* buffer = static_cast<uint8_t*>(av_malloc(static_cast<size_t>(size)));
    if (buffer == nullptr) throw std::bad_alloc();
    avio_.reset(avio_alloc_context(buffer, size, 0, this, &Input::read, nullptr,
                                   &Input::seek));
    if (!avio_) {
      av_free(buffer);
      throw std::bad_alloc();
    }
  } else if (forced == nullptr || (forced->flags & AVFMT_NOFILE) == 0) {
    open_url(source.url, protocols, &opts, name);
  }
  // Else a format the caller named opens its input itself (image2 with a
  // pattern, rtsp), within the protocols allowed.
  AVIOContext* pb = in_memory ? avio_.get() : file_.get();
  // The format is probed here rather than by avformat_open_input, so that
  // a refused demuxer never reads its header (an HLS playlist would open
  // the files it names there).
  const bool named = forced != nullptr;
  if (!named) {
    int rc = av_probe_input_buffer2(
        pb, &forced, in_memory ? "" : source.url.c_str(), nullptr, 0, 0);
    if (rc < 0) fail("not a media file FFmpeg can read", rc);
  }
  const bool allowed = named || config.allow_unsafe_formats;
  if (!allowed && unsafe_format(forced)) {
    throw UnsupportedFormat(
        std::string(name) + ": the " + forced->name +
        " format is not read by default (it reads other files or URLs, or "
        "is not media); name it with DemuxConfig::format or set "
        "allow_unsafe_formats to read it");
  }
  // image2 reads one file, not a numbered sequence or a glob.
  const bool no_pattern = !allowed &&
                          std::string_view(forced->name) == "image2" &&
                          opts.count("pattern_type") == 0;
  if (no_pattern) opts["pattern_type"] = "none";
  Options options(opts);
  AVFormatContext* fmt = avformat_alloc_context();
  if (fmt == nullptr) throw std::bad_alloc();
  if (pb != nullptr) {
    fmt->pb = pb;
    fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  }
  fmt->protocol_whitelist = av_strdup(protocols.c_str());
  if (!allowed) fmt->io_open = &refuse_nested_open;
  // On failure avformat_open_input frees the context itself.
  int rc = avformat_open_input(&fmt, in_memory ? "" : source.url.c_str(),
                               forced, options.get());
  if (rc < 0) fail("not a media file FFmpeg can read", rc);
  format_.reset(fmt);
  options.check_consumed(name, "the demuxer");
  const bool probe =
      config.find_stream_info.value_or(!carries_codec_parameters(fmt));
  if (probe) {
    // Probing decodes a frame: the pixel limit applies to it.
    std::vector<AVDictionary*> limits(fmt->nb_streams, nullptr);
    const std::string max = std::to_string(media::kDefaultMaxPixels);
    for (AVDictionary*& d : limits)
      av_dict_set(&d, "max_pixels", max.c_str(), 0);
    rc = avformat_find_stream_info(fmt, limits.data());
    for (AVDictionary*& d : limits) av_dict_free(&d);
    if (rc < 0) fail("cannot read the stream information", rc);
    stream_info_read_ = true;
  }
}

void Input::open_url(const std::string& url, const std::string& protocols,
                     std::map<std::string, std::string>* options,
                     std::string_view name) {
  if (url.find('\0') != std::string::npos) {
    // FFmpeg would open the path cut at the NUL: another file.
    throw InvalidArgument(std::string(name) +
                          ": a path must not contain a NUL character");
  }
  const char* protocol = avio_find_protocol_name(url.c_str());
  if (protocol != nullptr &&
      av_match_list(protocol, protocols.c_str(), ',') <= 0) {
    throw UnsupportedFormat(
        std::string(name) + ": the " + protocol +
        " protocol is not read by default (only " + protocols +
        "); list it in the format option protocol_whitelist to read it");
  }
  // The protocol takes its own options (an http timeout, say); the
  // demuxer gets the rest.
  AVDictionary* opts = nullptr;
  for (const auto& [k, v] : *options)
    av_dict_set(&opts, k.c_str(), v.c_str(), 0);
  av_dict_set(&opts, "protocol_whitelist", protocols.c_str(), 0);
  AVIOContext* pb = nullptr;
  const int rc = avio_open2(&pb, url.c_str(), AVIO_FLAG_READ, nullptr, &opts);
  for (auto it = options->begin(); it != options->end();) {
    if (av_dict_get(opts, it->first.c_str(), nullptr, 0) == nullptr)
      it = options->erase(it);
    else
      ++it;
  }
  av_dict_free(&opts);
  if (rc < 0) {
    if (rc == AVERROR(ENOENT) || rc == AVERROR(EACCES) ||
        rc == AVERROR(EISDIR)) {
      throw IoError(std::string(name) +
                    ": cannot open the input: " + av_error_text(rc));
    }
    fail(name, "cannot open the input", rc);
  }
  file_.reset(pb);
}

Input::~Input() = default;

int Input::read(void* opaque, uint8_t* buf, int size) {
  auto* self = static_cast<Input*>(opaque);
  const auto left = static_cast<int64_t>(self->data_.size()) - self->pos_;
  if (left <= 0) return AVERROR_EOF;
  const int n = static_cast<int>(std::min<int64_t>(left, size));
  std::memcpy(buf, self->data_.data() + self->pos_,
              static_cast<std::size_t>(n));
  self->pos_ += n;
  return n;
}

int64_t Input::seek(void* opaque, int64_t offset, int whence) {
  auto* self = static_cast<Input*>(opaque);
  const auto size = static_cast<int64_t>(self->data_.size());
  if ((whence & AVSEEK_SIZE) != 0) return size;
  int64_t base = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET:
      base = 0;
      break;
    case SEEK_CUR:
      base = self->pos_;
      break;
    case SEEK_END:
      base = size;
      break;
    default:
      return AVERROR(EINVAL);
  }
  if (offset > size || offset < -size) return AVERROR(EINVAL);
  const int64_t to = base + offset;
  if (to < 0 || to > size) return AVERROR(EINVAL);
  self->pos_ = to;
  return to;
}

CodecPtr open_decoder(const AVCodecParameters* params, AVRational time_base,
                      const media::DecodeConfig& config,
                      std::string_view name) {
  const AVCodec* codec = nullptr;
  if (!config.decoder.empty()) {
    codec = avcodec_find_decoder_by_name(config.decoder.c_str());
    if (codec == nullptr) {
      throw InvalidArgument(std::string(name) + ": no decoder named '" +
                            config.decoder + "'");
    }
  } else {
    codec = avcodec_find_decoder(params->codec_id);
    if (codec == nullptr) {
      const char* id = avcodec_get_name(params->codec_id);
      throw DecodeError(std::string(name) + ": no decoder for the codec '" +
                        (id != nullptr ? id : "unknown") + "' in this FFmpeg");
    }
  }
  CodecPtr ctx(avcodec_alloc_context3(codec));
  if (!ctx) throw std::bad_alloc();
  int rc = avcodec_parameters_to_context(ctx.get(), params);
  if (rc < 0) fail(name, "bad codec parameters", rc);
  ctx->pkt_timebase = time_base;
  std::map<std::string, std::string> opts = config.decoder_options;
  // The pixel limit, from the codec parameters before any frame is
  // allocated, and in the decoder (FFmpeg's max_pixels) for every frame.
  int64_t max_pixels = media::kDefaultMaxPixels;
  if (auto it = opts.find("max_pixels"); it != opts.end()) {
    char* end = nullptr;
    max_pixels = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0' || max_pixels <= 0) {
      throw InvalidArgument(std::string(name) +
                            ": the decoder option max_pixels must be a "
                            "positive integer, got '" +
                            it->second + "'");
    }
  } else {
    opts["max_pixels"] = std::to_string(max_pixels);
  }
  if (params->codec_type == AVMEDIA_TYPE_VIDEO &&
      int64_t{params->width} * params->height > max_pixels) {
    throw DecodeError(
        std::string(name) + ": a frame of " + std::to_string(params->width) +
        " x " + std::to_string(params->height) +
        " pixels exceeds the limit of " + std::to_string(max_pixels) +
        " pixels (the decoder option max_pixels)");
  }
  if (opts.find("threads") == opts.end())
    opts["threads"] =
        std::to_string(config.threads == media::DecodeConfig::kAutoThreads
                           ? 1
                           : std::max(0, config.threads));
  Options options(opts);
  rc = avcodec_open2(ctx.get(), codec, options.get());
  if (rc < 0)
    fail(name, std::string("cannot open the ") + codec->name + " decoder", rc);
  options.check_consumed(name, std::string("the ") + codec->name + " decoder");
  return ctx;
}

}  // namespace feedline::media::ffmpeg
