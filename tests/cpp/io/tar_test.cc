// SPDX-License-Identifier: Apache-2.0
//
// list_tar on archives built here block by block: where the archive may
// end, what a damaged header raises, and names kept as bytes.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/io_testing.h"
#include "io/rewriter.h"

namespace feedline::io {
namespace {

using testing::Bytes;
using testing::bytes_of;
using testing::bytes_read;
using testing::error_of;
using testing::PieceSink;
using testing::same_from_file;
using testing::TempDir;
using testing::write_file;

constexpr std::size_t kBlock = 512;

// Writes `v` as zero-padded octal into the `len`-byte field at `at`, with a
// NUL at the end, as ustar does.
void octal(Bytes& b, std::size_t at, std::size_t len, uint64_t v) {
  std::string s(len - 1, '0');
  for (std::size_t i = len - 1; i-- > 0 && v > 0; v /= 8)
    s[i] = static_cast<char>('0' + v % 8);
  std::memcpy(&b[at], s.data(), s.size());
  b[at + len - 1] = 0;
}

// Recomputes the checksum of the header block at `at`.
void seal(Bytes& b, std::size_t at) {
  std::memset(&b[at + 148], ' ', 8);
  uint64_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) sum += b[at + i];
  octal(b, at + 148, 7, sum);
  b[at + 155] = ' ';
}

// A tar archive built member by member.
class Tar {
 public:
  // Appends a header and `data` padded to a block; returns the header's
  // offset.
  std::size_t add(const std::string& name, const std::string& data,
                  char type = '0') {
    const std::size_t at = out_.size();
    out_.resize(at + kBlock);
    std::memcpy(&out_[at], name.data(),
                std::min<std::size_t>(name.size(), 100));
    octal(out_, at + 100, 8, 0644);
    octal(out_, at + 108, 8, 1000);
    octal(out_, at + 116, 8, 1000);
    octal(out_, at + 124, 12, data.size());
    octal(out_, at + 136, 12, 1700000000);
    out_[at + 156] = static_cast<uint8_t>(type);
    std::memcpy(&out_[at + 257],
                "ustar\0"
                "00",
                8);
    seal(out_, at);
    out_.insert(out_.end(), data.begin(), data.end());
    out_.resize(out_.size() + (kBlock - data.size() % kBlock) % kBlock);
    return at;
  }
  // A pax header giving the next member `records` ("<key>=<value>" each).
  void pax(const std::vector<std::string>& records) {
    std::string body;
    for (const std::string& r : records) {
      std::size_t len = r.size() + 3;  // " ", "\n" and at least one digit
      while (std::to_string(len).size() + r.size() + 2 != len) ++len;
      body += std::to_string(len) + " " + r + "\n";
    }
    add("././@PaxHeader", body, 'x');
  }
  Tar& end() {
    out_.resize(out_.size() + 2 * kBlock);
    return *this;
  }
  Bytes& bytes() { return out_; }

