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
#include <optional>
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
  if (len == 0) return {};  // `b` may be empty, its data() null
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
  // The sum of the bytes with the checksum field read as spaces; in two
  // plain loops, which the compiler vectorises.
  int32_t sum = 0;
  int32_t signed_sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    sum += h[i];
    signed_sum += static_cast<int8_t>(h[i]);
  }
  for (std::size_t i = 148; i < 156; ++i) {
    sum += ' ' - h[i];
    signed_sum += ' ' - static_cast<int8_t>(h[i]);
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

// What follows a header block.
struct Step {
  enum Kind { kEnd, kMeta, kMember, kSkip };
  Kind kind = kEnd;
  uint64_t size = 0;  // bytes of data after the header, padding not counted
  TarMember member;   // for kMember
};

// The headers of one archive, parsed in order; shared by every way of
// reading one (bytes, a file, a stream). header() takes each header block,
// meta() the data of a long-name or pax header (kMeta), finish() the end of
// the archive. `r` names the archive in errors.
class HeaderParser {
 public:
  explicit HeaderParser(const io::Reader& r) : r_(r) {}

  Step header(std::span<const uint8_t> h, uint64_t at) {
    if (all_zero(h)) return {};
    uint64_t size = check_header(h, r_, at);
    const char type = static_cast<char>(h[156]);
    // 'X': Solaris' name for a pax header. A pending pax size is that of
    // the next member, not of a header between them (pax, global pax, GNU
    // long name or link), whose own size field holds.
    const bool pax = type == 'x' || type == 'X';
    const bool meta = pax || type == 'g' || type == 'L' || type == 'K';
    if (next_.has_size && !meta) size = next_.size;
    // Links, devices, directories and FIFOs have no data, whatever their
    // size field says (POSIX; tarfile reads the next header right after).
    if (type >= '1' && type <= '6') size = 0;
    if (type == 'L' || pax) {
      // Only a long name's and a pax header's data are read (not a
      // member's).
      if (size > kMaxMetaSize) {
        r_.fail(at, std::string(pax ? "pax" : "long-name") + " header of " +
                        std::to_string(size) + " bytes (over the limit of " +
                        std::to_string(kMaxMetaSize) + ")");
      }
      meta_pax_ = pax;
      meta_body_ = at + kBlock;
      next_.header = at;
      next_.any = true;
      return {Step::kMeta, size, {}};
    }
    if (type == 'K') {
      // A GNU long link name: it belongs to the next (link) header.
      next_.header = at;
      next_.any = true;
      return {Step::kSkip, size, {}};
    }
    if (type == 'g') return {Step::kSkip, size, {}};  // nothing used
    std::string member = next_.name;
    if (member.empty()) {
      member = field(h, 0, 100);
      if (std::string(reinterpret_cast<const char*>(&h[257]), 5) == "ustar") {
        std::string prefix = field(h, 345, 155);
        if (!prefix.empty()) member = prefix.append("/").append(member);
      }
    }
    // A V7 directory is a regular-file header whose name ends in '/'.
    const bool v7_dir = type == '\0' && !member.empty() && member.back() == '/';
    if (type == 'S' || ((type == '0' || type == '\0') && next_.sparse)) {
      r_.fail(at, "sparse member (" + std::to_string(size) +
                      " bytes): sparse files are not supported");
    }
    const bool has_size = next_.has_size;
    next_ = Pending{};
    if ((type == '0' || type == '\0' || type == '7') && !v7_dir) {
      return {Step::kMember, size,
              TarMember{std::move(member), at + kBlock, size, at, has_size}};
    }
    return {Step::kSkip, size, {}};
  }

  // The data of the kMeta header header() last returned.
  void meta(std::span<const uint8_t> content) {
    if (meta_pax_) {
      read_pax(content, r_, meta_body_, &next_);
    } else {
      next_.name = field(content, 0, content.size());
    }
  }

  // The archive ends: a long-name or pax header must not be the last.
  void finish() const {
    if (next_.any) {
      r_.fail(next_.header,
              "a long-name or pax header with no member after it (the "
              "archive is cut short)");
    }
  }

 private:
  const io::Reader& r_;
  Pending next_;
  bool meta_pax_ = false;
  uint64_t meta_body_ = 0;
};

// The errors of an archive that ends inside a header, a member's data or
// its padding; `end` is where the input ends.
[[noreturn]] void fail_header_cut(const io::Reader& r, uint64_t at,
                                  uint64_t end) {
  r.fail(at, "truncated tar header: " + std::to_string(end - at) +
                 " of its 512 bytes");
}
[[noreturn]] void fail_data_cut(const io::Reader& r, uint64_t body,
                                uint64_t size, uint64_t end) {
  r.fail(body, "member data overruns the archive (" + std::to_string(size) +
                   " bytes at byte " + std::to_string(body) +
                   ", the input has " + std::to_string(end) + ")");
}
[[noreturn]] void fail_padding_cut(const io::Reader& r, uint64_t body,
                                   uint64_t size, uint64_t end) {
  r.fail(body + size,
         "truncated: the member's padding to 512 bytes is cut short (the "
         "input ends at byte " +
             std::to_string(end) + ")");
}

// The members of the tar archive `r` reads, one header at a time.
std::vector<TarMember> list_members(const io::Reader& r) {
  if (r.size() == 0) r.fail(0, "empty input: not a tar archive");
  std::vector<TarMember> members;
  HeaderParser parser(r);
  uint64_t at = 0;
  while (at < r.size()) {
    if (!r.has(at, kBlock)) {
      // A partial block of zeros after the last member loses nothing.
      if (at > 0 && all_zero(r.bytes(at, r.size() - at))) break;
      fail_header_cut(r, at, r.size());
    }
    Step step = parser.header(r.bytes(at, kBlock), at);
    if (step.kind == Step::kEnd) break;
    const uint64_t body = at + kBlock;
    if (!r.has(body, step.size)) fail_data_cut(r, body, step.size, r.size());
    if (step.kind == Step::kMeta) parser.meta(r.bytes(body, step.size));
    if (step.kind == Step::kMember) members.push_back(std::move(step.member));
    const uint64_t padded = padded_size(step.size);
    if (padded < step.size) r.fail(body, "member size overflows");
    if (!r.has(body, padded)) fail_padding_cut(r, body, step.size, r.size());
    at = body + padded;
    r.forget();
  }
  parser.finish();
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

// --- TarStream -------------------------------------------------------------

struct TarStream::State {
  explicit State(std::string_view name) : names({}, name), parser(names) {}

  io::Reader names;  // holds no bytes: names the stream in errors
  HeaderParser parser;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kBuffer);
  std::size_t begin = 0;  // buffer[begin, end) is the stream at `pos`
  std::size_t end = 0;
  uint64_t pos = 0;
  bool ended = false;                // read() gave 0
  bool done = false;                 // the archive's end was reached
  bool failed = false;               // a step threw: the stream is unusable
  std::optional<TarMember> current;  // next() gave it, its data is unread

  // Small: data beyond it is read straight into the caller's memory (one
  // copy), while headers and small members still come several to a read.
  // 4 KiB read a file object's shards (members of 1-50 KiB) 10% faster
  // than 64 KiB did, which copied nearly every byte twice.
  static constexpr std::size_t kBuffer = 4 << 10;
};

TarStream::TarStream(ReadFn read, std::string name)
    : read_(std::move(read)),
      name_(std::move(name)),
      state_(std::make_unique<State>(name_)) {}

TarStream::~TarStream() = default;

std::size_t TarStream::take(uint8_t* dst, std::size_t n) {
  State& s = *state_;
  // One read of the stream into `to` (at most `n` bytes); 0 at its end.
  auto read = [&](uint8_t* to, std::size_t cap) -> std::size_t {
    if (s.ended) return 0;
    const std::size_t k = read_(to, cap);
    if (k > cap) {
      throw IoError(display_name(name_) + ": a read of " + std::to_string(cap) +
                    " bytes returned " + std::to_string(k));
    }
    if (k == 0) s.ended = true;
    return k;
  };
  std::size_t got = std::min(n, s.end - s.begin);
  if (dst != nullptr) std::memcpy(dst, s.buffer.data() + s.begin, got);
  s.begin += got;
  while (got < n) {
    std::size_t k = 0;
    if (dst != nullptr && n - got >= State::kBuffer) {
      // A large piece goes straight to `dst`, not through the buffer.
      k = read(dst + got, n - got);
    } else {
      s.begin = 0;
      s.end = read(s.buffer.data(), State::kBuffer);
      k = std::min(n - got, s.end);
      if (dst != nullptr) std::memcpy(dst + got, s.buffer.data(), k);
      s.begin = k;
    }
    if (k == 0) break;
    got += k;
  }
  s.pos += got;
  return got;
}

void TarStream::read_body(uint64_t body, uint64_t size, uint8_t* dst) {
  static_assert(sizeof(std::size_t) >= sizeof(uint64_t));
  const std::size_t k = take(dst, size);
  if (k < size) fail_data_cut(state_->names, body, size, body + k);
}

void TarStream::skip_padding(uint64_t body, uint64_t size) {
  const std::size_t pad = padded_size(size) - size;
  if (take(nullptr, pad) < pad)
    fail_padding_cut(state_->names, body, size, state_->pos);
}

void TarStream::check_usable() const {
  if (state_->failed) {
    throw InvalidArgument(display_name(name_) +
                          ": the stream stopped at an earlier error");
  }
}

std::optional<TarMember> TarStream::next() {
  check_usable();
  try {
    return next_step();
  } catch (...) {
    // Part of what the step needed may have been read: no later call can
    // know where the stream is.
    state_->failed = true;
    throw;
  }
}

std::optional<TarMember> TarStream::next_step() {
  State& s = *state_;
  if (s.current) {
    // The member's data was not read: skip it (and check it is there).
    const TarMember m = *s.current;
    s.current.reset();
    read_body(m.offset, m.size, nullptr);
    skip_padding(m.offset, m.size);
  }
  while (!s.done) {
    const uint64_t at = s.pos;
    uint8_t h[kBlock];
    const std::size_t got = take(h, kBlock);
    if (got < kBlock) {
      if (at == 0 && got == 0)
        s.names.fail(0, "empty input: not a tar archive");
      // A partial block of zeros after the last member loses nothing.
      if (at == 0 || !all_zero(std::span(h, got)))
        fail_header_cut(s.names, at, at + got);
      s.done = true;
      break;
    }
    Step step = s.parser.header(h, at);
    if (step.kind == Step::kEnd) {
      s.done = true;
      break;
    }
    const uint64_t body = at + kBlock;
    if (padded_size(step.size) < step.size)
      s.names.fail(body, "member size overflows");
    if (step.kind == Step::kMember) {
      s.current = std::move(step.member);
      return s.current;
    }
    if (step.kind == Step::kMeta) {
      // At most kMaxMetaSize: header() checked.
      std::vector<uint8_t> content(static_cast<std::size_t>(step.size));
      read_body(body, step.size, content.data());
      s.parser.meta(content);  // before the padding is read, as list_tar
    } else {
      read_body(body, step.size, nullptr);
    }
    skip_padding(body, step.size);
  }
  s.parser.finish();
  return std::nullopt;
}

void TarStream::read_data(std::span<uint8_t> dst) {
  check_usable();
  State& s = *state_;
  if (!s.current) {
    throw InvalidArgument(display_name(name_) +
                          ": read_data() without a member from next()");
  }
  const TarMember m = *s.current;
  if (dst.size() != m.size) {
    throw InvalidArgument(display_name(name_) + ": read_data() into " +
                          std::to_string(dst.size()) + " bytes; member " +
                          io::quoted(m.name) + " holds " +
                          std::to_string(m.size));
  }
  s.current.reset();
  try {
    read_body(m.offset, m.size, dst.data());
    skip_padding(m.offset, m.size);
  } catch (...) {
    s.failed = true;
    throw;
  }
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
