// SPDX-License-Identifier: Apache-2.0
//
// Parsers of the array, audio and archive formats that need no codec: NPY,
// ZIP (and so NPZ), WAV and TAR.
//
// They read the caller's bytes in place. Results are Buffers that view those
// bytes and keep them alive through the input Buffer's owner; a copy happens
// only when the data must change (inflating a deflated ZIP member, swapping
// big-endian NPY data, widening 24-bit WAV samples).
//
// Every read is bounds-checked. Malformed input (truncated headers, sizes
// that overrun, bogus dtypes, negative or overflowing shapes, a member that
// inflates beyond its declared size or beyond `max_size`) raises FormatError
// naming the input and the byte offset where the problem is; nothing is
// ever read out of bounds.
//
// Thread safety: every function may run concurrently; none keeps state.

#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/base/buffer.h"
#include "feedline/io/file.h"

namespace feedline {

// --- Rewriting archives ----------------------------------------------------

// Receives the bytes of an archive being written, in order, a piece at a
// time (a file, a vector).
using ByteSink = std::function<void(std::span<const uint8_t>)>;

// Writes a copy of an archive into a sink, member by member, with new data
// for the members given: everything else is copied as it is (see
// replace_tar_members and replace_zip_members for what changes). The input
// is parsed and checked when the rewriter is made; each replace() writes
// the archive up to the end of that member, finish() the rest. Nothing but
// the input and the member at hand is held, so an archive of any size is
// rewritten in the memory of its input; one read from a FileReader is
// rewritten without holding it (its headers are read as they are needed,
// the bytes between replaced members copied a MiB at a time).
//
// Members are given in the order their data lies in the archive, order():
// for tar the order of list_tar(), for ZIP that of ZipEntry::data_offset
// (the directory may list them in another). Throws InvalidArgument for an
// index out of range, given twice or out of that order, a member that
// cannot be replaced, or a call after finish(). After any exception the
// sink holds part of an archive: discard it. Not thread-safe.
class ArchiveRewriter {
 public:
  virtual ~ArchiveRewriter() = default;

  // The member indices, in the order their data lies in the archive.
  virtual const std::vector<std::size_t>& order() const = 0;
  // Writes the archive up to the end of member `index`, with `data` as its
  // new data.
  virtual void replace(std::size_t index, std::span<const uint8_t> data) = 0;
  // Writes the rest of the archive.
  virtual void finish() = 0;
};

// New data for member `index` of an archive.
struct ArchiveReplacement {
  std::size_t index = 0;
  std::span<const uint8_t> data;
};

// Returns `name` (a path, an archive member) fit to show in a message: bytes
// that are not part of valid UTF-8, and ASCII control characters, become
// \xNN; the rest is kept. Names in archives need not be UTF-8 (a Latin-1 tar
// member), but messages travel to Python as UTF-8 text.
std::string display_name(std::string_view name);

// --- NPY -------------------------------------------------------------------

// Parses an NPY file (format versions 1, 2 and 3; C or Fortran order; bool,
// int8..int64, uint8..uint64, float16/32/64, complex64/128; either byte
// order). `bytes` is a 1-D uint8 Buffer.
Buffer load_npy(const Buffer& bytes, std::string_view name);

// --- ZIP / NPZ -------------------------------------------------------------

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // where the (compressed) data starts
  uint64_t compressed_size = 0;
  uint64_t size = 0;    // uncompressed
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint16_t flags = 0;   // general purpose bits (1: encrypted)
  uint32_t crc32 = 0;   // of the uncompressed bytes (ZIP's CRC-32)

  bool operator==(const ZipEntry&) const = default;
};

// Lists the members of a ZIP archive (zip64 included) from its central
// directory. Throws FormatError when the directory's record count and byte
// size disagree, when a member's local header names another member, and
// when members' bytes overlap (one payload listed under several names: a
// zip bomb's trick) or run into the directory.
std::vector<ZipEntry> list_zip(std::span<const uint8_t> data,
                               std::string_view name);
