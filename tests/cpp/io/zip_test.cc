// SPDX-License-Identifier: Apache-2.0
//
// read_zip_entry on archives built here: a member whose bytes do not match
// its CRC-32 or its size is an error, never data. replace_zip_members gives
// the archive a writer would have written with the new data.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/io_testing.h"
#include "io/rewriter.h"

namespace feedline::io {
namespace {

using testing::buffer_of;
using testing::Bytes;
using testing::bytes_of;
using testing::bytes_read;
using testing::error_of;
using testing::PieceSink;
using testing::same_from_file;
using testing::TempDir;
using testing::write_file;

void put16(Bytes& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(Bytes& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}

Bytes deflate_raw(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  Bytes out(deflateBound(&z, data.size()));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct Member {
  std::string name;
  std::string data;
  bool deflated = false;
  // A data descriptor after the data (as a streaming writer puts it), the
  // local header's CRC-32 and sizes then 0.
  bool descriptor = false;
  uint32_t flags = 0;
  // Its sizes (and in the directory its offset) in a zip64 extra field
  // after a timestamp field, the 32-bit fields holding the marker; its
  // descriptor then gives 8-byte sizes.
  bool zip64 = false;
};

void put64(Bytes& b, uint64_t v) {
  put32(b, static_cast<uint32_t>(v));
  put32(b, static_cast<uint32_t>(v >> 32));
}

// A ZIP archive of `members`, with the CRC-32 and sizes of their data,
// after `prefix` (a self-extractor's stub) and with `comment`; with a zip64
// end record and locator, the end record's fields holding markers, when
// `zip64_end`.
Bytes zip(const std::vector<Member>& members, const std::string& prefix = "",
          const std::string& comment = "", bool zip64_end = false) {
  Bytes out(prefix.begin(), prefix.end());
  Bytes central;
  for (const Member& m : members) {
    const Bytes stored =
        m.deflated ? deflate_raw(m.data) : Bytes(m.data.begin(), m.data.end());
    const auto crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(m.data.data()),
              static_cast<uInt>(m.data.size())));
    const auto offset = static_cast<uint32_t>(out.size());
    const auto method = m.deflated ? 8u : 0u;
    for (Bytes* b : {&out, &central}) {
      const bool local = b == &out;
      put32(*b, local ? 0x04034b50 : 0x02014b50);
      if (!local) put16(*b, 20);  // made by
      put16(*b, 20);              // version needed
      put16(*b, m.flags | (m.descriptor ? 8 : 0));
      put16(*b, method);
      put32(*b, 0x5A7E1234);  // time, date
      const bool zero = local && m.descriptor;
      const uint32_t mark = m.zip64 ? 0xFFFFFFFF : 0;
      put32(*b, zero ? 0 : crc);
      put32(*b, mark | (zero ? 0 : static_cast<uint32_t>(stored.size())));
      put32(*b, mark | (zero ? 0 : static_cast<uint32_t>(m.data.size())));
      put16(*b, static_cast<uint32_t>(m.name.size()));
      put16(*b, m.zip64 ? (local ? 9 + 20 : 9 + 28) : 0);  // extra
      if (!local) {
        put16(*b, 0);  // comment
        put32(*b, 0);  // disk, internal attributes
        put32(*b, 0);  // external attributes
        put32(*b, mark | offset);
      }
      b->insert(b->end(), m.name.begin(), m.name.end());
      if (m.zip64) {
        put16(*b, 0x5455);  // a timestamp field first
        put16(*b, 5);
        b->push_back(1);
        put32(*b, 0x5A7E1234);
        put16(*b, 0x0001);
        put16(*b, local ? 16 : 24);
        put64(*b, zero ? 0 : m.data.size());
        put64(*b, zero ? 0 : stored.size());
        if (!local) put64(*b, offset);
      }
    }
    out.insert(out.end(), stored.begin(), stored.end());
    if (m.descriptor) {
      put32(out, 0x08074b50);
      put32(out, crc);
      if (m.zip64) {
        put64(out, stored.size());
        put64(out, m.data.size());
      } else {
        put32(out, static_cast<uint32_t>(stored.size()));
        put32(out, static_cast<uint32_t>(m.data.size()));
      }
    }
  }
  const auto dir = static_cast<uint32_t>(out.size());
  out.insert(out.end(), central.begin(), central.end());
  if (zip64_end) {
    const uint64_t record = out.size();
    put32(out, 0x06064b50);
    put64(out, 44);             // the record's size after this field
    put32(out, 45 | 45 << 16);  // made by, version needed
    put32(out, 0);              // this disk
    put32(out, 0);              // the directory's disk
    put64(out, members.size());
    put64(out, members.size());
    put64(out, central.size());
    put64(out, dir);
    put32(out, 0x07064b50);  // locator
    put32(out, 0);
    put64(out, record);
    put32(out, 1);  // disks
  }
  put32(out, 0x06054b50);
  put32(out, 0);
  put16(out, zip64_end ? 0xFFFF : static_cast<uint32_t>(members.size()));
  put16(out, zip64_end ? 0xFFFF : static_cast<uint32_t>(members.size()));
  put32(out, zip64_end ? 0xFFFFFFFF : static_cast<uint32_t>(central.size()));
  put32(out, zip64_end ? 0xFFFFFFFF : dir);
  put16(out, static_cast<uint32_t>(comment.size()));
  out.insert(out.end(), comment.begin(), comment.end());
  return out;
}

// list_zip of `b`, in memory and from a file (the same entries or error).
std::vector<ZipEntry> list(const Bytes& b) {
  return same_from_file(
      b, "a.zip", [&] { return list_zip(b, "a.zip"); },
      [](const FileReader& f) { return list_zip(f); });
}

// Member i, in memory and from a file (the same bytes or error).
std::string read(const Bytes& archive, std::size_t i) {
  Buffer b = buffer_of(archive);
  Bytes out = same_from_file(
      archive, "a.zip",
      [&] {
        return bytes_of(
            read_zip_entry(b, list_zip(bytes_of(b), "a.zip").at(i), "a.zip"));
      },
      [&](const FileReader& f) {
        return bytes_of(read_zip_entry(f, list_zip(f).at(i)));
      });
  return std::string(out.begin(), out.end());
}

const std::string kText =
    "The quick brown fox jumps over the lazy dog, again and again and again.";

TEST(ZipTest, ReadsStoredAndDeflatedMembersWithTheirCrc) {
  const Bytes a = zip({{"s.txt", kText}, {"d.txt", kText, true}});
  Buffer b = buffer_of(a);
  std::vector<ZipEntry> e = list_zip(bytes_of(b), "a.zip");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].crc32, crc32(0, reinterpret_cast<const Bytef*>(kText.data()),
                              static_cast<uInt>(kText.size())));
  EXPECT_EQ(read(a, 0), kText);
  EXPECT_EQ(read(a, 1), kText);
}

