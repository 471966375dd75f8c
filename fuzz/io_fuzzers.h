// SPDX-License-Identifier: Apache-2.0
//
// Shared body of the parser fuzz targets: wrap the input in a Buffer (as the
// Python layer does) and run `parse`; a FormatError is an expected outcome,
// anything else (a crash, a sanitizer report, another exception) a finding.

#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>

#include <sys/mman.h>
#include <unistd.h>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/io/file.h"

namespace feedline::fuzz {

// A copy in a heap block of exactly `size` bytes, so that ASan catches any
// read past the end.
inline Buffer exact_copy(const uint8_t* data, size_t size) {
  std::shared_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  return Buffer::view(std::shared_ptr<const void>(copy, copy.get()), copy.get(),
                      DType::kUint8, {static_cast<int64_t>(size)});
}

template <typename F>
void run(const uint8_t* data, size_t size, F&& parse) {
  try {
    parse(exact_copy(data, size));
  } catch (const FormatError&) {
  }
}

template <typename T>
bool equal(const T& a, const T& b) {
  return a == b;
}
inline bool equal(const Buffer& a, const Buffer& b) {
  return a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

// The input as a file (a memfd), for the parsers' forms that read a
// FileReader.
class InputFile {
 public:
  explicit InputFile(std::span<const uint8_t> bytes)
      : fd_(::memfd_create("fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    for (std::size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
    reader_.emplace(path_);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const FileReader& reader() const { return *reader_; }
  // The name in_memory() is given in same().
  const std::string& name() const { return path_; }

  // Runs `in_memory(name)` with the file's path as the input's name, and
  // `from_file()`: both must return equal results, or throw exceptions of
  // the same type and message; else a finding. Returns in_memory()'s
  // result, or rethrows its exception.
  template <typename M, typename F>
  auto same(M in_memory, F from_file) const {
    std::optional<decltype(in_memory(path_))> file_result;
    std::string file_error;
    const std::type_info* file_type = nullptr;
    try {
      file_result.emplace(from_file());
    } catch (const std::exception& e) {
      file_error = e.what();
      file_type = &typeid(e);
    }
    try {
      auto result = in_memory(path_);
      if (!file_result || !equal(*file_result, result)) std::abort();
      return result;
    } catch (const std::exception& e) {
      if (file_result || file_error != e.what() || *file_type != typeid(e))
        std::abort();
      throw;
    }
  }

 private:
  int fd_;
  std::string path_;
  std::optional<FileReader> reader_;
};

}  // namespace feedline::fuzz
