// SPDX-License-Identifier: Apache-2.0
//
// ZIP from its central directory: the end-of-central-directory record (and
// the zip64 one when a field overflows), then one record per member, then
// each member's local header for where its data starts. Deflated members are
// inflated in one call (libdeflate, about twice zlib's speed) into a buffer
// of their declared size, which bounds the work a zip bomb can cause. Every
// member read is checked against the CRC-32 of its central record.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <libdeflate.h>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/reader.h"
#include "io/rewriter.h"

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
  uint64_t size = 0;   // bytes of the central directory
  bool zip64 = false;  // the counts come from the zip64 end record
  uint64_t end = 0;    // where the (zip64) end record starts
  uint64_t eocd = 0;   // where the end record starts
};

Directory find_directory(const io::Reader& r) {
  if (r.size() < 22)
    r.fail(0, "not a ZIP archive (shorter than its end record)");
  // The end record is the last 22 bytes plus a comment of up to 65535. The
  // comment may hold the record's signature too: the record is the last
  // candidate whose comment ends the archive, else (bytes appended after
  // the comment) the last candidate.
  uint64_t lowest = r.size() > 22 + 65535 ? r.size() - 22 - 65535 : 0;
  r.pin(lowest, r.size() - lowest);
  uint64_t found = r.size();
  for (uint64_t at = r.size() - 22 + 1; at-- > lowest;) {
    if (r.u32(at) != kEocd) continue;
    if (found == r.size()) found = at;
    if (at + 22 + r.u16(at + 20) == r.size()) {
      found = at;
      break;
    }
  }
  if (found == r.size())
    r.fail(r.size(), "not a ZIP archive (no end of central directory)");
  const uint64_t at = found;
  Directory d{r.u16(at + 10), r.u32(at + 16), r.u32(at + 12), false, at, at};
  if (d.count == 0xFFFF || d.offset == 0xFFFFFFFF || d.size == 0xFFFFFFFF) {
    if (at < 20 || r.u32(at - 20) != kZip64Locator)
      r.fail(at, "zip64 locator missing");
    uint64_t z = r.u64(at - 20 + 8);
    if (r.u32(z) != kZip64Eocd) r.fail(z, "zip64 end record missing");
    // Its fixed 56 bytes end before the locator, as a writer lays them out.
    if (z > at - 20 || at - 20 - z < 56)
      r.fail(z, "the zip64 end record runs into its locator");
    d.count = r.u64(z + 32);
    d.size = r.u64(z + 40);
    d.offset = r.u64(z + 48);
    d.zip64 = true;
    d.end = z;
  }
  if (d.offset > d.end || d.size > d.end - d.offset) {
    r.fail(at, "the central directory (" + std::to_string(d.size) +
                   " bytes at " + std::to_string(d.offset) +
                   ") does not end before the end record");
  }
  return d;
}

// Where the 8-byte values of a record's zip64 extra field (the first one,
// in the `len` bytes of extra fields at `extra`) lie: one for each field
// whose 32-bit value is the 0xFFFFFFFF marker (`size`, `compressed`,
// `offset`), in that order; 0 for a field with no value there. `present`:
// the record has a zip64 field (in a local header, its data descriptor
// then gives 8-byte sizes).
struct Zip64Slots {
  uint64_t size = 0;
  uint64_t compressed = 0;
  uint64_t offset = 0;
  bool present = false;
};

Zip64Slots zip64_slots(const io::Reader& r, uint64_t extra, uint64_t len,
                       bool size, bool compressed, bool offset) {
  Zip64Slots s;
  const uint64_t end = extra + len;
  while (extra + 4 <= end) {
    const uint16_t id = r.u16(extra);
    const uint64_t field_end = extra + 4 + r.u16(extra + 2);
    if (field_end > end) r.fail(extra, "extra field overruns its record");
    if (id == 0x0001) {
      s.present = true;
      uint64_t at = extra + 4;
      for (auto [wanted, slot] :
           {std::pair{size, &s.size}, std::pair{compressed, &s.compressed},
            std::pair{offset, &s.offset}}) {
        if (!wanted) continue;
        if (at + 8 > field_end) r.fail(at, "zip64 extra field too short");
        *slot = at;
        at += 8;
      }
      break;
    }
    extra = field_end;
  }
  return s;
}

// The zip64 value slots of the central record at `at`.
Zip64Slots central_slots(const io::Reader& r, uint64_t at) {
  return zip64_slots(r, at + 46 + r.u16(at + 28), r.u16(at + 30),
                     r.u32(at + 24) == 0xFFFFFFFF, r.u32(at + 20) == 0xFFFFFFFF,
                     r.u32(at + 42) == 0xFFFFFFFF);
}

