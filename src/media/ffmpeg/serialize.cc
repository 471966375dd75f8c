// SPDX-License-Identifier: Apache-2.0
//
// Packets to and from one byte string (see serialize_packets in av.h).
//
// Layout, native byte order (the magic reads wrong in the other):
//   header  "FLPK" u32 version u64 total_size u8 media u8 flags
//           i32 stream_index, time base, src, window?, stream_end?, codec?
//   codec   media, time base, frame rate, AVCodecParameters field by field,
//           extradata
//   table   u64 count, then per packet: i64 pts dts duration pos, i32 flags,
//           u64 offset size, u32 side data count, then (i32 type, u32 size,
//           bytes) each
//   data    each payload at a multiple of 64 from the start, followed by
//           kPadding zero bytes; total_size is the end of the last padding.
//
// Frames (serialize_frames): "FLFR" u32 version u8 media, time base, src,
// u64 count, then per frame its fields, metadata and each plane's rows,
// packed.

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "media/ffmpeg/ffmpeg.h"

namespace feedline::media {

using namespace media::ffmpeg;  // NOLINT(google-build-using-namespace)

namespace {

constexpr char kMagic[4] = {'F', 'L', 'P', 'K'};
constexpr char kFramesMagic[4] = {'F', 'L', 'F', 'R'};
constexpr uint32_t kVersion = 1;
// Version 2 added src, so that frames decoded in one process still name
// their file in the errors of another.
constexpr uint32_t kFramesVersion = 2;
constexpr std::size_t kAlign = 64;
constexpr std::size_t kPadding = AV_INPUT_BUFFER_PADDING_SIZE;
static_assert(kPadding <= kAlign);
// Bounds that keep a damaged string from asking for absurd allocations.
constexpr uint32_t kMaxString = 1 << 20;
constexpr int kMaxChannels = 1024;

constexpr std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Writes to `base`, or only counts bytes when it is null.
class Writer {
 public:
  explicit Writer(uint8_t* base) : base_(base) {}
  void raw(const void* p, std::size_t n) {
    if (base_ != nullptr && n > 0) std::memcpy(base_ + pos_, p, n);
    pos_ += n;
  }
  template <typename T>
  void put(T v) {
    raw(&v, sizeof v);
  }
  void str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void rational(Rational r) {
    put<int32_t>(r.num);
    put<int32_t>(r.den);
  }
  void zeros(std::size_t n) {
    if (base_ != nullptr) std::memset(base_ + pos_, 0, n);
    pos_ += n;
  }
  std::size_t pos() const { return pos_; }