// A flipped byte in a member's data used to come back as data.
TEST(ZipTest, FlippedByteIsACrcError) {
  for (bool deflated : {false, true}) {
    Bytes a = zip({{"ok", "fine"}, {"dam\xe9ged.npy", kText, deflated}});
    Buffer b = buffer_of(a);
    const ZipEntry e = list_zip(bytes_of(b), "a.zip").at(1);
    // Stored: flip a data byte. Deflated: flip a bit of the last byte, which
    // still inflates (a changed literal or distance) in this stream.
    a[e.data_offset + (deflated ? e.compressed_size - 2 : 5)] ^= 0x04;
    const std::string message = error_of<FormatError>([&] { read(a, 1); });
    EXPECT_NE(message.find("a.zip"), std::string::npos) << message;
    EXPECT_TRUE(message.find("CRC-32 mismatch") != std::string::npos ||
                message.find("corrupt deflate") != std::string::npos ||
                message.find("inflates") != std::string::npos)
        << message;
    // The member is named, its Latin-1 byte escaped.
    EXPECT_NE(message.find("'dam\\xe9ged.npy'"), std::string::npos) << message;
    EXPECT_EQ(read(a, 0), "fine");
  }
}

TEST(ZipTest, WrongCrcInTheDirectoryIsAnError) {
  Bytes a = zip({{"x", kText, true}});
  Buffer b = buffer_of(a);
  ZipEntry e = list_zip(bytes_of(b), "a.zip").at(0);
  e.crc32 ^= 1;
  const std::string message =
      error_of<FormatError>([&] { read_zip_entry(b, e, "a.zip"); });
  EXPECT_NE(message.find("CRC-32 mismatch"), std::string::npos) << message;
  EXPECT_NE(message.find("(at byte " + std::to_string(e.data_offset) + ")"),
            std::string::npos)
      << message;
}

