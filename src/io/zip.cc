// SPDX-License-Identifier: Apache-2.0
//
// ZIP from its central directory: the end-of-central-directory record (and
// the zip64 one when a field overflows), then one record per member, then
// each member's local header for where its data starts. Deflated members are
// inflated with zlib into a buffer of their declared size, which bounds the
// work a zip bomb can cause. Every member read is checked against the CRC-32
// of its central record.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <zlib.h>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/reader.h"

namespace feedline {
namespace {

constexpr uint32_t kEocd = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kZip64Eocd = 0x06064b50;
constexpr uint32_t kCentral = 0x02014b50;
constexpr uint32_t kLocal = 0x04034b50;

struct Directory {
  uint64_t count = 0;
  uint64_t offset = 0;
};

Directory find_directory(const io::Reader& r) {
  if (r.size() < 22)
    r.fail(0, "not a ZIP archive (shorter than its end record)");
  // The end record is the last 22 bytes plus a comment of up to 65535.
  uint64_t lowest = r.size() > 22 + 65535 ? r.size() - 22 - 65535 : 0;
  for (uint64_t at = r.size() - 22 + 1; at-- > lowest;) {
    if (r.u32(at) != kEocd) continue;
    Directory d{r.u16(at + 10), r.u32(at + 16)};
    if (d.count == 0xFFFF || d.offset == 0xFFFFFFFF) {
      if (at < 20 || r.u32(at - 20) != kZip64Locator)
        r.fail(at, "zip64 locator missing");
      uint64_t z = r.u64(at - 20 + 8);
      if (r.u32(z) != kZip64Eocd) r.fail(z, "zip64 end record missing");
      d.count = r.u64(z + 32);
      d.offset = r.u64(z + 48);
    }
    return d;
  }
  r.fail(r.size(), "not a ZIP archive (no end of central directory)");
}

// Reads the zip64 extra field of a central record: the 8-byte values of the
// fields that are 0xFFFFFFFF, in the order size, compressed size, offset.
void apply_zip64(const io::Reader& r, uint64_t extra, uint64_t extra_len,
                 ZipEntry* e, uint64_t* local) {
  uint64_t end = extra + extra_len;
  while (extra + 4 <= end) {
    uint16_t id = r.u16(extra);
    uint16_t len = r.u16(extra + 2);
    if (extra + 4 + len > end) r.fail(extra, "extra field overruns its record");
    if (id == 0x0001) {
      uint64_t at = extra + 4;
      auto take = [&](uint64_t* v) {
        if (*v != 0xFFFFFFFF) return;
        if (at + 8 > extra + 4 + len) r.fail(at, "zip64 extra field too short");
        *v = r.u64(at);
        at += 8;
      };
      take(&e->size);
      take(&e->compressed_size);
      take(local);
    }
    extra += 4 + len;
  }
}

// Throws unless `bytes` has the CRC-32 the central directory gives.
void check_crc(const io::Reader& r, const ZipEntry& e, const std::string& who,
               std::span<const uint8_t> bytes) {
  const uint32_t crc = static_cast<uint32_t>(
      crc32_z(crc32_z(0, nullptr, 0), bytes.data(), bytes.size()));
  if (crc != e.crc32) {
    char found[64];
    std::snprintf(found, sizeof found, "0x%08x, the directory says 0x%08x", crc,
                  e.crc32);
    r.fail(e.data_offset, who + ": CRC-32 mismatch (the data has " + found +
                              "): the member is damaged");
  }
}

}  // namespace

std::vector<ZipEntry> list_zip(std::span<const uint8_t> data,
                               std::string_view name) {
  io::Reader r(data, name);
  Directory dir = find_directory(r);
  std::vector<ZipEntry> entries;
  uint64_t at = dir.offset;
  for (uint64_t i = 0; i < dir.count; ++i) {
    if (r.u32(at) != kCentral) r.fail(at, "bad central directory record");
    ZipEntry e;
    e.method = r.u16(at + 10);
    e.crc32 = r.u32(at + 16);
    e.compressed_size = r.u32(at + 20);
    e.size = r.u32(at + 24);
    uint64_t name_len = r.u16(at + 28);
    uint64_t extra_len = r.u16(at + 30);
    uint64_t comment_len = r.u16(at + 32);
    uint64_t local = r.u32(at + 42);
    auto raw = r.bytes(at + 46, name_len);
    e.name.assign(raw.begin(), raw.end());
    apply_zip64(r, at + 46 + name_len, extra_len, &e, &local);
    if (r.u32(local) != kLocal)
      r.fail(local, "bad local header of " + io::quoted(e.name));
    e.data_offset = local + 30 + r.u16(local + 26) + r.u16(local + 28);
    if (!r.has(e.data_offset, e.compressed_size)) {
      r.fail(e.data_offset,
             "member " + io::quoted(e.name) + " overruns the archive");
    }
    entries.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return entries;
}

Buffer read_zip_entry(const Buffer& archive, const ZipEntry& e,
                      std::string_view name, uint64_t max_size) {
  io::Reader r(std::span<const uint8_t>(archive.data_as<const uint8_t>(),
                                        archive.nbytes()),
               name);
  std::span<const uint8_t> src = r.bytes(e.data_offset, e.compressed_size);
  const std::string who = "member " + io::quoted(e.name);
  if (e.method == 0) {
    if (e.size != e.compressed_size)
      r.fail(e.data_offset, who + ": stored sizes disagree");
    check_crc(r, e, who, src);
    return Buffer::view(archive.owner(), const_cast<uint8_t*>(src.data()),
                        DType::kUint8, {static_cast<int64_t>(src.size())}, {},
                        archive.writable());
  }
  if (e.method != 8) {
    r.fail(e.data_offset, who + ": compression method " +
                              std::to_string(e.method) +
                              " is not supported (stored and deflate are)");
  }
  if (e.size > max_size) {
    r.fail(e.data_offset, who + " inflates to " + std::to_string(e.size) +
                              " bytes, over the limit of " +
                              std::to_string(max_size));
  }
  Buffer out = Buffer::allocate(DType::kUint8, {static_cast<int64_t>(e.size)});
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
    throw Internal("zlib: inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  z.next_in = const_cast<Bytef*>(src.data());
  uint8_t* dst = out.data_as<uint8_t>();
  uint64_t in_left = src.size();
  uint64_t out_left = e.size;
  int rc = Z_OK;
  // zlib counts in uInt: feed and drain in chunks that fit.
  while (rc == Z_OK) {
    z.avail_in = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
    z.avail_out = static_cast<uInt>(std::min<uint64_t>(out_left, 1u << 30));
    z.next_out = dst + (e.size - out_left);
    uInt in_before = z.avail_in;
    uInt out_before = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    in_left -= in_before - z.avail_in;
    out_left -= out_before - z.avail_out;
    if (rc == Z_OK && out_left == 0) {
      // Full: anything more would exceed the declared size.
      uint8_t probe = 0;
      z.next_out = &probe;
      z.avail_out = 1;
      z.avail_in = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
      rc = inflate(&z, Z_NO_FLUSH);
      if (z.avail_out == 0)
        r.fail(e.data_offset, who + " inflates beyond its declared size");
    }
    if (rc == Z_BUF_ERROR && in_left == 0) break;
  }
  if (rc != Z_STREAM_END) {
    r.fail(e.data_offset, who + ": corrupt deflate data" +
                              (z.msg ? std::string(" (") + z.msg + ")" : ""));
  }
  if (out_left != 0)
    r.fail(e.data_offset, who + " inflates to fewer bytes than declared");
  check_crc(r, e, who, {dst, static_cast<std::size_t>(e.size)});
  return out;
}

}  // namespace feedline
