// SPDX-License-Identifier: Apache-2.0

#include "media/jpeg_restart.h"

#include <algorithm>
#include <cstring>

#include <libdeflate.h>

namespace feedline::media {
namespace {

constexpr uint8_t kSof0 = 0xC0;
constexpr uint8_t kSof1 = 0xC1;
constexpr uint8_t kDht = 0xC4;
constexpr uint8_t kRst0 = 0xD0;
constexpr uint8_t kSoi = 0xD8;
constexpr uint8_t kEoi = 0xD9;
constexpr uint8_t kSos = 0xDA;
constexpr uint8_t kDri = 0xDD;
constexpr uint8_t kApp0 = 0xE0;
constexpr uint8_t kApp14 = 0xEE;
constexpr uint8_t kApp15 = 0xEF;
constexpr uint8_t kCom = 0xFE;

unsigned be16(const uint8_t* p) { return (unsigned{p[0]} << 8) | p[1]; }

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | p[3];
}

// Is the marker one a frame of another kind starts with (progressive,
// lossless, arithmetic-coded, hierarchical)?
bool other_frame(uint8_t m) {
  return m >= 0xC2 && m <= 0xCF && m != kDht && m != 0xC8 && m != 0xCC;
}

}  // namespace

bool parse_restart_layout(std::span<const uint8_t> data, RestartLayout* out) {
  RestartLayout l;
  const std::size_t n = data.size();
  if (n < 4 || data[0] != 0xFF || data[1] != kSoi) return false;
  l.keep.emplace_back(0, 2);
  std::size_t pos = 2;
  bool have_sof = false;
  bool have_index = false;
  int components = 0;
  int hmax = 1;
  int vmax = 1;
  // The header: length-prefixed segments up to and including SOS.
  while (true) {
    if (pos + 4 > n || data[pos] != 0xFF) return false;
    const uint8_t m = data[pos + 1];
    const std::size_t len = be16(&data[pos + 2]);
    if (len < 2 || pos + 2 + len > n) return false;
    const uint8_t* body = &data[pos + 4];
    const std::size_t body_len = len - 2;
    if (m == kSof0 || m == kSof1) {
      if (have_sof || body_len < 6 || body[0] != 8) return false;
      l.height = static_cast<int>(be16(body + 1));
      l.width = static_cast<int>(be16(body + 3));
      components = body[5];
      if (l.width == 0 || l.height == 0 || components < 1 || components > 4 ||
          body_len != 6 + 3 * static_cast<std::size_t>(components)) {
        return false;
      }
      for (int c = 0; c < components; ++c) {
        const int h = body[7 + 3 * c] >> 4;
        const int v = body[7 + 3 * c] & 15;
        if (h < 1 || h > 4 || v < 1 || v > 4) return false;
        hmax = std::max(hmax, h);
        vmax = std::max(vmax, v);
      }
      l.sof_at = pos;
      have_sof = true;
    } else if (other_frame(m)) {
      return false;
    } else if (m == kDri) {
      if (body_len != 2) return false;
      l.interval = static_cast<int>(be16(body));
    } else if (m == kApp15 && body_len == kRestartIndexPayload &&
               std::memcmp(body, kRestartIndexId, sizeof(kRestartIndexId)) ==
                   0) {
      if (body[sizeof(kRestartIndexId)] != kRestartIndexVersion) return false;
      l.crc_at = pos + 4 + sizeof(kRestartIndexId) + 1;
      l.stored_crc = be32(&data[l.crc_at]);
      have_index = true;
    } else if (m == kSos) {
      // One scan of every component, the whole spectrum: a baseline scan.
      const std::size_t spectral = 1 + 2 * static_cast<std::size_t>(components);
      if (!have_sof || body_len < 1 || body[0] != components ||
          body_len != spectral + 3 || body[spectral] != 0 ||
          body[spectral + 1] != 63 || body[spectral + 2] != 0) {
        return false;
      }
      l.keep.emplace_back(static_cast<uint32_t>(pos),
                          static_cast<uint32_t>(len + 2));
      pos += 2 + len;
      break;
    }
    const bool skip = (m > kApp0 && m < kApp14) || m == kApp15 || m == kCom;
    if (!skip) {
      l.keep.emplace_back(static_cast<uint32_t>(pos),
                          static_cast<uint32_t>(len + 2));
    }
    pos += 2 + len;
  }
  if (!have_index || l.interval <= 0) return false;
  l.scan_at = pos;
  // A scan of one component has one block to an MCU.
  l.mcu_w = components == 1 ? 8 : 8 * hmax;
  l.mcu_h = components == 1 ? 8 : 8 * vmax;
  l.mcus_per_row = (l.width + l.mcu_w - 1) / l.mcu_w;
  l.mcu_rows = (l.height + l.mcu_h - 1) / l.mcu_h;
  if (l.mcus_per_row % l.interval != 0) return false;
  l.intervals_per_row = l.mcus_per_row / l.interval;
  const std::size_t count =
      static_cast<std::size_t>(l.intervals_per_row) * l.mcu_rows;
  if (count > n) return false;  // every interval is at least one byte
  l.starts.reserve(count);
  l.starts.push_back(static_cast<uint32_t>(pos));
  // The scan: 0xFF is followed by 0x00 (a stuffed byte), RSTn or EOI.
  const uint8_t* base = data.data();
  while (true) {
    const void* ff = std::memchr(base + pos, 0xFF, n - pos);
    if (ff == nullptr) return false;
    pos = static_cast<std::size_t>(static_cast<const uint8_t*>(ff) - base);
    if (pos + 1 >= n) return false;
    const uint8_t m = data[pos + 1];
    if (m == 0x00) {
      pos += 2;
      continue;
    }
    if (m == kEoi) break;
    const std::size_t k = l.starts.size();
    if (m != kRst0 + (k - 1) % 8 || k >= count) return false;
    pos += 2;
    l.starts.push_back(static_cast<uint32_t>(pos));
  }
  if (l.starts.size() != count) return false;
  l.eoi_at = pos;
  *out = std::move(l);
  return true;
}