 private:
  Bytes out_;
};

// The members of `b` read as a stream (a TarStream) at most `piece` bytes
// per read, the data of every other one read (and checked against `b`),
// that of the others skipped.
std::vector<TarMember> list_stream(const Bytes& b, std::size_t piece) {
  std::size_t at = 0;
  TarStream stream(
      [&](uint8_t* dst, std::size_t n) {
        const std::size_t k = std::min({n, piece, b.size() - at});
        if (k > 0) std::memcpy(dst, b.data() + at, k);
        at += k;
        return k;
      },
      "t.tar");
  std::vector<TarMember> members;
  while (std::optional<TarMember> m = stream.next()) {
    if (members.size() % 2 == 0) {
      Bytes data(m->size);
      stream.read_data(data);
      EXPECT_TRUE(std::equal(data.begin(), data.end(),
                             b.begin() + static_cast<long>(m->offset)))
          << m->name;
    }
    members.push_back(*m);
  }
  return members;
}

// list_tar of `b`, in memory and from a file (the same members or error),
// checked to be what a TarStream gives, a byte, 700 bytes or all there is
// per read: the same members, or the same error when it reaches it.
std::vector<TarMember> list(const Bytes& b) {
  constexpr std::size_t kPieces[] = {1, 700, SIZE_MAX};
  std::vector<TarMember> members;
  try {
    members = same_from_file(
        b, "t.tar", [&] { return list_tar(b, "t.tar"); },
        [](const FileReader& f) { return list_tar(f); });
  } catch (const FormatError& e) {
    for (std::size_t piece : kPieces) {
      EXPECT_EQ(error_of<FormatError>([&] { list_stream(b, piece); }), e.what())
          << "as a stream read " << piece << " bytes at a time";
    }
    throw;
  }
  for (std::size_t piece : kPieces) {
    EXPECT_TRUE(list_stream(b, piece) == members)
        << "as a stream read " << piece << " bytes at a time";
  }
  return members;
}

std::string names(const std::vector<TarMember>& members) {
  std::string out;
  for (const TarMember& m : members) out += m.name + ";";
  return out;
}

TEST(TarTest, ListsRegularFilesAndEndsAtAZeroBlock) {
  Tar t;
  t.add("a.txt", "hello");
  t.add("dir/", "", '5');
  t.add("b.bin", std::string(600, 'x'));
  t.add("link", "", '2');
  t.end();
  std::vector<TarMember> m = list(t.bytes());
  ASSERT_EQ(names(m), "a.txt;b.bin;");
  EXPECT_EQ(m[0].offset, kBlock);
  EXPECT_EQ(m[0].size, 5u);
  EXPECT_EQ(m[1].size, 600u);
  // After the zero block nothing is read, as with tarfile.
  t.bytes().push_back(0x55);
  EXPECT_EQ(names(list(t.bytes())), "a.txt;b.bin;");
}

// tarfile accepts an archive whose input ends right after a member's
// padding, with no zero blocks; so does list_tar.
TEST(TarTest, InputMayEndAtAMemberBoundary) {
  Tar t;
  t.add("a", "1");
  t.add("b", "22");
  EXPECT_EQ(names(list(t.bytes())), "a;b;");
  // A partial block of zeros (the end blocks cut short) loses nothing.
  t.bytes().resize(t.bytes().size() + 100);
  EXPECT_EQ(names(list(t.bytes())), "a;b;");
}

TEST(TarTest, EmptyInputIsNotAnArchive) {
  EXPECT_NE(error_of<FormatError>([] { list({}); }).find("empty"),
            std::string::npos);
  Tar t;
  EXPECT_EQ(list(t.end().bytes()).size(), 0u);  // zero blocks only: empty
}

// Each cut used to end the listing early without an error.
TEST(TarTest, CutsInsideAHeaderDataOrPaddingAreErrors) {
  Tar t;
  t.add("a", "1");
  const std::size_t second = t.add("b", std::string(700, 'y'));
  t.end();
  const Bytes full = t.bytes();
  struct Cut {
    std::size_t size;
    std::string says;
    std::size_t at;
  };
  for (const Cut& c : {
           Cut{second + 100, "truncated tar header", second},
           Cut{second + kBlock + 10, "overruns", second + kBlock},
           Cut{second + kBlock + 800, "padding", second + kBlock + 700},
       }) {
    Bytes cut(full.begin(), full.begin() + static_cast<long>(c.size));
    const std::string message = error_of<FormatError>([&] { list(cut); });
    EXPECT_NE(message.find("t.tar"), std::string::npos) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_NE(message.find("(at byte " + std::to_string(c.at) + ")"),
              std::string::npos)
        << message;
  }
  // A partial header that is not all zeros, even with its checksum intact.
  Bytes cut(full.begin(), full.begin() + static_cast<long>(second + 511));
  EXPECT_THROW(list(cut), FormatError);
}

// A field tarfile cannot parse as a number: the header is damaged, even when
// its checksum was recomputed over the damage.
TEST(TarTest, GarbageNumericFieldsAreErrors) {
  struct Field {
    std::size_t at;
    std::size_t len;
    const char* name;
  };
  for (const Field& f :
       {Field{124, 12, "size"}, Field{100, 8, "mode"}, Field{136, 12, "mtime"},
        Field{108, 8, "uid"}, Field{329, 8, "devmajor"}}) {
    Tar t;
    t.add("a", "1");
    const std::size_t at = t.add("b", "2");
    t.end();
    Bytes& b = t.bytes();
    std::memcpy(&b[at + f.at], "00x1", 4);
    seal(b, at);
    const std::string message = error_of<FormatError>([&] { list(b); });
    EXPECT_NE(message.find(std::string(f.name) + " field is not an octal"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("(at byte " + std::to_string(at + f.at) + ")"),
              std::string::npos)
        << message;
  }
  // A checksum field that is not a number.
  Tar t;
  t.add("a", "1");
  t.end();
  std::memcpy(&t.bytes()[148], "zz", 2);
  EXPECT_NE(error_of<FormatError>([&] { list(t.bytes()); }).find("checksum"),
            std::string::npos);
}

// Numbers as tarfile reads them: blanks around the digits, an empty field
// as zero, GNU base-256; a negative size is refused.
TEST(TarTest, NumericFieldEncodings) {
  Tar t;
  const std::size_t at = t.add("a", std::string(9, 'z'));
  t.end();
  Bytes& b = t.bytes();
  std::memcpy(&b[at + 124], "  11 \0\0\0\0\0\0\0", 12);  // octal 11 = 9
  std::memset(&b[at + 100], 0, 8);                       // an empty mode
  seal(b, at);
  ASSERT_EQ(list(b).at(0).size, 9u);
  std::memset(&b[at + 124], 0, 12);
  b[at + 124] = 0x80;  // base-256
  b[at + 135] = 9;
  seal(b, at);
  EXPECT_EQ(list(b).at(0).size, 9u);
  std::memset(&b[at + 124], 0xFF, 12);  // base-256, negative
  seal(b, at);
  EXPECT_NE(error_of<FormatError>([&] { list(b); }).find("negative"),
            std::string::npos);
}

TEST(TarTest, ChecksumIsVerifiedSignedOrUnsigned) {
  Tar t;
  const std::size_t at = t.add("caf\xe9", "1");
  t.end();
  Bytes& b = t.bytes();
  // Some old tars summed the header as signed chars.
  int64_t sum = 0;
  std::memset(&b[at + 148], ' ', 8);
  for (std::size_t i = 0; i < kBlock; ++i)
    sum += static_cast<int8_t>(b[at + i]);
  octal(b, at + 148, 7, static_cast<uint64_t>(sum));
  EXPECT_EQ(list(b).size(), 1u);
  b[at + 148] = '7';
  EXPECT_NE(error_of<FormatError>([&] { list(b); })
                .find("bad tar header "
                      "checksum"),
            std::string::npos);
}

// A Latin-1 name (not UTF-8) is kept byte for byte, as are long names.
TEST(TarTest, NamesAreKeptAsBytes) {
  Tar t;
  t.add("caf\xe9.txt", "1");
  const std::string long_name = std::string(150, 'n') + "\xff.bin";
  t.add("././@LongLink", long_name + std::string(1, '\0'), 'L');
  t.add("short", "2");
  t.pax({"path=pax/\xe9t\xe9.bin"});
  t.add("ignored", "3");
  t.end();
  std::vector<TarMember> m = list(t.bytes());
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].name, "caf\xe9.txt");
  EXPECT_EQ(m[1].name, long_name);
  EXPECT_EQ(m[2].name, "pax/\xe9t\xe9.bin");
}