// The zip64 value slots of the local header at `local`, for its sizes.
Zip64Slots local_slots(const io::Reader& r, uint64_t local) {
  return zip64_slots(r, local + 30 + r.u16(local + 26), r.u16(local + 28),
                     r.u32(local + 22) == 0xFFFFFFFF,
                     r.u32(local + 18) == 0xFFFFFFFF, false);
}

struct FreeDecompressor {
  void operator()(libdeflate_decompressor* d) const {
    libdeflate_free_decompressor(d);
  }
};

// This thread's decompressor (about 10 KiB of tables), made on first use.
libdeflate_decompressor* decompressor() {
  thread_local std::unique_ptr<libdeflate_decompressor, FreeDecompressor> d;
  if (!d) {
    d.reset(libdeflate_alloc_decompressor());
    if (!d) throw std::bad_alloc();
  }
  return d.get();
}

// Throws unless `bytes` has the CRC-32 the central directory gives.
void check_crc(const io::Reader& r, const ZipEntry& e, const std::string& who,
               std::span<const uint8_t> bytes) {
  const uint32_t crc = libdeflate_crc32(0, bytes.data(), bytes.size());
  if (crc != e.crc32) {
    char found[64];
    std::snprintf(found, sizeof found, "0x%08x, the directory says 0x%08x", crc,
                  e.crc32);
    r.fail(e.data_offset, who + ": CRC-32 mismatch (the data has " + found +
                              "): the member is damaged");
  }
}

// Where a member's records start: its central one and its local header.
struct Place {
  uint64_t central = 0;
  uint64_t local = 0;
};

// The members of the archive `r` holds, listed from its directory `dir`,
// with where each one's records are (in `places`, when given) and their
// indices in the order their data lies (in `order`, when given).
std::vector<ZipEntry> parse_directory(const io::Reader& r, const Directory& dir,
                                      std::vector<Place>* places,
                                      std::vector<std::size_t>* order_out) {
  std::vector<ZipEntry> entries;
  // Each member's bytes, from its local header to the end of its data.
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  // The records are read to the directory's end (its byte size), not by
  // the end record's count, which old writers wrap at 65536 and which a
  // damaged archive may understate: members are not left out silently.
  const uint64_t dir_end = dir.offset + dir.size;
  r.pin(dir.offset, r.size() - dir.offset);  // and the end records
  uint64_t at = dir.offset;
  while (at < dir_end) {
    if (r.u32(at) != kCentral) r.fail(at, "bad central directory record");
    ZipEntry e;
    e.flags = r.u16(at + 8);
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
    const Zip64Slots z = central_slots(r, at);
    if (z.size != 0) e.size = r.u64(z.size);
    if (z.compressed != 0) e.compressed_size = r.u64(z.compressed);
    if (z.offset != 0) local = r.u64(z.offset);
    if (r.u32(local) != kLocal)
      r.fail(local, "bad local header of " + io::quoted(e.name));
    const uint64_t local_name_len = r.u16(local + 26);
    const auto local_name = r.bytes(local + 30, local_name_len);
    if (!std::equal(local_name.begin(), local_name.end(), raw.begin(),
                    raw.end())) {
      r.fail(local,
             "the local header of " + io::quoted(e.name) + " names " +
                 io::quoted(std::string(local_name.begin(), local_name.end())));
    }
    e.data_offset = local + 30 + local_name_len + r.u16(local + 28);
    if (!r.has(e.data_offset, e.compressed_size)) {
      r.fail(e.data_offset,
             "member " + io::quoted(e.name) + " overruns the archive");
    }
    spans.emplace_back(local, e.data_offset + e.compressed_size);
    if (places != nullptr) places->push_back({at, local});
    entries.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
    r.forget();  // the local header's bytes
  }
  if (at != dir_end) {
    r.fail(at, "the last central directory record overruns the directory");
  }
  const uint64_t declared = dir.zip64 ? dir.count : dir.count & 0xFFFF;
  const uint64_t listed = dir.zip64 ? entries.size() : entries.size() & 0xFFFF;
  if (listed != declared) {
    r.fail(dir.end,
           "the central directory holds " + std::to_string(entries.size()) +
               " records, the end record says " + std::to_string(dir.count));
  }
  // Members may not share bytes (one payload listed under many names
  // inflates without bound) or reach into the directory.
  std::vector<std::size_t> order(spans.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return spans[a].first < spans[b].first;
  });
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto& [begin, end] = spans[order[k]];
    const uint64_t limit =
        k + 1 < order.size() ? spans[order[k + 1]].first : dir.offset;
    if (end > limit) {
      r.fail(begin,
             "member " + io::quoted(entries[order[k]].name) +
                 (k + 1 < order.size()
                      ? " overlaps member " +
                            io::quoted(entries[order[k + 1]].name)
                      : std::string(" runs into the central directory")));
    }
  }
  if (order_out != nullptr) *order_out = std::move(order);
  return entries;
}