uint32_t restart_scan_crc(std::span<const uint8_t> data,
                          const RestartLayout& layout) {
  return static_cast<uint32_t>(libdeflate_crc32(
      0, data.data() + layout.scan_at, layout.eoi_at - layout.scan_at));
}

void cut_restart_layout(std::span<const uint8_t> data,
                        const RestartLayout& layout, int row0, int row1,
                        int col0, int col1, std::vector<uint8_t>* out) {
  out->clear();
  std::size_t sof_out = 0;
  for (const auto& [at, size] : layout.keep) {
    if (at == layout.sof_at) sof_out = out->size();
    out->insert(out->end(), data.data() + at, data.data() + at + size);
  }
  const int x0 = col0 * layout.interval * layout.mcu_w;
  const int x1 = std::min(layout.width, col1 * layout.interval * layout.mcu_w);
  const int y0 = row0 * layout.mcu_h;
  const int y1 = std::min(layout.height, row1 * layout.mcu_h);
  uint8_t* sof = out->data() + sof_out + 5;  // after marker, length, P
  sof[0] = static_cast<uint8_t>((y1 - y0) >> 8);
  sof[1] = static_cast<uint8_t>(y1 - y0);
  sof[2] = static_cast<uint8_t>((x1 - x0) >> 8);
  sof[3] = static_cast<uint8_t>(x1 - x0);
  unsigned marker = 0;
  const std::size_t last = layout.starts.size() - 1;
  for (int r = row0; r < row1; ++r) {
    for (int c = col0; c < col1; ++c) {
      const std::size_t i =
          static_cast<std::size_t>(r) * layout.intervals_per_row + c;
      // An interval ends at its RST marker, the last one at EOI.
      const std::size_t end =
          i == last ? layout.eoi_at : layout.starts[i + 1] - std::size_t{2};
      if (marker > 0) {
        out->push_back(0xFF);
        out->push_back(static_cast<uint8_t>(kRst0 + (marker - 1) % 8));
      }
      ++marker;
      out->insert(out->end(), data.data() + layout.starts[i],
                  data.data() + end);
    }
  }
  out->push_back(0xFF);
  out->push_back(kEoi);
}

}  // namespace feedline::media