 private:
  uint8_t* base_;
  std::size_t pos_ = 0;
};

class Reader {
 public:
  // `kind`: what the string should be ("packets", "frames").
  Reader(std::span<const uint8_t> data, std::string_view name,
         std::string_view kind)
      : data_(data), name_(name), kind_(kind) {}
  [[noreturn]] void bad(const std::string& what) const {
    throw FormatError(std::string(name_) + ": not a feedline " +
                      std::string(kind_) + " string: " + what);
  }
  std::span<const uint8_t> take(std::size_t n, const char* what) {
    if (n > data_.size() - pos_) {
      bad(std::string(what) + " runs past the end (offset " +
          std::to_string(pos_) + ", " + std::to_string(n) + " bytes of " +
          std::to_string(data_.size()) + ")");
    }
    auto out = data_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  template <typename T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what).data(), sizeof v);
    return v;
  }
  std::string str(const char* what) {
    const auto n = get<uint32_t>(what);
    if (n > kMaxString) bad(std::string(what) + " is too long");
    auto b = take(n, what);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  // A time base (positive) or a time or rate (>= 0; a rate may be 0/0,
  // unknown).
  Rational rational(const char* what, bool positive) {
    Rational r{get<int32_t>(what), get<int32_t>(what)};
    const bool unknown = !positive && r.num == 0 && r.den == 0;
    if (!unknown && (r.den <= 0 || r.num < 0 || (positive && r.num == 0)))
      bad(std::string("bad ") + what);
    return r;
  }
  // An FFmpeg enumerator in [0, end): another value would be undefined.
  template <typename E>
  E enumerator(const char* what, int end) {
    const auto v = get<int32_t>(what);
    if (v < 0 || v >= end) bad(std::string("bad ") + what);
    return static_cast<E>(v);
  }
  bool flag(const char* what) {
    const auto v = get<uint8_t>(what);
    if (v > 1) bad(std::string("bad ") + what);
    return v == 1;
  }
  std::size_t pos() const { return pos_; }
  std::size_t size() const { return data_.size(); }
  const uint8_t* at(std::size_t offset) const { return data_.data() + offset; }

 private:
  std::span<const uint8_t> data_;
  std::string_view name_;
  std::string_view kind_;
  std::size_t pos_ = 0;
};

void write_codec(Writer& w, const Codec& codec) {
  const AVCodecParameters* p = codec.params();
  w.put<uint8_t>(static_cast<uint8_t>(codec.media()));
  w.rational(codec.time_base());
  w.rational(codec.frame_rate());
  w.put<int32_t>(p->codec_type);
  w.put<int32_t>(p->codec_id);
  w.put<uint32_t>(p->codec_tag);
  w.put<int32_t>(p->format);
  w.put<int64_t>(p->bit_rate);
  w.put<int32_t>(p->bits_per_coded_sample);
  w.put<int32_t>(p->bits_per_raw_sample);
  w.put<int32_t>(p->profile);
  w.put<int32_t>(p->level);
  w.put<int32_t>(p->width);
  w.put<int32_t>(p->height);
  w.put<int32_t>(p->sample_aspect_ratio.num);
  w.put<int32_t>(p->sample_aspect_ratio.den);
  w.put<int32_t>(p->field_order);
  w.put<int32_t>(p->color_range);
  w.put<int32_t>(p->color_primaries);
  w.put<int32_t>(p->color_trc);
  w.put<int32_t>(p->color_space);
  w.put<int32_t>(p->chroma_location);
  w.put<int32_t>(p->video_delay);
  // A native layout travels as its mask; any other as a channel count.
  const bool native = p->ch_layout.order == AV_CHANNEL_ORDER_NATIVE;
  w.put<uint8_t>(native ? 1 : 0);
  w.put<int32_t>(p->ch_layout.nb_channels);
  w.put<uint64_t>(native ? p->ch_layout.u.mask : 0);
  w.put<int32_t>(p->sample_rate);
  w.put<int32_t>(p->block_align);
  w.put<int32_t>(p->frame_size);
  w.put<int32_t>(p->initial_padding);
  w.put<int32_t>(p->trailing_padding);
  w.put<int32_t>(p->seek_preroll);
  w.put<uint32_t>(static_cast<uint32_t>(p->extradata_size));
  w.raw(p->extradata, static_cast<std::size_t>(p->extradata_size));
}

struct ParamsOwner {
  AVCodecParameters* p = avcodec_parameters_alloc();
  ParamsOwner() {
    if (p == nullptr) throw std::bad_alloc();
  }
  ~ParamsOwner() { avcodec_parameters_free(&p); }
  ParamsOwner(const ParamsOwner&) = delete;
  ParamsOwner& operator=(const ParamsOwner&) = delete;
};

Media read_media(Reader& r, const char* what) {
  const auto m = r.get<uint8_t>(what);
  if (m > static_cast<uint8_t>(Media::kImage))
    r.bad(std::string("bad ") + what);
  return static_cast<Media>(m);
}

Codec read_codec(Reader& r) {
  const Media media = read_media(r, "codec media");
  const Rational tb = r.rational("codec time base", true);
  const Rational fr = r.rational("codec frame rate", false);
  ParamsOwner owner;
  AVCodecParameters* p = owner.p;
  const auto type = r.get<int32_t>("codec type");
  const AVMediaType expected =
      media == Media::kAudio ? AVMEDIA_TYPE_AUDIO : AVMEDIA_TYPE_VIDEO;
  if (type != expected) r.bad("codec type does not match its media");
  p->codec_type = expected;
  const auto id = r.get<int32_t>("codec id");
  if (avcodec_descriptor_get(static_cast<AVCodecID>(id)) == nullptr)
    r.bad("unknown codec id " + std::to_string(id));
  p->codec_id = static_cast<AVCodecID>(id);
  p->codec_tag = r.get<uint32_t>("codec tag");
  p->format = r.get<int32_t>("format");
  p->bit_rate = r.get<int64_t>("bit rate");
  p->bits_per_coded_sample = r.get<int32_t>("bits per coded sample");
  p->bits_per_raw_sample = r.get<int32_t>("bits per raw sample");
  p->profile = r.get<int32_t>("profile");
  p->level = r.get<int32_t>("level");
  p->width = r.get<int32_t>("width");
  p->height = r.get<int32_t>("height");
  p->sample_aspect_ratio.num = r.get<int32_t>("aspect ratio");
  p->sample_aspect_ratio.den = r.get<int32_t>("aspect ratio");
  p->field_order = r.enumerator<AVFieldOrder>("field order", AV_FIELD_BT + 1);
  p->color_range = r.enumerator<AVColorRange>("colour range", AVCOL_RANGE_NB);
  p->color_primaries =
      r.enumerator<AVColorPrimaries>("colour primaries", AVCOL_PRI_NB);
  p->color_trc =
      r.enumerator<AVColorTransferCharacteristic>("colour trc", AVCOL_TRC_NB);
  p->color_space = r.enumerator<AVColorSpace>("colour space", AVCOL_SPC_NB);
  p->chroma_location =
      r.enumerator<AVChromaLocation>("chroma location", AVCHROMA_LOC_NB);
  p->video_delay = r.get<int32_t>("video delay");
  const bool native = r.flag("channel order");
  const auto channels = r.get<int32_t>("channels");
  const auto mask = r.get<uint64_t>("channel mask");
  if (p->width < 0 || p->height < 0 || p->format < -1 || channels < 0 ||
      channels > kMaxChannels) {
    r.bad("bad codec parameters");
  }
  av_channel_layout_uninit(&p->ch_layout);
  if (native) {
    if (av_channel_layout_from_mask(&p->ch_layout, mask) < 0 ||
        p->ch_layout.nb_channels != channels) {
      r.bad("bad channel mask");
    }
  } else {
    p->ch_layout.order = AV_CHANNEL_ORDER_UNSPEC;
    p->ch_layout.nb_channels = channels;
  }
  p->sample_rate = r.get<int32_t>("sample rate");
  p->block_align = r.get<int32_t>("block align");
  p->frame_size = r.get<int32_t>("frame size");
  p->initial_padding = r.get<int32_t>("initial padding");
  p->trailing_padding = r.get<int32_t>("trailing padding");
  p->seek_preroll = r.get<int32_t>("seek preroll");
  const auto n = r.get<uint32_t>("extradata size");
  if (n > kMaxString) r.bad("extradata is too long");
  auto extra = r.take(n, "extradata");
  if (n > 0) {
    p->extradata = static_cast<uint8_t*>(av_mallocz(n + kPadding));
    if (p->extradata == nullptr) throw std::bad_alloc();
    std::memcpy(p->extradata, extra.data(), n);
    p->extradata_size = static_cast<int>(n);
  }
  return Codec(media, p, tb, fr);
}

// The header and table; payload i goes to offsets[i].
void write_head(Writer& w, const Packets& packets, std::size_t total,
                const std::vector<std::size_t>& offsets) {
  w.raw(kMagic, sizeof kMagic);
  w.put<uint32_t>(kVersion);
  w.put<uint64_t>(total);
  w.put<uint8_t>(static_cast<uint8_t>(packets.media()));
  w.put<uint8_t>(0);  // flags, none yet
  w.put<int32_t>(packets.stream_index());
  w.rational(packets.time_base());
  w.str(packets.src());
  const auto& window = packets.window();
  w.put<uint8_t>(window ? 1 : 0);
  if (window) {
    w.rational(window->start);
    w.put<uint8_t>(window->end ? 1 : 0);
    if (window->end) w.rational(*window->end);
  }
  w.put<uint8_t>(packets.stream_end() ? 1 : 0);
  if (packets.stream_end()) w.put<int64_t>(*packets.stream_end());
  w.put<uint8_t>(packets.codec() ? 1 : 0);
  if (packets.codec()) write_codec(w, *packets.codec());
  const auto& list = packets.packets();
  w.put<uint64_t>(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const AVPacket* p = list[i];
    w.put<int64_t>(p->pts);
    w.put<int64_t>(p->dts);
    w.put<int64_t>(p->duration);
    w.put<int64_t>(p->pos);
    w.put<int32_t>(p->flags);
    w.put<uint64_t>(offsets.empty() ? 0 : offsets[i]);
    w.put<uint64_t>(static_cast<uint64_t>(p->size));
    w.put<uint32_t>(static_cast<uint32_t>(p->side_data_elems));
    for (int s = 0; s < p->side_data_elems; ++s) {
      const AVPacketSideData& sd = p->side_data[s];
      w.put<int32_t>(sd.type);
      w.put<uint32_t>(static_cast<uint32_t>(sd.size));
      w.raw(sd.data, sd.size);
    }
  }
}

struct Layout {
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
};

Layout layout_of(const Packets& packets) {
  Writer measure(nullptr);
  write_head(measure, packets, 0, {});
  Layout l;
  std::size_t at = align_up(measure.pos());
  for (const AVPacket* p : packets.packets()) {
    l.offsets.push_back(at);
    at = align_up(at + static_cast<std::size_t>(p->size) + kPadding);
  }
  l.total = at;
  return l;
}

// Keeps a blob's storage alive for the packets that point into it.
void release_blob(void* opaque, uint8_t* /*data*/) {
  delete static_cast<Buffer*>(opaque);
}

}  // namespace