void set16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void set32(uint8_t* p, uint32_t v) {
  set16(p, v & 0xFFFF);
  set16(p + 2, v >> 16);
}

void set64(uint8_t* p, uint64_t v) {
  set32(p, static_cast<uint32_t>(v));
  set32(p + 4, static_cast<uint32_t>(v >> 32));
}

// Writes `v` into the 32-bit field at `field` of `out`, or, when the record
// has a zip64 slot for it (at `slot`; 0 for none, as no slot starts a
// record), into that slot, and the field keeps its 0xFFFFFFFF marker. A
// value a field cannot hold without a slot is refused: the record would
// have to grow.
void put_value(std::vector<uint8_t>& out, uint64_t field, uint64_t slot,
               uint64_t v, const std::string& where, const char* what) {
  if (slot != 0) {
    set64(out.data() + slot, v);
    return;
  }
  if (v >= 0xFFFFFFFF) {
    throw InvalidArgument(where + ": " + what + " of " + std::to_string(v) +
                          " would need a zip64 field its record has not got");
  }
  set32(out.data() + field, static_cast<uint32_t>(v));
}

// A slot's place in a copy of the input that starts at `base`.
uint64_t slot_in(uint64_t slot, uint64_t base) {
  return slot != 0 ? slot - base : 0;
}

// The bytes of member `e`'s data descriptor, which starts at `at` and must
// end by `limit` (the next member or the directory): an optional signature,
// then the CRC-32 and the two sizes the central record gives, of 8 bytes
// each when `wide` (the member's local header has a zip64 field).
uint64_t descriptor_size(const io::Reader& r, const ZipEntry& e, uint64_t at,
                         uint64_t limit, bool wide) {
  const uint64_t sig = r.has(at, 4) && r.u32(at) == 0x08074b50 ? 4 : 0;
  const uint64_t n = wide ? 20 : 12;
  bool same =
      at + sig + n <= limit && r.has(at, sig + n) && r.u32(at + sig) == e.crc32;
  if (same) {
    same = wide ? r.u64(at + sig + 4) == e.compressed_size &&
                      r.u64(at + sig + 12) == e.size
                : r.u32(at + sig + 4) == e.compressed_size &&
                      r.u32(at + sig + 8) == e.size;
  }
  if (!same) {
    r.fail(at, "the data descriptor of " + io::quoted(e.name) +
                   " does not follow its data with the central directory's "
                   "CRC-32 and sizes");
  }
  return sig + n;
}

}  // namespace

std::vector<ZipEntry> list_zip(std::span<const uint8_t> data,
                               std::string_view name) {
  io::Reader r(data, name);
  return parse_directory(r, find_directory(r), nullptr, nullptr);
}

std::vector<ZipEntry> list_zip(const FileReader& file) {
  io::Reader r(file, file.path());
  return parse_directory(r, find_directory(r), nullptr, nullptr);
}

namespace {

class ZipRewriter : public io::RewriterBase {
 public:
  // `input`: the Reader that parsed the archive, with the directory and
  // end records pinned.
  ZipRewriter(io::Reader&& input, std::string_view name, ByteSink sink,
              Directory dir, std::vector<ZipEntry> entries,
              std::vector<Place> places, std::vector<std::size_t> order)
      : RewriterBase(name, std::move(sink), std::move(order)),
        r_(std::move(input), this->name()),
        dir_(dir),
        entries_(std::move(entries)),
        places_(std::move(places)),
        moved_to_(entries_.size()),
        new_(entries_.size()) {}

