// SPDX-License-Identifier: Apache-2.0
//
// TAR: 512-byte headers, each followed by its data padded to 512 bytes, and
// a zero block at the end. A member's name is ustar's prefix + "/" + name,
// or the name a preceding GNU 'L' record or pax 'x' record ("path=") gives;
// a pax "size=" record overrides the size of the next member (files over
// 8 GiB). Names are kept as the archive's bytes.
//
// Where Python's tarfile would stop or refuse, this parser raises instead of
// ending early, so a member is never lost without an error: every numeric
// field tarfile reads must parse (octal, or GNU base-256) and every header's
// checksum must match (unsigned or, as some old tars wrote it, signed). The
// archive ends at a zero block, or where the input ends exactly after a
// member's padding (tarfile accepts both); a header cut short, a member's
// data or padding cut short, and a long-name or pax header with no member
// after it are errors.
//
// replace_tar_members() gives members new data and changes nothing else:
// only a replaced member's size field, checksum, data and padding differ
// from the input.

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/reader.h"
#include "io/rewriter.h"

namespace feedline {
namespace {

constexpr uint64_t kBlock = 512;

std::string field(std::span<const uint8_t> b, std::size_t at, std::size_t len) {
  std::size_t n = 0;
  while (n < len && b[at + n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(&b[at]), n);
}

bool is_space(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

// A numeric header field as tarfile reads it: 0x80 then big-endian base-256
// (GNU), 0xFF then a negative base-256 number, or octal digits up to the
// first NUL with blanks around them (empty reads as 0). Anything else is a
// damaged header. A negative value is refused unless `signed_ok`.
int64_t number(std::span<const uint8_t> b, std::size_t at, std::size_t len,
               const char* what, const io::Reader& r, uint64_t header,
               bool signed_ok = true) {
  auto bad = [&](const std::string& why) {
    r.fail(header + at,
           std::string("bad tar header: ") + what + " field " + why);
  };
  const uint8_t first = b[at];
  if (first == 0x80 || first == 0xFF) {
    if (first == 0xFF && !signed_ok) bad("is negative");
    uint64_t v = 0;
    for (std::size_t i = 1; i < len; ++i) {
      const uint8_t byte = first == 0xFF ? ~b[at + i] & 0xFF : b[at + i];
      if (v >> 55) bad("overflows");
      v = (v << 8) | byte;
    }
    // 0xFF: two's complement over the field, so -(v + 1).
    return first == 0xFF ? -static_cast<int64_t>(v) - 1
                         : static_cast<int64_t>(v);
  }
  std::size_t end = 0;
  while (end < len && b[at + end] != 0) ++end;
  std::size_t i = 0;
  while (i < end && is_space(b[at + i])) ++i;
  while (end > i && is_space(b[at + end - 1])) --end;
  uint64_t v = 0;
  for (; i < end; ++i) {
    const uint8_t c = b[at + i];
    if (c < '0' || c > '7') bad("is not an octal number");
    if (v >> 60) bad("overflows");
    v = v * 8 + (c - '0');
  }
  return static_cast<int64_t>(v);
}

// Sizes below this fit ustar's 11 octal digits.
constexpr uint64_t kMaxOctalSize = uint64_t{1} << 33;
// The most bytes a long name or a pax header may hold: their data is read
// into memory (a real one holds a few hundred).
constexpr uint64_t kMaxMetaSize = uint64_t{16} << 20;

uint64_t padded_size(uint64_t size) {
  return (size + kBlock - 1) / kBlock * kBlock;
}

// Writes `v` as `len - 1` zero-padded octal digits and a NUL.
void write_octal(uint8_t* at, std::size_t len, uint64_t v) {
  for (std::size_t i = len - 1; i-- > 0; v /= 8)
    at[i] = static_cast<uint8_t>('0' + v % 8);
  at[len - 1] = 0;
}

bool all_zero(std::span<const uint8_t> b) {
  for (uint8_t c : b) {
    if (c != 0) return false;
  }
  return true;
}

// Verifies the checksum and that every numeric field tarfile reads parses;
// returns the member's size.
uint64_t check_header(std::span<const uint8_t> h, const io::Reader& r,
                      uint64_t at) {
  const int64_t stored = number(h, 148, 8, "checksum", r, at);
  int64_t sum = 0;
  int64_t signed_sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    const uint8_t c = (i >= 148 && i < 156) ? ' ' : h[i];
    sum += c;
    signed_sum += static_cast<int8_t>(c);
  }
  if (stored != sum && stored != signed_sum) {
    r.fail(at, "bad tar header checksum (the header says " +
                   std::to_string(stored) + ", its bytes sum to " +
                   std::to_string(sum) + ")");
  }
  number(h, 100, 8, "mode", r, at);
  number(h, 108, 8, "uid", r, at);
  number(h, 116, 8, "gid", r, at);
  number(h, 136, 12, "mtime", r, at);
  number(h, 329, 8, "devmajor", r, at);
  number(h, 337, 8, "devminor", r, at);
  return static_cast<uint64_t>(
      number(h, 124, 12, "size", r, at, /*signed_ok=*/false));
}

struct Pending {
  std::string name;  // from a GNU 'L' or pax "path" record
  uint64_t size = 0;
  bool has_size = false;
  bool sparse = false;  // pax GNU.sparse.* records: a layout not supported
  uint64_t header = 0;  // where the 'L' or 'x' header was
  bool any = false;
};

// Applies the "path" and "size" records of a pax header.
void read_pax(std::span<const uint8_t> data, const io::Reader& r,
              uint64_t where, Pending* next) {
  std::size_t i = 0;
  while (i < data.size()) {
    std::size_t len = 0;
    std::size_t j = i;
    while (j < data.size() && data[j] >= '0' && data[j] <= '9') {
      len = len * 10 + (data[j] - '0');
      if (len > data.size()) r.fail(where, "pax record overruns its header");
      ++j;
    }
    // "<len> <key>=<value>\n": the length covers its own digits, the space
    // and the newline.
    if (len < j - i + 2 || i + len > data.size() || j >= data.size() ||
        data[j] != ' ' || data[i + len - 1] != '\n') {
      r.fail(where, "malformed pax record");
    }
    std::string record(reinterpret_cast<const char*>(&data[j + 1]),
                       i + len - j - 2);
    std::size_t eq = record.find('=');
    if (eq != std::string::npos) {
      std::string key = record.substr(0, eq);
      std::string value = record.substr(eq + 1);
      if (key == "path") next->name = value;
      if (key.rfind("GNU.sparse.", 0) == 0) next->sparse = true;
      if (key == "size") {
        uint64_t v = 0;
        for (char c : value) {
          if (c < '0' || c > '9' || (v >> 59))
            r.fail(where, "malformed pax size");
          v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        next->size = v;
        next->has_size = true;
      }
    }
    i += len;
  }
}

// The members of the tar archive `r` reads, one header at a time.
std::vector<TarMember> list_members(const io::Reader& r) {
  if (r.size() == 0) r.fail(0, "empty input: not a tar archive");
  std::vector<TarMember> members;
  Pending next;
  uint64_t at = 0;
  while (at < r.size()) {
    if (!r.has(at, kBlock)) {
      // A partial block of zeros after the last member loses nothing.
      if (at > 0 && all_zero(r.bytes(at, r.size() - at))) break;
      r.fail(at, "truncated tar header: " + std::to_string(r.size() - at) +
                     " of its 512 bytes");
    }
    std::span<const uint8_t> h = r.bytes(at, kBlock);
    if (all_zero(h)) break;
    uint64_t size = check_header(h, r, at);
    char type = static_cast<char>(h[156]);
    // 'X': Solaris' name for a pax header. A pending pax size is that of
    // the next member, not of a header between them (pax, global pax, GNU
    // long name or link), whose own size field holds.
    const bool pax = type == 'x' || type == 'X';
    const bool meta = pax || type == 'g' || type == 'L' || type == 'K';
    if (next.has_size && !meta) size = next.size;
    // Links, devices, directories and FIFOs have no data, whatever their
    // size field says (POSIX; tarfile reads the next header right after).
    if (type >= '1' && type <= '6') size = 0;
    const uint64_t body = at + kBlock;
    if (!r.has(body, size)) {
      r.fail(body, "member data overruns the archive (" + std::to_string(size) +
                       " bytes at byte " + std::to_string(body) +
                       ", the input has " + std::to_string(r.size()) + ")");
    }
    // Only a long name's and a pax header's data are read (not a member's).
    const bool read = type == 'L' || pax;
    if (read && size > kMaxMetaSize) {
      r.fail(at, std::string(pax ? "pax" : "long-name") + " header of " +
                     std::to_string(size) + " bytes (over the limit of " +
                     std::to_string(kMaxMetaSize) + ")");
    }
    std::span<const uint8_t> content =
        read ? r.bytes(body, size) : std::span<const uint8_t>();
    if (type == 'L') {
      next.name = field(content, 0, content.size());
      next.header = at;
      next.any = true;
    } else if (pax) {
      read_pax(content, r, body, &next);
      next.header = at;
      next.any = true;
    } else if (type == 'K') {
      // A GNU long link name: it belongs to the next (link) header.
      next.header = at;
      next.any = true;
    } else if (type == 'g') {
      // Global pax records: nothing feedline uses.
    } else {
      std::string member = next.name;
      if (member.empty()) {
        member = field(h, 0, 100);
        if (std::string(reinterpret_cast<const char*>(&h[257]), 5) == "ustar") {
          std::string prefix = field(h, 345, 155);
          if (!prefix.empty()) member = prefix.append("/").append(member);
        }
      }
      // A V7 directory is a regular-file header whose name ends in '/'.
      const bool v7_dir =
          type == '\0' && !member.empty() && member.back() == '/';
      if (type == 'S' || ((type == '0' || type == '\0') && next.sparse)) {
        r.fail(at, "sparse member (" + std::to_string(size) +
                       " bytes): sparse files are not supported");
      }
      if ((type == '0' || type == '\0' || type == '7') && !v7_dir)
        members.push_back({std::move(member), body, size, at, next.has_size});
      next = Pending{};
    }
    const uint64_t padded = padded_size(size);
    if (padded < size) r.fail(body, "member size overflows");
    if (!r.has(body, padded)) {
      r.fail(body + size,
             "truncated: the member's padding to 512 bytes is "
             "cut short (the input ends at byte " +
                 std::to_string(r.size()) + ")");
    }
    at = body + padded;
    r.forget();
  }
  if (next.any) {
    r.fail(next.header,
           "a long-name or pax header with no member after it (the archive "
           "is cut short)");
  }
  return members;
}

}  // namespace

std::vector<TarMember> list_tar(std::span<const uint8_t> data,
                                std::string_view name) {
  return list_members(io::Reader(data, name));
}

std::vector<TarMember> list_tar(const FileReader& file) {
  return list_members(io::Reader(file, file.path()));
}

namespace {

class TarRewriter : public io::RewriterBase {
 public:
  TarRewriter(io::Reader&& input, std::string_view name, ByteSink sink,
              std::vector<TarMember> members)
      : RewriterBase(name, std::move(sink), identity(members.size())),
        r_(std::move(input), this->name()),
        members_(std::move(members)) {}

  void replace(std::size_t index, std::span<const uint8_t> data) override {
    if (index < members_.size()) {
      const TarMember& m = members_[index];
      if (m.pax_size) {
        throw InvalidArgument(name() + ": " + m.name +
                              ": its size is a pax record's; it cannot be "
                              "replaced");
      }
      if (data.size() >= kMaxOctalSize) {
        throw InvalidArgument(name() + ": " + m.name + ": new data of " +
                              std::to_string(data.size()) +
                              " bytes does not fit a tar size field");
      }
    }
    const TarMember& m = members_[take(index).rank];
    emit(r_, pos_, m.header);
    uint8_t h[kBlock];
    std::memcpy(h, r_.bytes(m.header, kBlock).data(), kBlock);
    r_.forget();
    write_octal(h + 124, 12, data.size());
    std::memset(h + 148, ' ', 8);
    uint64_t sum = 0;
    for (uint8_t c : h) sum += c;
    write_octal(h + 148, 7, sum);  // six digits, a NUL, then the space
    emit(h);
    emit(data);
    static constexpr uint8_t kZeros[kBlock] = {};
    emit(std::span(kZeros, padded_size(data.size()) - data.size()));
    pos_ = m.offset + padded_size(m.size);
  }

  void finish() override {
    close();
    emit(r_, pos_, r_.size());
  }

 private:
  static std::vector<std::size_t> identity(std::size_t n) {
    std::vector<std::size_t> v(n);
    std::iota(v.begin(), v.end(), 0);
    return v;
  }

  io::Reader r_;
  std::vector<TarMember> members_;
  uint64_t pos_ = 0;  // the input copied so far
};

}  // namespace

std::unique_ptr<ArchiveRewriter> rewrite_tar(std::span<const uint8_t> data,
                                             std::string_view name,
                                             ByteSink sink) {
  io::Reader r(data, name);
  std::vector<TarMember> members = list_members(r);
  return std::make_unique<TarRewriter>(std::move(r), name, std::move(sink),
                                       std::move(members));
}

std::unique_ptr<ArchiveRewriter> rewrite_tar(const FileReader& file,
                                             ByteSink sink) {
  io::Reader r(file, file.path());
  std::vector<TarMember> members = list_members(r);
  return std::make_unique<TarRewriter>(std::move(r), file.path(),
                                       std::move(sink), std::move(members));
}

std::vector<uint8_t> replace_tar_members(
    std::span<const uint8_t> data, std::string_view name,
    std::vector<ArchiveReplacement> replacements) {
  return io::rewrite_to_vector(
      [&](ByteSink sink) { return rewrite_tar(data, name, std::move(sink)); },
      data.size(), std::move(replacements));
}

}  // namespace feedline
