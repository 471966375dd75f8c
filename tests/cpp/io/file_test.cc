// SPDX-License-Identifier: Apache-2.0
//
// read_file and map_file: what a path may hold, and what a read copy
// guarantees once the file changes. FileReader: reads at any offset, and
// a file that shrinks is an error. FileWriter: what it writes and how it
// fails.

#include "feedline/io/file.h"

#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "io/io_testing.h"

namespace feedline::io {
namespace {

using testing::Bytes;
using testing::bytes_of;
using testing::error_of;
using testing::TempDir;
using testing::write_file;

// n bytes that differ from their neighbours.
Bytes patterned(std::size_t n) {
  Bytes data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 7);
  return data;
}

// A NUL cuts a C string: "a.bin\0.txt" would open "a.bin". Both entry
// points refuse such a path, even when the file before the NUL exists, and
// show the NUL in the message.
TEST(FileTest, PathWithANulIsRefusedNotCut) {
  TempDir dir("nul");
  write_file(dir / "a.bin", {1, 2, 3});
  const std::string path = dir / "a.bin" + std::string("\0.txt", 5);
  for (auto* read : {&read_file, &map_file}) {
    const std::string message =
        error_of<InvalidArgument>([&] { (*read)(path); });
    EXPECT_NE(message.find("a.bin\\x00.txt'"), std::string::npos) << message;
    EXPECT_NE(message.find("NUL"), std::string::npos) << message;
  }
}

TEST(FileTest, OtherBytesOfAPathAreEscapedInTheMessage) {
  const std::string path = std::string("caf\xc3\xa9-\xe9\n'\0", 10);
  const std::string message =
      error_of<InvalidArgument>([&] { read_file(path); });
  // Valid UTF-8 stays, a stray Latin-1 byte and a newline are escaped.
  EXPECT_NE(message.find("'caf\xc3\xa9-\\xe9\\x0a\\'\\x00'"), std::string::npos)
      << message;
}

// read_file() copies: truncating or rewriting the file afterwards changes
// nothing in the Buffer and cannot fault.
TEST(FileTest, ReadCopyOutlivesTruncation) {
  TempDir dir("truncate");
  const std::string path = dir / "a.bin";
  const Bytes data = patterned(3 * 4096 + 17);
  write_file(path, data);
  Buffer b = read_file(path);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  EXPECT_EQ(bytes_of(b), data);
  write_file(path, {9, 9});
  EXPECT_EQ(bytes_of(b), data);
  EXPECT_TRUE(b.writable());
}

TEST(FileTest, MissingFileAndDirectoryNameThePath) {
  TempDir dir("missing");
  for (auto* read : {&read_file, &map_file}) {
    EXPECT_NE(error_of<IoError>([&] { (*read)(dir / "nope"); }).find("nope"),
              std::string::npos);
    EXPECT_NE(error_of<IoError>([&] {
                (*read)(dir / "");
              }).find("not a regular file"),
              std::string::npos);
  }
}

TEST(FileTest, TheReaderReadsAnyRangeAndAShrunkFileIsAnError) {
  TempDir dir("reader");
  const std::string path = dir / "a.bin";
  const Bytes data = patterned(3 * 4096 + 17);
  write_file(path, data);
  const FileReader f(path);
  EXPECT_EQ(f.size(), data.size());
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(bytes_of(f.read(4095, 3)), Bytes(&data[4095], &data[4098]));
  EXPECT_EQ(bytes_of(f.read(0, data.size())), data);
  EXPECT_EQ(f.read(data.size(), 0).nbytes(), 0u);
  EXPECT_NE(error_of<InvalidArgument>([&] {
              f.read(data.size() - 2, 3);
            }).find("lie past its end"),
            std::string::npos);
  // Shrunk after it was opened: the read names the file and what is left.
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  EXPECT_EQ(bytes_of(f.read(90, 10)), Bytes(&data[90], &data[100]));
  const std::string message = error_of<IoError>([&] { f.read(90, 20); });
  EXPECT_NE(message.find(path + ": the file ends at byte 100, shorter than "
                                "the 12305 bytes it had when opened"),
            std::string::npos)
      << message;
  // A read starting past where it now ends names where it ends, not where
  // the read started.
  const std::string past = error_of<IoError>([&] { f.read(4096, 10); });
  EXPECT_NE(past.find(": the file ends at byte 100,"), std::string::npos)
      << past;
  EXPECT_NE(error_of<IoError>([&] { FileReader(dir / "nope"); }).find("nope"),
            std::string::npos);
  EXPECT_NE(error_of<IoError>([&] {
              FileReader(dir / "");
            }).find("not a regular file"),
            std::string::npos);
}

TEST(FileTest, TheWriterTruncatesAppendsAndNamesWhatFails) {
  TempDir dir("writer");
  const std::string path = dir / "out.bin";
  write_file(path, Bytes(5000, 7));  // an older, longer file
  {
    FileWriter w(path);
    w.write(bytes_of("abc"));
    w.write(Bytes{});
    w.write(bytes_of("de"));
    w.close();
    w.close();  // once is enough; again does nothing
    EXPECT_NE(error_of<IoError>([&] {
                w.write(bytes_of("f"));
              }).find("written after it was closed"),
              std::string::npos);
  }
  EXPECT_EQ(bytes_of(read_file(path)), bytes_of("abcde"));
  EXPECT_NE(error_of<IoError>([&] {
              FileWriter w(dir / "no/such/dir");
            }).find("cannot open for writing"),
            std::string::npos);
  EXPECT_THROW(FileWriter(path + std::string("\0x", 2)), InvalidArgument);
  // A write the device refuses (here /dev/full: no space) names the path.
  FileWriter full("/dev/full");
  EXPECT_NE(error_of<IoError>([&] {
              full.write(bytes_of("x"));
            }).find("/dev/full: write failed: No space left on device"),
            std::string::npos);
}

TEST(FileTest, AFifoIsRefusedNotWaitedOn) {
  // open() of a FIFO for reading waits for a writer; no writer comes here,
  // so without a non-blocking open the read would never return.
  TempDir dir("fifo");
  const std::string path = dir / "pipe";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  for (auto* read : {&read_file, &map_file}) {
    EXPECT_NE(
        error_of<IoError>([&] { (*read)(path); }).find("not a regular file"),
        std::string::npos);
  }
}

}  // namespace
}  // namespace feedline::io