// The same from a file, named by its path, reading only the end records,
// the directory and each member's local header. Throws as above, and
// IoError as FileReader::read.
std::vector<ZipEntry> list_zip(const FileReader& file);

// The default limit on one inflated member (a zip bomb guard): 4 GiB.
inline constexpr uint64_t kDefaultMaxMemberSize = uint64_t{1} << 32;

// Returns a member's bytes: a view of `archive` when stored, an inflated copy
// when deflated. The bytes are checked against the member's CRC-32 and
// uncompressed size from the central directory (as zipfile and numpy do), so
// a damaged member is never returned as data. Throws FormatError naming
// `name` for other methods, corrupt data, a CRC-32 or size mismatch, or a
// member larger than `max_size`.
Buffer read_zip_entry(const Buffer& archive, const ZipEntry& entry,
                      std::string_view name,
                      uint64_t max_size = kDefaultMaxMemberSize);
// The same from a file (list_zip(file)'s entry), always a copy; stored
// data over `max_size` is refused too.
Buffer read_zip_entry(const FileReader& file, const ZipEntry& entry,
                      uint64_t max_size = kDefaultMaxMemberSize);

// A copy of the ZIP archive `data` in which each replaced member holds its
// new data, stored (method 0), with its CRC-32 and sizes in both of its
// records (a data descriptor after its old data is dropped, the flag that
// announced it cleared). Every other byte is copied as it is (other
// members, names, extra fields, times, comments, bytes between members);
// the offsets in the central directory and the end records follow the
// members that moved. Zip64 archives and members are rewritten in their
// own form: a value whose field holds the 0xFFFFFFFF marker goes to its
// zip64 extra field, the directory's offset to the zip64 end record.
// Throws FormatError for a damaged archive (as list_zip, and a data
// descriptor that disagrees with the directory) and InvalidArgument for an
// index out of range or given twice, an encrypted member, or a value over
// 32 bits for a field that has no zip64 slot (the record would grow).
std::vector<uint8_t> replace_zip_members(
    std::span<const uint8_t> data, std::string_view name,
    std::vector<ArchiveReplacement> replacements);

// The rewriter that replace_zip_members uses, writing into `sink`; `data`
// must outlive it. Throws as list_zip for a damaged archive. A damaged data
// descriptor, a zip64 field that is cut short, or a value over 32 bits for
// a field with no zip64 slot is found at the replace() (FormatError) or
// finish() (InvalidArgument) that needs it.
std::unique_ptr<ArchiveRewriter> rewrite_zip(std::span<const uint8_t> data,
                                             std::string_view name,
                                             ByteSink sink);
// The same from a file, which must outlive the rewriter.
std::unique_ptr<ArchiveRewriter> rewrite_zip(const FileReader& file,
                                             ByteSink sink);

// --- WAV -------------------------------------------------------------------

struct WavInfo {
  int format = 0;  // 1 PCM integer, 3 IEEE float (also from EXTENSIBLE)
  int channels = 0;
  int sample_rate = 0;
  int bits_per_sample = 0;
  int block_align = 0;
  uint64_t data_offset = 0;
  uint64_t data_size = 0;  // clipped to the bytes present
  uint64_t num_frames() const {
    return block_align ? data_size / block_align : 0;
  }
};

WavInfo parse_wav(std::span<const uint8_t> data, std::string_view name);

// Samples as (frames, channels): uint8 for 8-bit, int16, int32 (24-bit
// widened into the high bytes, a copy), int32 or float32 for 32-bit, float64.
// With a window, only frames [start_frame, start_frame + num_frames).
Buffer load_wav(const Buffer& bytes, std::string_view name,
                uint64_t start_frame = 0,
                std::optional<uint64_t> num_frames = std::nullopt);

// --- TAR -------------------------------------------------------------------

