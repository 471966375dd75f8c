// SPDX-License-Identifier: Apache-2.0
//
// load_npy's header parser, table-driven: headers numpy.load reads give the
// same array; headers it refuses (and duplicated keys, which it would read
// differently from a lenient parser) raise FormatError. The Python suite
// checks the same tables against numpy itself.

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/io_testing.h"

namespace feedline::io {
namespace {

using testing::buffer_of;
using testing::Bytes;
using testing::error_of;

// An NPY file with `header` as is (no padding added) and 16 bytes of data:
// four little-endian int32 0, 1, 2, 3.
Bytes npy(const std::string& header, uint8_t major = 1, uint8_t minor = 0) {
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', major, minor};
  const auto n = static_cast<uint32_t>(header.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (int32_t v = 0; v < 4; ++v) {
    for (int i = 0; i < 4; ++i)
      out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  return out;
}

Buffer load(const Bytes& b) { return load_npy(buffer_of(b), "x.npy"); }

TEST(NpyTest, HeadersNumpyReads) {
  struct Case {
    std::string header;
    std::vector<int64_t> shape;
  };
  for (const Case& c : std::vector<Case>{
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }\n", {4}},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2)}",
            {2, 2}},
           {"{\"shape\": (2,2,), \"fortran_order\": False, \"descr\": \"<i4\"}",
            {2, 2}},
           {" \t{'descr':'<i4','fortran_order':False,'shape':(1,4)}  \n \n",
            {1, 4}},
           {"{\n 'descr': '<i4',\n 'fortran_order': False,\n 'shape': (4,)\n}",
            {4}},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': ( 4 , ) }", {4}},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (), }", {}},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (0, 3), }",
            {0, 3}},
           {"{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2), }",
            {2, 2}},
       }) {
    SCOPED_TRACE(c.header);
    Buffer a;
    ASSERT_NO_THROW(a = load(npy(c.header)));
    EXPECT_EQ(a.shape(), c.shape);
    EXPECT_EQ(a.dtype(), DType::kInt32);
  }
  const std::string h =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }";
  for (int major : {2, 3})
    EXPECT_EQ(load(npy(h, static_cast<uint8_t>(major))).shape()[0], 4);
}

TEST(NpyTest, FortranOrderIsTheBoolNotASubstring) {
  Buffer c =
      load(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2)}"));
  Buffer f =
      load(npy("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2)}"));
  EXPECT_EQ(c.strides(), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(f.strides(), (std::vector<int64_t>{4, 8}));
}

TEST(NpyTest, HeadersNumpyRefusesAreFormatErrors) {
  for (const std::string& header : std::vector<std::string>{
           // The keys: missing, extra, or not strings.
           "{'descr': '<i4', 'shape': (4,)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), 'x': 1}",
           "{}",
           // Values of the wrong type.
           "{'descr': '<i4', 'fortran_order': 0, 'shape': (4,)}",
           "{'descr': '<i4', 'fortran_order': 'True', 'shape': (4,)}",
           "{'descr': '<i4', 'fortran_order': Truex, 'shape': (4,)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (4)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': [4]}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': 4}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (4.0,)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (-1,)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (04,)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (4,,)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (,)}",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (2 2,)}",
           "{'descr': 4, 'fortran_order': False, 'shape': (4,)}",
           "{'descr': '<i4, 'fortran_order': False, 'shape': (4,)}",
           // Not a dict literal, or something after it.
           "{'descr': '<i4', 'fortran_order': False, 'shape': (4,)",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (4,)} x",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (4,)}}",
           std::string("{'descr': '<i4', 'fortran_order': False, 'shape': "
                       "(4,)}\0",
                       56),
           "{'descr': '<i4' 'fortran_order': False, 'shape': (4,)}",
           "{'descr': '<i4',, 'fortran_order': False, 'shape': (4,)}",
           "dict(descr='<i4', fortran_order=False, shape=(4,))",
       }) {
    SCOPED_TRACE(header);
    EXPECT_THROW(load(npy(header)), FormatError);
  }
}

// numpy takes the last of duplicated keys; a parser that took the first gave
// another array. Both refuse here: no writer makes such a header.
TEST(NpyTest, DuplicateKeysAreRefused) {
  for (const std::string& header : {
           std::string("{'descr': '<i4', 'fortran_order': False, 'shape': "
                       "(4,), 'shape': (2, 2)}"),
           std::string("{'descr': '<i4', 'descr': '<u4', 'fortran_order': "
                       "False, 'shape': (4,)}"),
           std::string("{'descr': '<i4', 'fortran_order': True, "
                       "'fortran_order': False, 'shape': (2, 2)}"),
       }) {
    const std::string message =
        error_of<FormatError>([&] { load(npy(header)); });
    EXPECT_NE(message.find("repeats the key"), std::string::npos) << message;
    EXPECT_NE(message.find("x.npy"), std::string::npos) << message;
  }
}

TEST(NpyTest, VersionsAndHeaderLength) {
  const std::string h =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (4,)}";
  for (std::pair<uint8_t, uint8_t> v :
       {std::pair<uint8_t, uint8_t>{1, 1}, {2, 1}, {0, 0}, {4, 0}}) {
    EXPECT_NE(error_of<FormatError>([&] {
                load(npy(h, v.first, v.second));
              }).find("version"),
              std::string::npos);
  }
  // numpy refuses headers longer than 10000 bytes; padding counts.
  std::string at_limit = h + std::string(10000 - h.size() - 1, ' ') + "\n";
  EXPECT_EQ(load(npy(at_limit, 2)).shape()[0], 4);
  EXPECT_NE(error_of<FormatError>([&] {
              load(npy(at_limit + " ", 2));
            }).find("limit"),
            std::string::npos);
  // A header length that runs past the input.
  Bytes b = npy(h);
  b[8] = 0xFF;
  EXPECT_NE(error_of<FormatError>([&] { load(b); }).find("truncated"),
            std::string::npos);
}

// Python 2 wrote a long dimension with an 'L' suffix; numpy reads it in
// versions 1.0 and 2.0 only. Here it must follow the digits at once (numpy,
// filtering tokens, also takes "4 L", which no writer made).
TEST(NpyTest, Python2LongSuffixAsNumpyReadsIt) {
  const std::string h =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 2L), }";
  for (uint8_t major : {uint8_t{1}, uint8_t{2}})
    EXPECT_EQ(load(npy(h, major)).shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_THROW(load(npy(h, 3)), FormatError);
  for (std::string shape : {"(4LL,)", "(4l,)", "(L,)", "(4L)", "(4 L,)"}) {
    SCOPED_TRACE(shape);
    EXPECT_THROW(load(npy("{'descr': '<i4', 'fortran_order': False, "
                          "'shape': " +
                          shape + "}")),
                 FormatError);
  }
}

TEST(NpyTest, DescrMustBeOneNumpyReadsAlike) {
  for (std::string descr : {"<i04", "i4", "<i3", "<U4", "|O", "<i"}) {
    SCOPED_TRACE(descr);
    EXPECT_THROW(load(npy("{'descr': '" + descr +
                          "', 'fortran_order': False, 'shape': (4,)}")),
                 FormatError);
  }
  EXPECT_THROW(load(npy("{'descr': [('a', '<i4')], 'fortran_order': False, "
                        "'shape': (4,)}")),
               FormatError);
}

}  // namespace
}  // namespace feedline::io