// A deflate stream cut short is an error, not a shorter member.
TEST(ZipTest, CutDeflateStreamIsAnError) {
  Bytes a = zip({{"x", kText, true}});
  Buffer b = buffer_of(a);
  const ZipEntry e = list_zip(bytes_of(b), "a.zip").at(0);
  for (uint64_t keep : {uint64_t{0}, uint64_t{1}, e.compressed_size / 2,
                        e.compressed_size - 1}) {
    ZipEntry cut = e;
    cut.compressed_size = keep;
    const std::string message =
        error_of<FormatError>([&] { read_zip_entry(b, cut, "a.zip"); });
    EXPECT_NE(message.find("'x': corrupt deflate data"), std::string::npos)
        << keep << ": " << message;
  }
}

// The uncompressed size of the directory is checked both ways.
TEST(ZipTest, SizeMismatchIsAnError) {
  Bytes a = zip({{"x", kText, true}});
  Buffer b = buffer_of(a);
  ZipEntry e = list_zip(bytes_of(b), "a.zip").at(0);
  for (int delta : {-1, 1}) {
    ZipEntry wrong = e;
    wrong.size = e.size + static_cast<uint64_t>(delta);
    EXPECT_NE(error_of<FormatError>([&] {
                read_zip_entry(b, wrong, "a.zip");
              }).find("inflates"),
              std::string::npos);
  }
  Bytes s = zip({{"x", kText}});
  Buffer sb = buffer_of(s);
  ZipEntry stored = list_zip(bytes_of(sb), "a.zip").at(0);
  stored.size -= 1;
  EXPECT_NE(error_of<FormatError>([&] {
              read_zip_entry(sb, stored, "a.zip");
            }).find("sizes disagree"),
            std::string::npos);
}

// replace_zip_members, checked against the rewriter reading a file.
Bytes replaced(const Bytes& in, std::vector<ArchiveReplacement> r) {
  return same_from_file(
      in, "a.zip", [&] { return replace_zip_members(in, "a.zip", r); },
      [&](const FileReader& f) {
        return rewrite_to_vector(
            [&](ByteSink sink) { return rewrite_zip(f, std::move(sink)); },
            f.size(), r);
      });
}

TEST(ZipTest, ReplacedMembersAreStoredAndTheRestIsKept) {
  const std::string stub = "#!/bin/sh\nexit 0\n";
  const std::vector<Member> members = {{"a.jpg", "hello"},
                                       {"b.txt", kText, true},
                                       {"c.jpg", kText + kText, true},
                                       {"d.jpg", "streamed", false, true},
                                       {"e.txt", kText, true, true}};
  const Bytes in = zip(members, stub, "a comment");
  EXPECT_EQ(replaced(in, {}), in);
  const Bytes grown = bytes_of(std::string(3000, 'G'));
  const Bytes shrunk = bytes_of("s");
  const Bytes none;
  // Given out of order. Each replaced member is what a writer gives for
  // the new data stored: the same header fields, the new CRC-32 and sizes,
  // no descriptor; every offset after it moves.
  const Bytes out = replaced(in, {{3, shrunk}, {0, none}, {2, grown}});
  std::vector<Member> expected = members;
  expected[0] = {"a.jpg", ""};
  expected[2] = {"c.jpg", std::string(3000, 'G')};
  expected[3] = {"d.jpg", "s"};
  EXPECT_EQ(out, zip(expected, stub, "a comment"));
  EXPECT_EQ(read(out, 1), kText);
  EXPECT_EQ(read(out, 2), std::string(3000, 'G'));
  EXPECT_EQ(read(out, 4), kText);  // its descriptor kept, moved
}

