// SPDX-License-Identifier: Apache-2.0
//
// WAV: a RIFF/WAVE file of chunks (4-byte id, 4-byte little-endian size,
// data padded to an even length). The "fmt " chunk gives the sample format
// (PCM integer or IEEE float, directly or through WAVE_FORMAT_EXTENSIBLE's
// sub-format); "data" holds interleaved frames. Other chunks (LIST, fact,
// ...) may come anywhere and are skipped.

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/reader.h"

namespace feedline {

WavInfo parse_wav(std::span<const uint8_t> data, std::string_view name) {
  io::Reader r(data, name);
  if (!r.tag(0, "RIFF") || !r.tag(8, "WAVE"))
    r.fail(0, "not a WAV file (no RIFF/WAVE header)");
  WavInfo info;
  bool have_fmt = false;
  uint64_t at = 12;
  while (r.has(at, 8)) {
    uint64_t size = r.u32(at + 4);
    uint64_t body = at + 8;
    if (r.tag(at, "fmt ")) {
      if (size < 16) r.fail(at, "fmt chunk shorter than 16 bytes");
      int format = r.u16(body);
      info.channels = r.u16(body + 2);
      const uint32_t rate = r.u32(body + 4);
      if (rate > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
        r.fail(body + 4, "sample rate " + std::to_string(rate) +
                             " Hz is out of range (at most 2^31 - 1)");
      }
      info.sample_rate = static_cast<int>(rate);
      info.block_align = r.u16(body + 12);
      info.bits_per_sample = r.u16(body + 14);
      if (format == 0xFFFE) {  // WAVE_FORMAT_EXTENSIBLE: the sub-format GUID
        if (size < 40) r.fail(at, "extensible fmt chunk shorter than 40 bytes");
        format = r.u16(body + 24);
      }
      if (format != 1 && format != 3) {
        r.fail(body, "unsupported WAV sample format " + std::to_string(format) +
                         " (PCM and IEEE float are)");
      }
      info.format = format;
      have_fmt = true;
    } else if (r.tag(at, "data")) {
      if (!have_fmt) r.fail(at, "data chunk before the fmt chunk");
      info.data_offset = body;
      // A streamed file may declare more (or 0xFFFFFFFF): keep what is there.
      info.data_size = std::min<uint64_t>(size, r.size() - body);
      break;
    }
    at = body + size + (size & 1);
  }
  if (!have_fmt) r.fail(12, "no fmt chunk");
  if (info.data_offset == 0) r.fail(at, "no data chunk");
  const int bits = info.bits_per_sample;
  const bool valid_bits =
      info.format == 1 ? (bits == 8 || bits == 16 || bits == 24 || bits == 32)
                       : (bits == 32 || bits == 64);
  if (!valid_bits)
    r.fail(12, "unsupported bits per sample: " + std::to_string(bits));
  if (info.channels <= 0 || info.sample_rate <= 0)
    r.fail(12, "zero channels or sample rate");
  if (info.block_align != info.channels * bits / 8) {
    r.fail(12, "block_align " + std::to_string(info.block_align) +
                   " does not match " + std::to_string(info.channels) +
                   " channels of " + std::to_string(bits) + " bits");
  }
  return info;
}

Buffer load_wav(const Buffer& bytes, std::string_view name,
                uint64_t start_frame, std::optional<uint64_t> num_frames) {
  std::span<const uint8_t> data = bytes.bytes();
  WavInfo info = parse_wav(data, name);
  const uint64_t total = info.num_frames();
  if (start_frame > total) {
    throw FormatError(std::string(name) + ": start frame " +
                      std::to_string(start_frame) + " is past the end (" +
                      std::to_string(total) + " frames)");
  }
  uint64_t frames =
      std::min(total - start_frame, num_frames.value_or(total - start_frame));
  const uint8_t* first =
      data.data() + info.data_offset + start_frame * info.block_align;
  std::vector<int64_t> shape = {static_cast<int64_t>(frames), info.channels};
  DType dtype = DType::kUint8;
  switch (info.bits_per_sample) {
    case 8:
      dtype = DType::kUint8;
      break;
    case 16:
      dtype = DType::kInt16;
      break;
    case 32:
      dtype = info.format == 3 ? DType::kFloat32 : DType::kInt32;
      break;
    case 64:
      dtype = DType::kFloat64;
      break;
    case 24: {
      // Widened to int32 (sample << 8), one copy.
      Buffer out = Buffer::allocate(DType::kInt32, shape);
      auto* dst = out.data_as<int32_t>();
      const uint64_t n = frames * static_cast<uint64_t>(info.channels);
      for (uint64_t i = 0; i < n; ++i) {
        const uint8_t* s = first + 3 * i;
        uint32_t v = (static_cast<uint32_t>(s[0]) << 8) |
                     (static_cast<uint32_t>(s[1]) << 16) |
                     (static_cast<uint32_t>(s[2]) << 24);
        std::memcpy(&dst[i], &v, 4);
      }
      return out;
    }
  }
  return Buffer::view(bytes.owner(), const_cast<uint8_t*>(first), dtype, shape,
                      {}, bytes.writable());
}

}  // namespace feedline