std::size_t serialized_size(const Packets& packets) {
  packets.check();
  return layout_of(packets).total;
}

void serialize_packets_into(const Packets& packets, std::span<uint8_t> out) {
  packets.check();
  const Layout l = layout_of(packets);
  if (out.size() != l.total) {
    throw InvalidArgument("serialize_packets_into: " + packets.src() +
                          " takes " + std::to_string(l.total) +
                          " bytes, given " + std::to_string(out.size()));
  }
  Writer w(out.data());
  write_head(w, packets, l.total, l.offsets);
  const auto& list = packets.packets();
  for (std::size_t i = 0; i < list.size(); ++i) {
    w.zeros(l.offsets[i] - w.pos());
    w.raw(list[i]->data, static_cast<std::size_t>(list[i]->size));
  }
  w.zeros(l.total - w.pos());
}

Buffer serialize_packets(const Packets& packets) {
  const std::size_t n = serialized_size(packets);
  Buffer out = Buffer::allocate(DType::kUint8, {static_cast<int64_t>(n)});
  serialize_packets_into(packets,
                         std::span<uint8_t>(out.data_as<uint8_t>(), n));
  return out;
}

std::unique_ptr<Packets> deserialize_packets(const Buffer& blob, bool view,
                                             std::string_view name) {
  const std::string label = name.empty() ? "packets string" : std::string(name);
  Reader r(blob.bytes(), label, "packets");
  auto magic = r.take(sizeof kMagic, "magic");
  if (std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0)
    r.bad("wrong magic");
  const auto version = r.get<uint32_t>("version");
  if (version != kVersion) {
    r.bad("version " + std::to_string(version) + " (this feedline reads " +
          std::to_string(kVersion) + ")");
  }
  const auto total = r.get<uint64_t>("total size");
  if (total > r.size()) {
    r.bad("truncated: " + std::to_string(r.size()) + " of " +
          std::to_string(total) + " bytes");
  }
  const Media media = read_media(r, "media");
  r.get<uint8_t>("flags");
  const auto stream_index = r.get<int32_t>("stream index");
  const Rational tb = r.rational("time base", true);
  std::string src = r.str("src");
  std::optional<Window> window;
  if (r.flag("window")) {
    Window w{r.rational("window start", false), std::nullopt};
    if (r.flag("window end")) w.end = r.rational("window end", false);
    window = w;
  }
  std::optional<int64_t> stream_end;
  if (r.flag("stream end")) stream_end = r.get<int64_t>("stream end");
  std::optional<Codec> codec;
  if (r.flag("codec")) {
    codec = read_codec(r);
    if ((codec->media() == Media::kAudio) != (media == Media::kAudio))
      r.bad("codec media does not match the packets'");
  }
  auto out = make_packets(media, std::move(src), stream_index, tb, window,
                          std::move(codec));
  out->set_views(view);
  out->set_stream_end(stream_end);
  const auto count = r.get<uint64_t>("packet count");
  // Each record takes at least 52 bytes.
  if (count > (r.size() - r.pos()) / 52) r.bad("packet count is too large");
  std::size_t payload_end = 0;
  std::size_t first_offset = 0;
  for (uint64_t i = 0; i < count; ++i) {
    PacketPtr p = new_packet();
    const auto pts = r.get<int64_t>("pts");
    const auto dts = r.get<int64_t>("dts");
    const auto duration = r.get<int64_t>("duration");
    const auto pos = r.get<int64_t>("pos");
    const auto flags = r.get<int32_t>("flags");
    const auto offset = r.get<uint64_t>("payload offset");
    const auto size = r.get<uint64_t>("payload size");
    if (offset % kAlign != 0 || offset > total || size > total ||
        size >
            static_cast<uint64_t>(std::numeric_limits<int>::max()) - kPadding ||
        offset + size + kPadding > total) {
      r.bad("packet " + std::to_string(i) + " lies outside the string");
    }
    if (offset < payload_end) r.bad("packet payloads overlap");
    if (i == 0) first_offset = offset;
    payload_end = offset + size + kPadding;
    const uint8_t* data = r.at(offset);
    for (std::size_t k = 0; k < kPadding; ++k) {
      if (data[size + k] != 0) {
        r.bad("packet " + std::to_string(i) + "'s padding is not zero");
      }
    }
    const int n = static_cast<int>(size);
    if (view) {
      auto* keep = new Buffer(blob);
      AVBufferRef* ref =
          av_buffer_create(const_cast<uint8_t*>(data), size + kPadding,
                           &release_blob, keep, AV_BUFFER_FLAG_READONLY);
      if (ref == nullptr) {
        delete keep;
        throw std::bad_alloc();
      }
      p->buf = ref;
      p->data = ref->data;
      p->size = n;
    } else {
      if (av_new_packet(p.get(), n) < 0) throw std::bad_alloc();
      if (n > 0) std::memcpy(p->data, data, size);
    }
    // After av_new_packet, which resets them.
    p->pts = pts;
    p->dts = dts;
    p->duration = duration;
    p->pos = pos;
    p->flags = flags;
    p->stream_index = stream_index;
    p->time_base = to_av(tb);
    const auto sides = r.get<uint32_t>("side data count");
    if (sides > (r.size() - r.pos()) / 8) r.bad("side data count is too large");
    for (uint32_t s = 0; s < sides; ++s) {
      const auto type = r.get<int32_t>("side data type");
      const auto len = r.get<uint32_t>("side data size");
      if (type < 0 || type >= AV_PKT_DATA_NB) r.bad("bad side data type");
      auto bytes = r.take(len, "side data");
      uint8_t* dst = av_packet_new_side_data(
          p.get(), static_cast<AVPacketSideDataType>(type), len);
      if (dst == nullptr) throw std::bad_alloc();
      if (len > 0) std::memcpy(dst, bytes.data(), len);
    }
    out->push(p.release());
  }
  if (count > 0 && r.pos() > first_offset)
    r.bad("the packet table overlaps the payloads");
  return out;
}

