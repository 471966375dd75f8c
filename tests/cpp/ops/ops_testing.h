// SPDX-License-Identifier: Apache-2.0
//
// What the ops tests share: calling an op directly, a temporary directory,
// and test images encoded with libjpeg-turbo and libpng.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "feedline/base/buffer.h"
#include "feedline/ops/items.h"
#include "feedline/pipeline/op.h"
#include "testing/test_images.h"

namespace feedline::ops::testing {

namespace fs = std::filesystem;

// One call of map op `op`.
inline Item call(const OpPtr& op, Item input) {
  EXPECT_EQ(op->kind(), OpKind::kMap);
  return static_cast<MapOp&>(*op).call(std::move(input));
}

// Every result of generator op `op` for `input`.
inline std::vector<Item> pull(const OpPtr& op, Item input) {
  EXPECT_EQ(op->kind(), OpKind::kGenerator);
  std::unique_ptr<ItemGenerator> gen =
      static_cast<GeneratorOp&>(*op).start(std::move(input));
  std::vector<Item> out;
  Item item;
  while (gen->next(&item)) out.push_back(std::move(item));
  return out;
}

// `bytes` as a Buffer (a copy).
inline Buffer buffer_of(const std::vector<uint8_t>& bytes) {
  Buffer b =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(bytes.size())});
  if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
  return b;
}

inline EncodedFile encoded(std::string name, const std::vector<uint8_t>& b) {
  return EncodedFile{std::move(name), buffer_of(b)};
}

inline std::vector<uint8_t> bytes_of(const Buffer& b) {
  const auto* p = b.data_as<const uint8_t>();
  return {p, p + b.nbytes()};
}

inline void write_file(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A directory removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(fs::temp_directory_path() /
              ("feedline_" + tag + "_" + std::to_string(getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  fs::path path_;
};

// Runs a shell command; the test fails if it does.
inline void run(const std::string& cmd) {
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Test images of w x h pixels: the smooth pattern of testing/test_images.h.
inline std::vector<uint8_t> pattern(int w, int h) {
  return feedline::testing::pattern(w, h);
}
inline std::vector<uint8_t> encode_jpeg(int w, int h) {
  return feedline::testing::encode_jpeg(pattern(w, h), w, h);
}
inline std::vector<uint8_t> encode_png(int w, int h) {
  return feedline::testing::encode_png(pattern(w, h), w, h);
}

// The message of what `f` throws, or "(no error)".
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace feedline::ops::testing
