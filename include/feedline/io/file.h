// SPDX-License-Identifier: Apache-2.0
//
// Reading whole files into Buffers, and writing files a piece at a time.

#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "feedline/base/buffer.h"

namespace feedline {

// Returns the bytes of the file at `path` as a 1-D uint8 Buffer: a copy, so
// the result does not change (and reading it cannot fault) when the file is
// changed or truncated afterwards.
// Throws: InvalidArgument when `path` contains a NUL byte (the path, quoted
// with escapes, in the message); IoError naming the path and the reason
// (missing, a directory, unreadable, short read).
Buffer read_file(const std::string& path);

// Returns the file at `path` memory-mapped read-only as a 1-D uint8 Buffer:
// no copy, pages loaded as they are read; the mapping lives as long as any
// view of it. Opt-in only (every loader reads paths with read_file() unless
// asked to map): the file must not shrink while mapped, since touching a
// page past its new end raises SIGBUS and kills the process, as with any
// mapping, and changes to the file show through. An empty file gives an
// empty Buffer.
// Throws: InvalidArgument for a path with a NUL byte; IoError naming the
// path.
Buffer map_file(const std::string& path);

// A file read a piece at a time, at any offset and from any thread at once
// (pread): for inputs too large to hold in memory, such as a dataset shard
// of many gigabytes. Its size is the one it had when opened; a read past
// the end of a file that has shrunk since is an error, not a fault.
// Throws: InvalidArgument for a path with a NUL byte; IoError naming the
// path and the reason (missing, a directory, unreadable).
class FileReader {
 public:
  explicit FileReader(const std::string& path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Fills `out` with the bytes at `offset`.
  // Throws: InvalidArgument when they lie past size(); IoError naming the
  // path when the read fails or the file ends before them (it shrank).
  void read(uint64_t offset, std::span<uint8_t> out) const;
  // The n bytes at `offset` as a new 1-D uint8 Buffer. Throws as read().
  Buffer read(uint64_t offset, uint64_t n) const;

 private:
  std::string path_;
  uint64_t size_ = 0;
  int fd_ = -1;
};

// Writes a file from its start, a piece at a time: created (mode 0666 less
// the umask) or truncated when opened, closed by close() or, with errors
// ignored, the destructor. For output too large to assemble in memory (a
// rewritten archive); a caller that wants readers never to see part of the
// file writes to a temporary name and renames it.
// Throws: InvalidArgument for a path with a NUL byte; IoError naming the
// path and the reason (cannot open, a write that fails or makes no
// progress, as on a full disk, a failed close).
class FileWriter {
 public:
  explicit FileWriter(const std::string& path);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void write(std::span<const uint8_t> bytes);
  // Closes the file, reporting an error a deferred write shows only then.
  // Writing after it throws IoError.
  void close();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace feedline
