// SPDX-License-Identifier: Apache-2.0
//
// Helpers for the feedline::io tests: bytes as Buffers, the message of an
// expected exception, and a temporary directory.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include <unistd.h>

#include "feedline/base/buffer.h"
#include "feedline/io/file.h"
#include "feedline/io/formats.h"

namespace feedline::io::testing {

using Bytes = std::vector<uint8_t>;

inline Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

// `bytes` as a Buffer (a copy, exactly as long, so ASan sees an overrun).
inline Buffer buffer_of(const Bytes& bytes) {
  Buffer b =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(bytes.size())});
  if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
  return b;
}

inline Bytes bytes_of(const Buffer& b) {
  const auto* p = b.data_as<const uint8_t>();
  return {p, p + b.nbytes()};
}

// The what() of the exception of type E that `f` throws; fails the test and
// returns "" when it throws nothing or something else.
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

inline void write_file(const std::filesystem::path& p, const Bytes& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The bytes this process has read with read() and pread() so far
// (/proc/self/io's rchar).
inline uint64_t bytes_read() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  ADD_FAILURE() << "no rchar in /proc/self/io";
  return 0;
}

// A sink that counts the bytes it gets and keeps the largest piece.
struct PieceSink {
  Bytes bytes;
  std::size_t largest = 0;
  ByteSink sink() {
    return [this](std::span<const uint8_t> b) {
      largest = std::max(largest, b.size());
      bytes.insert(bytes.end(), b.begin(), b.end());
    };
  }
};

// A directory removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("feedline_io_" + tag + "_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

// What `in_memory()` gives, checked to be what `from_file(file)` gives for
// the same bytes read from a file (a FileReader of `bytes` written to
// `name` in a temporary directory): the same result, or an exception of
// the same type whose message, with the file's path read as `name`, is
// the same. Rethrows in_memory()'s exception.
template <typename Memory, typename File>
auto same_from_file(const Bytes& bytes, const std::string& name,
                    Memory in_memory, File from_file) {
  TempDir dir("from_file");
  const std::string path = dir / name;
  write_file(path, bytes);
  const FileReader file(path);
  std::optional<decltype(in_memory())> file_result;
  std::string file_error;
  const std::type_info* file_type = nullptr;
  try {
    file_result.emplace(from_file(file));
  } catch (const std::exception& e) {
    file_error = e.what();
    file_type = &typeid(e);
    for (std::size_t at; (at = file_error.find(path)) != std::string::npos;)
      file_error.replace(at, path.size(), name);
  }
  try {
    auto result = in_memory();
    EXPECT_TRUE(file_result.has_value()) << "from the file: " << file_error;
    if (file_result) {
      EXPECT_TRUE(*file_result == result) << "from the file";
    }
    return result;
  } catch (const std::exception& e) {
    EXPECT_FALSE(file_result.has_value()) << "only in memory: " << e.what();
    EXPECT_EQ(file_error, e.what());
    EXPECT_TRUE(file_type != nullptr && *file_type == typeid(e));
    throw;
  }
}

}  // namespace feedline::io::testing