// GNU tar writes a long link target ('K') and a long name ('L') before a
// link; neither cancels the other, and the link itself is skipped.
TEST(TarTest, LongLinkAndLongNameBeforeALink) {
  Tar t;
  const std::string target = std::string(120, 't');
  const std::string name = std::string(120, 'n');
  t.add("././@LongLink", name + std::string(1, '\0'), 'L');
  t.add("././@LongLink", target + std::string(1, '\0'), 'K');
  t.add("short-link", "", '2');
  t.add("././@LongLink", name + std::string(1, '\0'), 'L');
  t.add("short", "1");
  EXPECT_EQ(names(list(t.end().bytes())), name + ";");
}

// A damaged pax header whose padding is cut: the pax error comes first in
// every form (a stream once read the padding before the records).
TEST(TarTest, ADamagedPaxHeaderIsReportedBeforeItsCutPadding) {
  Tar t;
  t.add("././@PaxHeader", "9 x\n", 'x');
  Bytes b = t.bytes();
  b.resize(kBlock + 10);
  const std::string message = error_of<FormatError>([&] { list(b); });
  EXPECT_NE(message.find("pax record"), std::string::npos) << message;
}

// An empty long name (no data at all) leaves the member its own name; a
// stream reads the empty name from no bytes (which once read a null span).
TEST(TarTest, AnEmptyLongNameKeepsTheMembersOwnName) {
  Tar t;
  t.add("././@LongLink", "", 'L');
  t.add("own", "1");
  EXPECT_EQ(names(list(t.end().bytes())), "own;");
}