TEST(ZipTest, Zip64ArchivesAndMembersAreReplacedInTheirOwnForm) {
  // Members whose sizes and offsets are in zip64 fields (one streamed, its
  // descriptor of 8-byte sizes), in an archive with a zip64 end record.
  const std::vector<Member> members = {
      {"a.jpg", kText, true, false, 0, true},
      {"b.txt", kText, false, false, 0, true},
      {"c.jpg", "streamed", false, true, 0, true},
      {"d.jpg", "plain"},
      {"e.txt", kText, true, true, 0, true}};
  const Bytes in = zip(members, "stub", "", true);
  ASSERT_EQ(list(in).size(), 5u);
  EXPECT_EQ(read(in, 2), "streamed");
  EXPECT_EQ(replaced(in, {}), in);
  const std::string grown(5000, 'G');
  const Bytes out = replaced(
      in, {{0, bytes_of(grown)}, {2, bytes_of("s")}, {3, bytes_of("p")}});
  std::vector<Member> expected = members;
  expected[0] = {"a.jpg", grown, false, false, 0, true};
  expected[2] = {"c.jpg", "s", false, false, 0, true};
  expected[3] = {"d.jpg", "p"};
  EXPECT_EQ(out, zip(expected, "stub", "", true));
  EXPECT_EQ(read(out, 0), grown);
  EXPECT_EQ(read(out, 1), kText);
  EXPECT_EQ(read(out, 4), kText);
  // A zip64 member in an archive without the zip64 end record.
  const Bytes small = zip({{"x", "old", false, true, 0, true}, {"y", "y"}});
  EXPECT_EQ(replaced(small, {{0, bytes_of("new!")}}),
            zip({{"x", "new!", false, false, 0, true}, {"y", "y"}}));
  // Its descriptor read with 4-byte sizes would not match: the sizes are
  // the local header's zip64 field's width.
  Bytes narrow = zip({{"x", "old", false, true}, {"y", "y"}});
  EXPECT_EQ(replaced(narrow, {{0, bytes_of("n")}}),
            zip({{"x", "n"}, {"y", "y"}}));
}

// Where the directory of `in` (no comment, no zip64) starts.
std::size_t directory_of(const Bytes& in) {
  const std::size_t at = in.size() - 6;
  return in[at] | in[at + 1] << 8 | in[at + 2] << 16 |
         static_cast<std::size_t>(in[at + 3]) << 24;
}

