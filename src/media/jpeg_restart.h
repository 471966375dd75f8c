// SPDX-License-Identifier: Apache-2.0
//
// Restart-indexed JPEGs: random access into a baseline scan.
//
// Baseline Huffman data has no random access: every MCU's DC coefficient
// is coded as a difference from the one before it, so reaching a row means
// entropy-decoding every row above it. A restart marker (RSTn) resets those
// predictors and aligns the stream to a byte, so the data between two
// markers (a restart interval) decodes on its own. prepare_jpeg() rewrites
// a JPEG losslessly (the same DCT coefficients) as one baseline scan with a
// restart marker every `interval` MCUs, `interval` dividing the MCUs of a
// row, and records a CRC-32 of the scan in an APP15 segment. Cropping such
// a file is then byte copying: the intervals a crop needs, with their
// markers renumbered, under a frame header of the smaller size, make a
// valid JPEG of just that part of the image.
//
// The CRC keeps the guarantee of the plain path (damage anywhere in the
// file is an error, whatever the crop), and goes further: it is checked on
// every decode, and a scan that no longer matches it is an error even where
// the damage still decodes. A file whose markers no longer match the
// index's structure (a truncated one, say) is decoded the plain way, which
// reports it.

#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace feedline::media {

// APP15 payload: this identifier (with its NUL), a version byte, then the
// CRC-32 (big-endian) of the bytes from the end of the SOS segment up to,
// not including, the EOI marker.
inline constexpr char kRestartIndexId[] = "feedline-rst";
inline constexpr uint8_t kRestartIndexVersion = 1;
inline constexpr std::size_t kRestartIndexPayload =
    sizeof(kRestartIndexId) + 1 + 4;

struct RestartLayout {
  int width = 0;  // the frame, in pixels
  int height = 0;
  int mcu_w = 0;  // one MCU, in pixels
  int mcu_h = 0;
  int mcus_per_row = 0;
  int mcu_rows = 0;
  int interval = 0;  // MCUs per restart interval
  int intervals_per_row = 0;
  // Header segments to keep in a cut (SOI up to the end of SOS, without
  // APP1-APP13, APP15 and COM segments), as [offset, offset + size).
  std::vector<std::pair<uint32_t, uint32_t>> keep;
  std::size_t sof_at = 0;        // offset of the SOF marker
  std::size_t crc_at = 0;        // offset of the CRC in the APP15 segment
  std::size_t scan_at = 0;       // first byte after the SOS segment
  std::size_t eoi_at = 0;        // offset of the EOI marker
  std::vector<uint32_t> starts;  // first byte of each interval
  uint32_t stored_crc = 0;
};

// Parses the markers of `data` and indexes its restart intervals. Returns
// false (the file is fine to decode the plain way) unless it is a
// single-scan baseline JPEG of 8-bit samples with an APP15 restart index,
// an interval dividing the MCUs of a row, and exactly the RST0..RST7
// markers such a scan has, in order, before EOI. Does not check the CRC.
bool parse_restart_layout(std::span<const uint8_t> data, RestartLayout* out);

// The CRC-32 the APP15 segment should hold for `data`.
uint32_t restart_scan_crc(std::span<const uint8_t> data,
                          const RestartLayout& layout);

// Replaces `out` with a JPEG of MCU rows [row0, row1) and restart intervals
// [col0, col1) of each of them. Its frame is the pixels those MCUs cover
// (clipped to the image's right and bottom edges).
void cut_restart_layout(std::span<const uint8_t> data,
                        const RestartLayout& layout, int row0, int row1,
                        int col0, int col1, std::vector<uint8_t>* out);

}  // namespace feedline::media