TEST(TarTest, PaxSizeOverridesTheNextHeader) {
  Tar t;
  t.pax({"size=5"});
  const std::size_t at = t.add("big", "12345");
  t.end();
  octal(t.bytes(), at + 124, 12, 0);  // the header's own size is ignored
  seal(t.bytes(), at);
  EXPECT_EQ(list(t.bytes()).at(0).size, 5u);
}

// A long-name or pax header whose member was cut off loses that member.
TEST(TarTest, ExtendedHeaderWithoutAMemberIsAnError) {
  Tar t;
  t.add("a", "1");
  t.pax({"path=lost.bin"});
  EXPECT_NE(
      error_of<FormatError>([&] { list(t.bytes()); }).find("no member after"),
      std::string::npos);
  t.end();
  EXPECT_THROW(list(t.bytes()), FormatError);
}

// Links, directories and devices carry no data whatever their size says
// (tarfile reads the next header right after them).
TEST(TarTest, NonFileTypesHaveNoData) {
  Tar t;
  const std::size_t dir = t.add("d/", "", '5');
  t.add("a", "1");
  t.end();
  octal(t.bytes(), dir + 124, 12, 4096);
  seal(t.bytes(), dir);
  EXPECT_EQ(names(list(t.bytes())), "a;");
  // A V7 directory: a regular-file header ('\0') whose name ends in '/'.
  Tar v7;
  v7.add("old/", "", '\0');
  v7.add("old/a", "1", '\0');
  EXPECT_EQ(names(list(v7.end().bytes())), "old/a;");
}

TEST(TarTest, SparseMembersAreRefusedNotMisread) {
  Tar t;
  t.add("s", "1", 'S');
  EXPECT_NE(
      error_of<FormatError>([&] { list(t.end().bytes()); }).find("sparse"),
      std::string::npos);
  Tar pax;
  pax.pax({"GNU.sparse.major=1", "GNU.sparse.minor=0"});
  pax.add("s", "1");
  EXPECT_THROW(list(pax.end().bytes()), FormatError);
}

// The archive `contents` make (one member each, in order, with `pax_path`
// giving the third its name by a pax record and a GNU long name the
// fourth's), with a directory and a link between them, the end blocks and
// a stray byte after them.
Bytes archive(const std::vector<std::string>& contents) {
  Tar t;
  t.add("a.jpg", contents.at(0));
  t.add("dir/", "", '5');
  t.add("b.bin", contents.at(1));
  t.pax({"path=" + std::string(130, 'p') + ".jpg"});
  t.add("short-pax", contents.at(2));
  t.add("././@LongLink", std::string(120, 'n') + std::string(1, '\0'), 'L');
  t.add("short-long", contents.at(3));
  t.add("link", "", '2');
  t.end();
  t.bytes().push_back(0x55);
  return t.bytes();
}

// replace_tar_members, checked against the rewriter reading a file.
Bytes replaced(const Bytes& in, std::vector<ArchiveReplacement> r) {
  return same_from_file(
      in, "t.tar", [&] { return replace_tar_members(in, "t.tar", r); },
      [&](const FileReader& f) {
        return rewrite_to_vector(
            [&](ByteSink sink) { return rewrite_tar(f, std::move(sink)); },
            f.size(), r);
      });
}