// `in` (no comment, no zip64) with its directory's records reversed.
Bytes reversed_directory(const Bytes& in) {
  const std::size_t start = directory_of(in);
  std::vector<Bytes> records;
  std::size_t at = start;
  while (at < in.size() - 22) {
    const std::size_t n = 46 + (in[at + 28] | in[at + 29] << 8) +
                          (in[at + 30] | in[at + 31] << 8) +
                          (in[at + 32] | in[at + 33] << 8);
    records.emplace_back(in.begin() + static_cast<std::ptrdiff_t>(at),
                         in.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  Bytes out(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(start));
  for (auto r = records.rbegin(); r != records.rend(); ++r)
    out.insert(out.end(), r->begin(), r->end());
  out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(at), in.end());
  return out;
}

TEST(ZipTest, TheRewriterWritesMembersInTheOrderTheirDataLies) {
  const std::vector<Member> members = {
      {"a", "aaa"}, {"b", kText, true}, {"c", "streamed", false, true}};
  // The directory lists c, b, a; their data lies a, b, c.
  const Bytes in = reversed_directory(zip(members));
  ASSERT_EQ(list(in).at(0).name, "c");
  Bytes out;
  std::vector<std::size_t> sizes;  // of `out` after each step
  std::unique_ptr<ArchiveRewriter> w =
      rewrite_zip(in, "a.zip", [&](std::span<const uint8_t> bytes) {
        out.insert(out.end(), bytes.begin(), bytes.end());
      });
  EXPECT_EQ(w->order(), (std::vector<std::size_t>{2, 1, 0}));
  w->replace(2, bytes_of("A"));  // "a", first in the file
  sizes.push_back(out.size());
  EXPECT_NE(error_of<InvalidArgument>([&] {
              w->replace(2, bytes_of("A"));
            }).find("replaced twice"),
            std::string::npos);
  w->replace(0, bytes_of("C"));  // "c", last: its descriptor dropped
  sizes.push_back(out.size());
  w->finish();
  // Each member is written when it is replaced, the directory at the end.
  const Bytes expected =
      reversed_directory(zip({{"a", "A"}, members[1], {"c", "C"}}));
  EXPECT_EQ(out, expected);
  EXPECT_EQ(sizes[0], 30u + 1 + 1);  // a's header, name and data
  EXPECT_EQ(sizes[1], directory_of(expected));
  // The list form takes them in any order.
  EXPECT_EQ(replaced(in, {{0, bytes_of("C")}, {2, bytes_of("A")}}), out);
  // What is refused is refused before a byte is written.
  const Bytes locked = zip({{"x", "1", false, false, 1}});
  Bytes none;
  std::unique_ptr<ArchiveRewriter> v =
      rewrite_zip(locked, "a.zip", [&](std::span<const uint8_t> bytes) {
        none.insert(none.end(), bytes.begin(), bytes.end());
      });
  EXPECT_THROW(v->replace(0, bytes_of("2")), InvalidArgument);
  EXPECT_TRUE(none.empty());
}

TEST(ZipTest, ReplacingRefusesWhatItCannotDo) {
  const Bytes in = zip({{"1", "1"}, {"2", "2"}, {"3", "3", false, false, 1}});
  const Bytes data = bytes_of("new");
  auto invalid = [&](std::vector<ArchiveReplacement> r) {
    return error_of<InvalidArgument>([&] { replaced(in, std::move(r)); });
  };
  EXPECT_NE(invalid({{3, data}}).find("no member 3"), std::string::npos);
  EXPECT_NE(invalid({{1, data}, {1, data}}).find("twice"), std::string::npos);
  EXPECT_NE(invalid({{2, data}}).find("'3' is encrypted"), std::string::npos);
  // A zip64 end record that would overlap its locator (here its signature
  // put in the locator's disk field) is a damaged archive.
  Bytes z64 = zip({{"1", "1"}}, "", "", true);
  const std::size_t locator = z64.size() - 22 - 20;
  Bytes fields;  // its disk field, then its pointer to the record
  put32(fields, 0x06064b50);
  put64(fields, locator + 4);
  std::copy(fields.begin(), fields.end(), z64.begin() + locator + 4);
  EXPECT_NE(
      error_of<FormatError>([&] { list(z64); }).find("runs into its locator"),
      std::string::npos);
  // A damaged archive is the parser's error, with nothing written.
  const Bytes cut(in.begin(), in.end() - 30);
  EXPECT_THROW(replaced(cut, {{0, data}}), FormatError);
  // A descriptor that does not give the directory's CRC-32 and sizes.
  Bytes streamed = zip({{"s", "streamed", false, true}, {"t", "t"}});
  const ZipEntry e = list(streamed).at(0);
  streamed[e.data_offset + e.compressed_size + 4] ^= 1;  // its CRC-32
  EXPECT_NE(error_of<FormatError>([&] {
              replaced(streamed, {{0, data}});
            }).find("data descriptor of 's'"),
            std::string::npos);
}

// From a file, listing reads the end records, the directory and the local
// headers, not the members' data; the rewriter copies what it keeps a MiB
// at a time.
TEST(ZipTest, FromAFileOnlyRecordsAreReadAndDataIsCopiedInPieces) {
  const std::string big((std::size_t{16} << 20) + 3, 'Z');
  const Bytes in = zip({{"a.jpg", "hello"},
                        {"big.bin", big},
                        {"c.jpg", kText, true, true},
                        {"d.txt", kText, true}},
                       "", "a comment");
  TempDir dir("zip_pieces");
  write_file(dir / "a.zip", in);
  const FileReader f(dir / "a.zip");

  const uint64_t before = bytes_read();
  const std::vector<ZipEntry> e = list_zip(f);
  EXPECT_LT(bytes_read() - before, 128u << 10);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[1].size, big.size());
  EXPECT_EQ(bytes_of(read_zip_entry(f, e[2])), bytes_of(kText));

  PieceSink out;
  std::unique_ptr<ArchiveRewriter> w = rewrite_zip(f, out.sink());
  w->replace(0, bytes_of("new a"));
  w->replace(2, bytes_of("cc"));
  w->finish();
  EXPECT_LE(out.largest, std::size_t{1} << 20);
  EXPECT_EQ(out.bytes,
            replace_zip_members(in, "a.zip",
                                {{0, bytes_of("new a")}, {2, bytes_of("cc")}}));
  // A stored member over the limit is not read into memory.
  EXPECT_NE(error_of<FormatError>([&] {
              read_zip_entry(f, e[1], 1000);
            }).find("over the limit of 1000"),
            std::string::npos);
}

}  // namespace
}  // namespace feedline::io
