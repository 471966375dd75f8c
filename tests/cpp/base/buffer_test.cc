// SPDX-License-Identifier: Apache-2.0
//
// The dtype tables of base/buffer.h (NumPy and DLPack names of each dtype)
// and Buffer::view_as().

#include "feedline/base/buffer.h"

#include <cstdint>
#include <span>
#include <string>

#include <gtest/gtest.h>

#include "feedline/base/error.h"

namespace feedline {
namespace {

TEST(BufferTest, DTypeNamesRoundTrip) {
  for (int d = 0; d <= static_cast<int>(DType::kComplex128); ++d) {
    const auto t = static_cast<DType>(d);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_THROW(dtype_from_name("float8"), InvalidArgument);
}

TEST(BufferTest, NumpyTypestrAndDlpackCodes) {
  EXPECT_EQ(numpy_typestr(DType::kUint8), "|u1");
  EXPECT_EQ(numpy_typestr(DType::kBool), "|b1");
  EXPECT_EQ(numpy_typestr(DType::kInt16), "<i2");
  EXPECT_EQ(numpy_typestr(DType::kFloat32), "<f4");
  EXPECT_EQ(numpy_typestr(DType::kComplex128), "<c16");
  EXPECT_EQ(dlpack_type_code(DType::kInt64), 0);
  EXPECT_EQ(dlpack_type_code(DType::kUint16), 1);
  EXPECT_EQ(dlpack_type_code(DType::kFloat16), 2);
  EXPECT_EQ(dlpack_type_code(DType::kComplex64), 5);
  EXPECT_EQ(dlpack_type_code(DType::kBool), 6);
}

TEST(BufferTest, ViewAsSharesTheBytesWhenTheSizeFits) {
  Buffer bytes = Buffer::allocate(DType::kUint8, {16});
  Buffer v = bytes.view_as(DType::kInt32, {2, 2});
  EXPECT_EQ(v.data(), bytes.data());
  EXPECT_EQ(v.to_string(), "int32[2, 2]");
  EXPECT_EQ(v.owner(), bytes.owner());
  EXPECT_THROW(bytes.view_as(DType::kInt32, {3}), InvalidArgument);
  Buffer strided =
      Buffer::view(bytes.owner(), bytes.data(), DType::kUint8, {4}, {4});
  EXPECT_THROW(strided.view_as(DType::kInt32, {1}), InvalidArgument);
}

TEST(BufferTest, BytesSpansTheWholeBuffer) {
  Buffer b = Buffer::allocate(DType::kInt32, {2, 3});
  std::span<const uint8_t> bytes = b.bytes();
  EXPECT_EQ(static_cast<const void*>(bytes.data()), b.data());
  EXPECT_EQ(bytes.size(), 24u);
}

}  // namespace
}  // namespace feedline