TEST(TarTest, ReplacedMembersGetNewDataAndTheRestIsKept) {
  const Bytes in = archive({"hello", std::string(600, 'x'),
                            std::string(513, 'y'), std::string(1024, 'z')});
  EXPECT_EQ(replaced(in, {}), in);
  const Bytes grown = bytes_of(std::string(1500, 'G'));
  const Bytes shrunk = bytes_of("s");
  const Bytes none;
  // Given out of order: the last member first.
  const Bytes out = replaced(in, {{3, grown}, {0, none}, {2, shrunk}});
  // Byte for byte the archive written with the new contents: the same
  // headers, sizes and checksums as a tar writer gives, the same padding,
  // the same bytes after the end blocks.
  EXPECT_EQ(out,
            archive({"", std::string(600, 'x'), "s", std::string(1500, 'G')}));
  const std::vector<TarMember> m = list(out);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[2].name, std::string(130, 'p') + ".jpg");
  EXPECT_EQ(m[3].name, std::string(120, 'n'));
  EXPECT_EQ(
      Bytes(out.begin() + static_cast<std::ptrdiff_t>(m[3].offset),
            out.begin() + static_cast<std::ptrdiff_t>(m[3].offset + m[3].size)),
      grown);
}

TEST(TarTest, ReplacingRefusesWhatItCannotDo) {
  const Bytes in = archive({"1", "2", "3", "4"});
  const Bytes data = bytes_of("new");
  auto invalid = [&](std::vector<ArchiveReplacement> r) {
    return error_of<InvalidArgument>([&] { replaced(in, std::move(r)); });
  };
  EXPECT_NE(invalid({{4, data}}).find("no member 4"), std::string::npos);
  EXPECT_NE(invalid({{1, data}, {1, data}}).find("twice"), std::string::npos);
  // A member whose size a pax record gives: the record would be wrong.
  Tar t;
  t.pax({"size=5"});
  t.add("big", "12345");
  t.end();
  EXPECT_NE(error_of<InvalidArgument>([&] {
              replace_tar_members(t.bytes(), "t.tar", {{0, data}});
            }).find("pax record"),
            std::string::npos);
  // A damaged archive is the parser's error, with nothing written.
  Bytes cut(in.begin(), in.begin() + 700);
  EXPECT_THROW(replaced(cut, {{0, data}}), FormatError);
}

TEST(TarTest, TheRewriterWritesEachMemberAsItIsReplaced) {
  const Bytes in = archive({"a", "b", "c", "d"});
  Bytes out;
  std::unique_ptr<ArchiveRewriter> w =
      rewrite_tar(in, "t.tar", [&](std::span<const uint8_t> bytes) {
        out.insert(out.end(), bytes.begin(), bytes.end());
      });
  EXPECT_EQ(w->order(), (std::vector<std::size_t>{0, 1, 2, 3}));
  const std::vector<TarMember> m = list(in);
  w->replace(1, bytes_of("BB"));
  // Written up to the end of member 1's data and padding, nothing more.
  ASSERT_EQ(out.size(), m[1].offset + 512);
  EXPECT_EQ(
      std::string(out.begin() + static_cast<std::ptrdiff_t>(m[1].offset),
                  out.begin() + static_cast<std::ptrdiff_t>(m[1].offset + 3)),
      std::string("BB\0", 3));
  EXPECT_NE(error_of<InvalidArgument>([&] {
              w->replace(0, bytes_of("A"));
            }).find("comes before the last one replaced"),
            std::string::npos);
  w->replace(3, bytes_of("DDD"));
  w->finish();
  EXPECT_EQ(out, archive({"a", "BB", "c", "DDD"}));
  EXPECT_NE(error_of<InvalidArgument>([&] {
              w->replace(3, bytes_of("x"));
            }).find("after the archive was finished"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { w->finish(); }).find("twice"),
            std::string::npos);
}

