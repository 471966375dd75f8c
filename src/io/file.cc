// SPDX-License-Identifier: Apache-2.0

#include "feedline/io/file.h"

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

}  // namespace feedline