struct TarMember {
  std::string name;
  uint64_t offset = 0;  // of the member's data
  uint64_t size = 0;
  uint64_t header = 0;    // of the member's own header block
  bool pax_size = false;  // its size is a pax "size" record's

  bool operator==(const TarMember&) const = default;
};

// Lists the regular files of a tar archive (ustar, GNU long names, pax
// path/size records); directories, links and other types are skipped. A
// long name or pax header of over 16 MiB is a FormatError.
std::vector<TarMember> list_tar(std::span<const uint8_t> data,
                                std::string_view name);
// The same from a file, named by its path, reading only the headers (and
// the data of long-name and pax headers, 16 MiB at most each, as above).
// Throws as above, and IoError as FileReader::read.
std::vector<TarMember> list_tar(const FileReader& file);

// A tar archive read front to back from a stream that cannot seek (a pipe, a
// socket, a decompressor, a Python file object), one member at a time, in
// the memory of one member and a 4 KiB buffer. It makes list_tar's checks,
// but as it goes: a damaged header, or a stream that ends inside a header, a
// member or its padding, throws FormatError when it is reached, after the
// members before it. A TarMember's offsets count from the stream's start.
//
// Not thread-safe: one thread at a time.
class TarStream {
 public:
  // Reads up to n bytes into dst and returns how many; 0 means the stream
  // has ended. It may throw; the exception passes through.
  using ReadFn = std::function<std::size_t(uint8_t* dst, std::size_t n)>;

  TarStream(ReadFn read, std::string name);
  ~TarStream();
  TarStream(const TarStream&) = delete;
  TarStream& operator=(const TarStream&) = delete;

  // The next regular file, or nullopt at the end of the archive. The data
  // of the member before, if read_data() was not called, is skipped.
  std::optional<TarMember> next();

  // Reads the data (and padding) of the member next() returned into `dst`,
  // which holds exactly its size. Throws FormatError if the stream ends
  // first, InvalidArgument if `dst` is of another size or there is no
  // member to read. After any other exception (of the read function, a
  // damaged header) the stream is unusable: every later call throws
  // InvalidArgument.
  void read_data(std::span<uint8_t> dst);

  const std::string& name() const { return name_; }

 private:
  struct State;
  void check_usable() const;
  std::optional<TarMember> next_step();
  // Bytes of the stream: the buffer first, then `read`, into `dst` (null:
  // dropped). Returns how many it gave (fewer than n only at the end).
  std::size_t take(uint8_t* dst, std::size_t n);
  // The `size` bytes of data at stream offset `body` into `dst` (null:
  // skipped); then, with skip_padding(), their padding to 512 bytes. Each
  // throws FormatError if the stream ends first.
  void read_body(uint64_t body, uint64_t size, uint8_t* dst);
  void skip_padding(uint64_t body, uint64_t size);

  ReadFn read_;
  std::string name_;
  std::unique_ptr<State> state_;
};

// A copy of the tar archive `data` in which each replaced member has its
// new data: its header's size field and checksum are rewritten, its data
// padded to 512 bytes; every other byte (other members, long-name and pax
// headers, directories, links, the end blocks and what follows them) is
// copied as it is. Throws FormatError for a damaged archive (as list_tar)
// and InvalidArgument for an index out of range or given twice, a member
// whose size a pax record gives, or new data of 8 GiB or more (a size
// the octal field cannot hold).
std::vector<uint8_t> replace_tar_members(
    std::span<const uint8_t> data, std::string_view name,
    std::vector<ArchiveReplacement> replacements);

// The rewriter that replace_tar_members uses, writing into `sink`; `data`
// must outlive it. Throws as list_tar for a damaged archive.
std::unique_ptr<ArchiveRewriter> rewrite_tar(std::span<const uint8_t> data,
                                             std::string_view name,
                                             ByteSink sink);
// The same from a file, which must outlive the rewriter.
std::unique_ptr<ArchiveRewriter> rewrite_tar(const FileReader& file,
                                             ByteSink sink);

}  // namespace feedline
