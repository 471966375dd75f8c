// SPDX-License-Identifier: Apache-2.0
//
// Helpers for the feedline::io tests: bytes as Buffers, the message of an
// expected exception, and a temporary directory.

#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "feedline/base/buffer.h"

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

}  // namespace feedline::io::testing