  void replace(std::size_t index, std::span<const uint8_t> data) override {
    if (index < entries_.size() && (entries_[index].flags & 0x41) != 0) {
      throw InvalidArgument(name() + ": member " +
                            io::quoted(entries_[index].name) +
                            " is encrypted; it cannot be replaced");
    }
    const Step step = take(index);
    const ZipEntry& e = entries_[index];
    const uint64_t local = places_[index].local;
    const std::string who = name() + ": member " + io::quoted(e.name);
    // Everything that can be refused is checked before a byte is written.
    const Zip64Slots slots = local_slots(r_, local);
    const Zip64Slots central = central_slots(r_, places_[index].central);
    for (uint64_t slot :
         {slots.size, slots.compressed, central.size, central.compressed}) {
      if (slot == 0 && data.size() >= 0xFFFFFFFF) {
        throw InvalidArgument(who + ": new data of " +
                              std::to_string(data.size()) +
                              " bytes would need a zip64 field its records "
                              "have not got");
      }
    }
    uint64_t end = e.data_offset + e.compressed_size;
    if ((e.flags & 0x0008) != 0) {
      const uint64_t limit = step.rank + 1 < order().size()
                                 ? places_[order()[step.rank + 1]].local
                                 : dir_.offset;
      end += descriptor_size(r_, e, end, limit, slots.present);
    }
    copy_until(step.from, step.rank);
    moved_to_[index] = written();
    // The local header with the new data's method, CRC-32 and sizes (in
    // its zip64 field where it has one); a data descriptor after the data
    // is dropped (the header has its values now).
    const std::span<const uint8_t> header =
        r_.bytes(local, e.data_offset - local);
    std::vector<uint8_t> h(header.begin(), header.end());
    r_.forget();
    // No deflate options, no descriptor.
    set16(h.data() + 6, static_cast<uint32_t>(h[6] | (h[7] << 8)) & ~0x000Eu);
    set16(h.data() + 8, 0);  // stored
    const uint32_t crc = libdeflate_crc32(0, data.data(), data.size());
    set32(h.data() + 14, crc);
    put_value(h, 18, slot_in(slots.compressed, local), data.size(), who,
              "new data");
    put_value(h, 22, slot_in(slots.size, local), data.size(), who, "new data");
    emit(h);
    emit(data);
    pos_ = end;
    new_[index] = {true, crc, data.size()};
  }

  void finish() override {
    copy_until(close(), order().size());
    const uint64_t new_dir = written();
    // The directory and end records, with the offsets that moved and the
    // replaced members' values.
    const std::span<const uint8_t> input_tail =
        r_.bytes(dir_.offset, r_.size() - dir_.offset);
    std::vector<uint8_t> tail(input_tail.begin(), input_tail.end());
    const uint64_t base = dir_.offset;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const uint64_t c = places_[i].central - base;
      const Zip64Slots slots = central_slots(r_, places_[i].central);
      put_value(tail, c + 42, slot_in(slots.offset, base), moved_to_[i], name(),
                "a member's offset");
      const New& n = new_[i];
      if (!n.replaced) continue;
      const std::string who =
          name() + ": member " + io::quoted(entries_[i].name);
      set16(tail.data() + c + 8, entries_[i].flags & ~0x000Eu);
      set16(tail.data() + c + 10, 0);
      set32(tail.data() + c + 16, n.crc);
      put_value(tail, c + 20, slot_in(slots.compressed, base), n.size, who,
                "new data");
      put_value(tail, c + 24, slot_in(slots.size, base), n.size, who,
                "new data");
    }
    const uint64_t eocd = dir_.eocd - base;
    if (!dir_.zip64) {
      put_value(tail, eocd + 16, 0, new_dir, name(), "the directory's offset");
    } else {
      // The zip64 end record gives the directory's offset, its locator the
      // record's; the end record's field, unless it is the marker, follows.
      set64(tail.data() + (dir_.end - base) + 48, new_dir);
      set64(tail.data() + eocd - 20 + 8, new_dir + (dir_.end - base));
      if (r_.u32(dir_.eocd + 16) != 0xFFFFFFFF) {
        set32(tail.data() + eocd + 16,
              static_cast<uint32_t>(std::min<uint64_t>(new_dir, 0xFFFFFFFF)));
      }
    }
    emit(tail);
  }

 private:
  struct New {
    bool replaced = false;
    uint32_t crc = 0;
    uint64_t size = 0;
  };

  // Copies the input from where it stands up to the local header of the
  // member at place `to` of order() (or to the directory), which moves the
  // members at places [from, to) unchanged.
  void copy_until(std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to; ++k) {
      const std::size_t j = order()[k];
      moved_to_[j] = written() + (places_[j].local - pos_);
    }
    const uint64_t until =
        to < order().size() ? places_[order()[to]].local : dir_.offset;
    emit(r_, pos_, until);
    pos_ = until;
  }

  io::Reader r_;
  Directory dir_;
  std::vector<ZipEntry> entries_;
  std::vector<Place> places_;
  std::vector<uint64_t> moved_to_;  // each local header's new offset
  std::vector<New> new_;
  uint64_t pos_ = 0;  // the input copied so far
};