// --- Frames ---

namespace {

constexpr int kMaxSide = 1 << 16;
constexpr int kMaxSamples = 1 << 26;

// The planes of `f`: where each starts, its rows and the bytes of a row.
struct PlaneShape {
  int rows = 0;
  std::size_t row_bytes = 0;
};

std::vector<PlaneShape> plane_shapes(Media media, int format, int width,
                                     int height, int samples, int channels) {
  std::vector<PlaneShape> out;
  if (media == Media::kAudio) {
    const auto f = static_cast<AVSampleFormat>(format);
    const int bytes = av_get_bytes_per_sample(f);
    const bool planar = av_sample_fmt_is_planar(f) != 0;
    const int planes = planar ? channels : 1;
    const std::size_t row = static_cast<std::size_t>(samples) *
                            static_cast<std::size_t>(bytes) *
                            static_cast<std::size_t>(planar ? 1 : channels);
    for (int p = 0; p < planes; ++p) out.push_back({1, row});
    return out;
  }
  const auto f = static_cast<AVPixelFormat>(format);
  const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(f);
  const int planes = av_pix_fmt_count_planes(f);
  for (int p = 0; p < planes; ++p) {
    const bool chroma =
        (p == 1 || p == 2) && (d->flags & AV_PIX_FMT_FLAG_RGB) == 0;
    const int rows = chroma ? AV_CEIL_RSHIFT(height, d->log2_chroma_h) : height;
    const int line = av_image_get_linesize(f, width, p);
    out.push_back({rows, static_cast<std::size_t>(std::max(0, line))});
  }
  return out;
}

bool software_video_format(int format) {
  const AVPixFmtDescriptor* d =
      av_pix_fmt_desc_get(static_cast<AVPixelFormat>(format));
  return d != nullptr && (d->flags & AV_PIX_FMT_FLAG_HWACCEL) == 0 &&
         (d->flags & AV_PIX_FMT_FLAG_BITSTREAM) == 0 &&
         (d->flags & AV_PIX_FMT_FLAG_PAL) == 0;
}

void write_frames(Writer& w, const Frames& frames) {
  w.raw(kFramesMagic, sizeof kFramesMagic);
  w.put<uint32_t>(kFramesVersion);
  w.put<uint8_t>(static_cast<uint8_t>(frames.media()));
  w.rational(frames.time_base());
  w.str(frames.src());
  w.put<uint64_t>(frames.frames().size());
  for (const AVFrame* f : frames.frames()) {
    const bool audio = frames.media() == Media::kAudio;
    w.put<int32_t>(f->format);
    w.put<int32_t>(f->width);
    w.put<int32_t>(f->height);
    w.put<int32_t>(f->nb_samples);
    w.put<int32_t>(f->sample_rate);
    const bool native = f->ch_layout.order == AV_CHANNEL_ORDER_NATIVE;
    w.put<uint8_t>(native ? 1 : 0);
    w.put<int32_t>(f->ch_layout.nb_channels);
    w.put<uint64_t>(native ? f->ch_layout.u.mask : 0);
    w.put<int64_t>(f->pts);
    w.put<int32_t>(f->flags);
    w.put<int32_t>(f->sample_aspect_ratio.num);
    w.put<int32_t>(f->sample_aspect_ratio.den);
    w.put<int32_t>(f->color_range);
    w.put<int32_t>(f->color_primaries);
    w.put<int32_t>(f->color_trc);
    w.put<int32_t>(f->colorspace);
    w.put<int32_t>(f->chroma_location);
    // Metadata (EXIF tags and the like).
    uint32_t entries = 0;
    const AVDictionaryEntry* e = nullptr;
    while ((e = av_dict_get(f->metadata, "", e, AV_DICT_IGNORE_SUFFIX)))
      ++entries;
    w.put<uint32_t>(entries);
    e = nullptr;
    while ((e = av_dict_get(f->metadata, "", e, AV_DICT_IGNORE_SUFFIX))) {
      w.str(e->key);
      w.str(e->value);
    }
    const auto shapes =
        plane_shapes(frames.media(), f->format, f->width, f->height,
                     f->nb_samples, f->ch_layout.nb_channels);
    for (std::size_t p = 0; p < shapes.size(); ++p) {
      const uint8_t* data = audio ? f->extended_data[p] : f->data[p];
      const int stride = audio ? 0 : f->linesize[p];
      for (int r = 0; r < shapes[p].rows; ++r)
        w.raw(data + static_cast<std::ptrdiff_t>(r) * stride,
              shapes[p].row_bytes);
    }
  }
}

}  // namespace

