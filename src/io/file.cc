// SPDX-License-Identifier: Apache-2.0

#include "feedline/io/file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "io/reader.h"

namespace feedline {
namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  // std::generic_category().message(): strerror's text, thread-safe.
  throw IoError(path + ": " + what + ": " +
                std::generic_category().message(err));
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens a regular file for reading and returns its descriptor, with its
// size in `*st`. open() takes a C string: a NUL inside `path` would cut it
// there and open another file, so such a path is refused before it reaches
// the system. The open does not block (O_NONBLOCK), so that a FIFO with no
// writer is refused as not a regular file instead of hanging the caller.
int open_regular(const std::string& path, struct stat* st) {
  if (path.find('\0') != std::string::npos) {
    throw InvalidArgument("path " + io::quoted(path) + " contains a NUL byte");
  }
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) fail(path, "cannot open", errno);
  if (::fstat(f.fd, st) != 0) fail(path, "cannot stat", errno);
  if (!S_ISREG(st->st_mode)) throw IoError(path + ": not a regular file");
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags < 0 || ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    fail(path, "cannot set the descriptor's flags", errno);
  return std::exchange(f.fd, -1);
}

}  // namespace

Buffer read_file(const std::string& path) {
  struct stat st {};
  Fd f{open_regular(path, &st)};
  Buffer out =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(st.st_size)});
  auto* p = out.data_as<uint8_t>();
  std::size_t done = 0;
  const auto size = static_cast<std::size_t>(st.st_size);
  while (done < size) {
    ssize_t n = ::read(f.fd, p + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "read failed", errno);
    }
    if (n == 0) throw IoError(path + ": file shrank while being read");
    done += static_cast<std::size_t>(n);
  }
  return out;
}

Buffer map_file(const std::string& path) {
  struct stat st {};
  Fd f{open_regular(path, &st)};
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) return Buffer::allocate(DType::kUint8, {0});
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (p == MAP_FAILED) fail(path, "cannot map", errno);
  // The descriptor may close now; the mapping stays until the last view.
  std::shared_ptr<void> owner(p, [size](void* q) { ::munmap(q, size); });
  return Buffer::view(std::move(owner), p, DType::kUint8,
                      {static_cast<int64_t>(size)}, {},
                      /*writable=*/false);
}

FileReader::FileReader(const std::string& path) : path_(path) {
  struct stat st {};
  fd_ = open_regular(path, &st);
  size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read(uint64_t offset, std::span<uint8_t> out) const {
  if (offset > size_ || out.size() > size_ - offset) {
    throw InvalidArgument(path_ + ": " + std::to_string(out.size()) +
                          " bytes at offset " + std::to_string(offset) +
                          " lie past its end (" + std::to_string(size_) +
                          " bytes)");
  }
  while (!out.empty()) {
    const ssize_t n =
        ::pread(fd_, out.data(), out.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path_, "read failed", errno);
    }
    if (n == 0) {
      // Where it ends now (it may have been cut well before this read).
      struct stat st;
      const uint64_t now =
          ::fstat(fd_, &st) == 0
              ? std::min(static_cast<uint64_t>(st.st_size), offset)
              : offset;
      throw IoError(path_ + ": the file ends at byte " + std::to_string(now) +
                    ", shorter than the " + std::to_string(size_) +
                    " bytes it had when opened");
    }
    offset += static_cast<uint64_t>(n);
    out = out.subspan(static_cast<std::size_t>(n));
  }
}

Buffer FileReader::read(uint64_t offset, uint64_t n) const {
  Buffer out = Buffer::allocate(DType::kUint8, {static_cast<int64_t>(n)});
  read(offset, std::span(out.data_as<uint8_t>(), static_cast<std::size_t>(n)));
  return out;
}

FileWriter::FileWriter(const std::string& path) : path_(path) {
  if (path.find('\0') != std::string::npos) {
    throw InvalidArgument("path " + io::quoted(path) + " contains a NUL byte");
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail(path, "cannot open for writing", errno);
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(std::span<const uint8_t> bytes) {
  if (fd_ < 0) throw IoError(path_ + ": written after it was closed");
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path_, "write failed", errno);
    }
    if (n == 0) fail(path_, "write made no progress", ENOSPC);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void FileWriter::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  // Linux releases the descriptor even when close() fails: no retry.
  if (::close(fd) != 0 && errno != EINTR) fail(path_, "close failed", errno);
}

}  // namespace feedline