std::unique_ptr<ArchiveRewriter> make_zip_rewriter(io::Reader input,
                                                   std::string_view name,
                                                   ByteSink sink) {
  std::vector<Place> places;
  std::vector<std::size_t> order;
  const Directory dir = find_directory(input);
  std::vector<ZipEntry> entries = parse_directory(input, dir, &places, &order);
  return std::make_unique<ZipRewriter>(std::move(input), name, std::move(sink),
                                       dir, std::move(entries),
                                       std::move(places), std::move(order));
}

}  // namespace

std::unique_ptr<ArchiveRewriter> rewrite_zip(std::span<const uint8_t> data,
                                             std::string_view name,
                                             ByteSink sink) {
  return make_zip_rewriter(io::Reader(data, name), name, std::move(sink));
}

std::unique_ptr<ArchiveRewriter> rewrite_zip(const FileReader& file,
                                             ByteSink sink) {
  return make_zip_rewriter(io::Reader(file, file.path()), file.path(),
                           std::move(sink));
}

std::vector<uint8_t> replace_zip_members(
    std::span<const uint8_t> data, std::string_view name,
    std::vector<ArchiveReplacement> replacements) {
  return io::rewrite_to_vector(
      [&](ByteSink sink) { return rewrite_zip(data, name, std::move(sink)); },
      data.size(), std::move(replacements));
}

namespace {

// Member `e` from its (compressed) bytes `src`, which `holder` holds: a
// view of them when it is stored, else inflated; `r` names the input.
Buffer entry_from(const io::Reader& r, const ZipEntry& e, const Buffer& holder,
                  std::span<const uint8_t> src, uint64_t max_size) {
  const std::string who = "member " + io::quoted(e.name);
  if ((e.flags & 0x41) != 0) {  // bit 0: encrypted; bit 6: strong encryption
    r.fail(e.data_offset, who + " is encrypted (not supported)");
  }
  if (e.method == 0) {
    if (e.size != e.compressed_size)
      r.fail(e.data_offset, who + ": stored sizes disagree");
    check_crc(r, e, who, src);
    return Buffer::view(holder.owner(), const_cast<uint8_t*>(src.data()),
                        DType::kUint8, {static_cast<int64_t>(src.size())}, {},
                        holder.writable());
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
  // An empty member still goes through the decoder (its stream must be
  // valid), into a byte of its own rather than a null buffer.
  uint8_t empty = 0;
  uint8_t* dst = e.size > 0 ? out.data_as<uint8_t>() : &empty;
  std::size_t written = 0;
  switch (libdeflate_deflate_decompress_ex(
      decompressor(), src.data(), src.size(), dst,
      static_cast<std::size_t>(e.size), nullptr, &written)) {
    case LIBDEFLATE_SUCCESS:
      break;
    case LIBDEFLATE_INSUFFICIENT_SPACE:
      r.fail(e.data_offset, who + " inflates beyond its declared size");
    default:
      r.fail(e.data_offset,
             who + ": corrupt deflate data (damaged or cut short)");
  }
  if (written != e.size)
    r.fail(e.data_offset, who + " inflates to fewer bytes than declared");
  check_crc(r, e, who, {dst, static_cast<std::size_t>(e.size)});
  return out;
}

}  // namespace

Buffer read_zip_entry(const Buffer& archive, const ZipEntry& e,
                      std::string_view name, uint64_t max_size) {
  io::Reader r(std::span<const uint8_t>(archive.data_as<const uint8_t>(),
                                        archive.nbytes()),
               name);
  return entry_from(r, e, archive, r.bytes(e.data_offset, e.compressed_size),
                    max_size);
}

Buffer read_zip_entry(const FileReader& file, const ZipEntry& e,
                      uint64_t max_size) {
  io::Reader r(file, file.path());
  if (!r.has(e.data_offset, e.compressed_size)) {
    r.fail(e.data_offset,
           "member " + io::quoted(e.name) + " overruns the archive");
  }
  // Stored or not, no more than the limit is read into memory.
  if (e.compressed_size > max_size) {
    r.fail(e.data_offset, "member " + io::quoted(e.name) + " holds " +
                              std::to_string(e.compressed_size) +
                              " bytes, over the limit of " +
                              std::to_string(max_size));
  }
  const Buffer raw = file.read(e.data_offset, e.compressed_size);
  return entry_from(r, e, raw, raw.bytes(), max_size);
}

}  // namespace feedline