Buffer serialize_frames(const Frames& frames) {
  frames.check();
  for (const AVFrame* f : frames.frames()) {
    if (frames.media() != Media::kAudio && !software_video_format(f->format)) {
      throw InvalidArgument("serialize_frames: frames in " +
                            pix_fmt_name(f->format) +
                            " (hardware or paletted) do not serialize");
    }
  }
  Writer measure(nullptr);
  write_frames(measure, frames);
  Buffer out =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(measure.pos())});
  Writer w(out.data_as<uint8_t>());
  write_frames(w, frames);
  return out;
}

std::unique_ptr<Frames> deserialize_frames(const Buffer& blob,
                                           std::string_view name) {
  const std::string label = name.empty() ? "frames string" : std::string(name);
  Reader r(blob.bytes(), label, "frames");
  auto magic = r.take(sizeof kFramesMagic, "magic");
  if (std::memcmp(magic.data(), kFramesMagic, sizeof kFramesMagic) != 0)
    r.bad("wrong magic");
  const auto version = r.get<uint32_t>("version");
  if (version != kFramesVersion) {
    r.bad("version " + std::to_string(version) + " (this feedline reads " +
          std::to_string(kFramesVersion) + ")");
  }
  const Media media = read_media(r, "media");
  const Rational tb = r.rational("time base", true);
  std::string src = r.str("src");
  const auto count = r.get<uint64_t>("frame count");
  if (count > r.size() / 64 || (media == Media::kImage && count > 1))
    r.bad("frame count is too large");
  auto out = make_frames(media, tb);
  out->set_src(std::move(src));
  for (uint64_t i = 0; i < count; ++i) {
    FramePtr f = new_frame();
    f->format = r.get<int32_t>("format");
    f->width = r.get<int32_t>("width");
    f->height = r.get<int32_t>("height");
    f->nb_samples = r.get<int32_t>("samples");
    f->sample_rate = r.get<int32_t>("sample rate");
    const bool native = r.flag("channel order");
    const auto channels = r.get<int32_t>("channels");
    const auto mask = r.get<uint64_t>("channel mask");
    f->pts = r.get<int64_t>("pts");
    f->flags = r.get<int32_t>("flags");
    f->sample_aspect_ratio.num = r.get<int32_t>("aspect ratio");
    f->sample_aspect_ratio.den = r.get<int32_t>("aspect ratio");
    f->color_range = r.enumerator<AVColorRange>("colour range", AVCOL_RANGE_NB);
    f->color_primaries =
        r.enumerator<AVColorPrimaries>("colour primaries", AVCOL_PRI_NB);
    f->color_trc =
        r.enumerator<AVColorTransferCharacteristic>("colour trc", AVCOL_TRC_NB);
    f->colorspace = r.enumerator<AVColorSpace>("colour space", AVCOL_SPC_NB);
    f->chroma_location =
        r.enumerator<AVChromaLocation>("chroma location", AVCHROMA_LOC_NB);
    const auto entries = r.get<uint32_t>("metadata count");
    if (entries > (r.size() - r.pos()) / 8)
      r.bad("metadata count is too large");
    for (uint32_t k = 0; k < entries; ++k) {
      const std::string key = r.str("metadata key");
      const std::string value = r.str("metadata value");
      av_dict_set(&f->metadata, key.c_str(), value.c_str(), 0);
    }
    if (media == Media::kAudio) {
      const auto fmt = static_cast<AVSampleFormat>(f->format);
      // No picture size either: with one, FFmpeg allocates a picture.
      if (f->format < 0 || f->format >= AV_SAMPLE_FMT_NB ||
          av_get_bytes_per_sample(fmt) <= 0 || f->nb_samples <= 0 ||
          f->nb_samples > kMaxSamples || channels <= 0 || channels > 64 ||
          f->sample_rate <= 0 || f->width != 0 || f->height != 0) {
        r.bad("bad audio frame " + std::to_string(i));
      }
      if (native) {
        if (av_channel_layout_from_mask(&f->ch_layout, mask) < 0 ||
            f->ch_layout.nb_channels != channels) {
          r.bad("bad channel mask");
        }
      } else {
        f->ch_layout.order = AV_CHANNEL_ORDER_UNSPEC;
        f->ch_layout.nb_channels = channels;
      }
    } else if (!software_video_format(f->format) || f->width <= 0 ||
               f->height <= 0 || f->width > kMaxSide || f->height > kMaxSide) {
      r.bad("bad video frame " + std::to_string(i));
    }
    const auto shapes = plane_shapes(media, f->format, f->width, f->height,
                                     f->nb_samples, channels);
    std::size_t need = 0;
    for (const auto& p : shapes)
      need += p.row_bytes * static_cast<std::size_t>(p.rows);
    if (need > r.size() - r.pos())
      r.bad("frame " + std::to_string(i) + " is truncated");
    if (const int err = av_frame_get_buffer(f.get(), 0); err < 0) {
      if (err == AVERROR(ENOMEM)) throw std::bad_alloc();
      r.bad("frame " + std::to_string(i) + " has no buffer FFmpeg can make (" +
            av_error_text(err) + ")");
    }
    const bool audio = media == Media::kAudio;
    for (std::size_t p = 0; p < shapes.size(); ++p) {
      uint8_t* data = audio ? f->extended_data[p] : f->data[p];
      const int stride = audio ? 0 : f->linesize[p];
      for (int row = 0; row < shapes[p].rows; ++row) {
        auto bytes = r.take(shapes[p].row_bytes, "plane");
        std::memcpy(data + static_cast<std::ptrdiff_t>(row) * stride,
                    bytes.data(), bytes.size());
      }
    }
    out->push(f.release());
  }
  return out;
}

}  // namespace feedline::media