// From a file, listing reads the headers and not the members' data, and
// the rewriter copies what it keeps a MiB at a time instead of holding it.
TEST(TarTest, FromAFileOnlyHeadersAreReadAndDataIsCopiedInPieces) {
  constexpr std::size_t kBig = std::size_t{16} << 20;
  Tar t;
  t.add("a.jpg", "AAAA");
  const std::size_t big = t.add("big.bin", "");
  octal(t.bytes(), big + 124, 12, kBig);
  seal(t.bytes(), big);
  t.bytes().resize(t.bytes().size() + kBig, 0x5A);
  t.add("c.jpg", "CCCCCC");
  const Bytes in = t.end().bytes();
  TempDir dir("tar_pieces");
  write_file(dir / "t.tar", in);
  const FileReader f(dir / "t.tar");

  const uint64_t before = bytes_read();
  const std::vector<TarMember> m = list_tar(f);
  EXPECT_LT(bytes_read() - before, 64u << 10);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].size, kBig);

  PieceSink out;
  std::unique_ptr<ArchiveRewriter> w = rewrite_tar(f, out.sink());
  w->replace(0, bytes_of("new a"));
  w->replace(2, bytes_of("cc"));
  w->finish();
  EXPECT_LE(out.largest, std::size_t{1} << 20);
  EXPECT_EQ(out.bytes,
            replace_tar_members(in, "t.tar",
                                {{0, bytes_of("new a")}, {2, bytes_of("cc")}}));
}

// A long name or pax header is read into memory: one over 16 MiB is
// refused, not allocated.
TEST(TarTest, AnOversizedPaxOrLongNameHeaderIsAnError) {
  for (char type : {'x', 'L'}) {
    Tar t;
    t.add("././@LongLink", std::string((std::size_t{16} << 20) + 1, 'n'), type);
    t.add("a", "1");
    const std::string message =
        error_of<FormatError>([&] { list(t.end().bytes()); });
    EXPECT_NE(message.find(" header of 16777217 bytes (over the limit of "
                           "16777216)"),
              std::string::npos)
        << message;
  }
}

// A stream is checked as it is read: the members before a damaged header
// come out, then the error. Misuse of the stream, and a read() that gives
// more than asked, are errors too; a read() that throws is passed through.
TEST(TarTest, AStreamGivesMembersUntilTheDamageThenTheError) {
  Tar t;
  t.add("a", "first");
  const std::size_t second = t.add("b", "second");
  t.add("c", "third");
  Bytes b = t.end().bytes();
  b[second + 10] ^= 0x01;  // the checksum no longer matches
  std::size_t at = 0;
  auto from_b = [&](uint8_t* dst, std::size_t n) {
    const std::size_t k = std::min(n, b.size() - at);
    std::memcpy(dst, b.data() + at, k);
    at += k;
    return k;
  };
  TarStream stream(from_b, "s.tar");
  EXPECT_NE(error_of<InvalidArgument>([&] {
              Bytes none;
              stream.read_data(none);
            }).find("without a member"),
            std::string::npos);
  std::optional<TarMember> m = stream.next();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->name, "a");
  Bytes wrong(4);
  EXPECT_NE(error_of<InvalidArgument>([&] {
              stream.read_data(wrong);
            }).find("member 'a' holds 5"),
            std::string::npos);
  const std::string message = error_of<FormatError>([&] { stream.next(); });
  EXPECT_NE(message.find("s.tar: bad tar header checksum"), std::string::npos)
      << message;
  EXPECT_NE(message.find("(at byte " + std::to_string(second) + ")"),
            std::string::npos)
      << message;

  TarStream greedy([](uint8_t*, std::size_t n) { return n + 1; }, "g.tar");
  EXPECT_NE(error_of<IoError>([&] {
              greedy.next();
            }).find("g.tar: a read of 4096 bytes returned 4097"),
            std::string::npos);
  TarStream failing(
      [](uint8_t*, std::size_t) -> std::size_t {
        throw std::runtime_error("the socket closed");
      },
      "f.tar");
  EXPECT_THROW(failing.next(), std::runtime_error);
  // After an error the stream cannot know where it is: it says so.
  for (TarStream* broken : {&stream, &failing}) {
    EXPECT_NE(error_of<InvalidArgument>([&] {
                broken->next();
              }).find("stopped at an earlier error"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace feedline::io
