// The .npy header: what the engine writes it reads back, headers written the
// way numpy writes them parse, and malformed ones fail with the right error.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "formats/npy.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::expect_error_mentioning;

const std::vector<DType> kAllDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32};

// A version 1.0 header around `dict`, padded as numpy pads it (to 64 bytes).
std::string v1_header(const std::string& dict) {
  size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  size_t len = total - 10;
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += dict;
  out.append(len - dict.size() - 1, ' ');
  out += '\n';
  return out;
}

// A version 2.0 (or 3.0) header: the length field is four bytes.
std::string v2_header(const std::string& dict, char major = '\x02') {
  size_t len = dict.size() + 1;
  std::string out = "\x93NUMPY";
  out += major;
  out += '\x00';
  for (int i = 0; i < 4; ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + dict + '\n';
}

TEST(NpyHeader, MadeHeaderRoundTripsForEveryDtypeAndShape) {
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {1}, {5}, {3, 4}, {2, 0, 7}, {2, 3, 4, 5}, {int64_t{1} << 40}};
  for (DType dt : kAllDTypes) {
    for (const auto& shape : shapes) {
      std::string header = make_npy_header(dt, shape);
      NpyHeader parsed = parse_npy_header(header, "mem.npy");
      EXPECT_EQ(parsed.dtype, dt);
      EXPECT_EQ(parsed.shape, shape);
      EXPECT_EQ(parsed.data_offset, header.size());
    }
  }
}

TEST(NpyHeader, MadeHeaderLengthIsAMultipleOfTheDataAlignment) {
  // Many dimensions push the dict past one alignment unit.
  std::vector<int64_t> long_shape(1500, 1);
  for (const auto& shape : {std::vector<int64_t>{}, std::vector<int64_t>{7}, long_shape}) {
    std::string header = make_npy_header(DType::f32, shape);
    EXPECT_EQ(header.size() % kDataAlignment, 0u) << header.size();
    EXPECT_GT(header.size(), 0u);
  }
  EXPECT_GT(make_npy_header(DType::f32, long_shape).size(), kDataAlignment);
}

TEST(NpyHeader, MadeHeaderFollowsTheVersion1Layout) {
  std::string header = make_npy_header(DType::f64, {3, 4});
  ASSERT_GE(header.size(), 10u);
  EXPECT_EQ(header.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(header[6], '\x01');
  EXPECT_EQ(header[7], '\x00');
  size_t len = static_cast<unsigned char>(header[8]) | (static_cast<unsigned char>(header[9]) << 8);
  EXPECT_EQ(len, header.size() - 10);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("'descr': '<f8'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': (3, 4)"), std::string::npos) << header;
}

TEST(NpyHeader, OneDimensionalShapeIsWrittenAsAPythonOneTuple) {
  // "(5)" would be an int to Python, so numpy could not read the file.
  std::string header = make_npy_header(DType::f32, {5});
  EXPECT_NE(header.find("'shape': (5,)"), std::string::npos) << header;
  std::string scalar = make_npy_header(DType::f32, {});
  EXPECT_NE(scalar.find("'shape': ()"), std::string::npos) << scalar;
}

TEST(NpyHeader, HeaderLengthComesFromTheFirstBytes) {
  std::string header = make_npy_header(DType::i32, {9, 9});
  EXPECT_EQ(npy_header_length(header.substr(0, 12), "x.npy"), header.size());
  std::string v2 = v2_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  EXPECT_EQ(npy_header_length(v2.substr(0, 12), "x.npy"), v2.size());
}

TEST(NpyHeader, ParsesHeadersWrittenTheWayNumpyWritesThem) {
  NpyHeader a =
      parse_npy_header(v1_header("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"), "a");
  EXPECT_EQ(a.dtype, DType::f64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(a.data_offset, 128u);  // 10-byte prefix + dict + padding, a multiple of 64

  NpyHeader b =
      parse_npy_header(v1_header("{'descr': '<f2', 'fortran_order': False, 'shape': (), }"), "b");
  EXPECT_EQ(b.dtype, DType::f16);
  EXPECT_TRUE(b.shape.empty());

  // Key order is free, '=' means native (little-endian here) byte order.
  NpyHeader c =
      parse_npy_header(v1_header("{'shape': (2, 3), 'fortran_order': False, 'descr': '=i4'}"), "c");
  EXPECT_EQ(c.dtype, DType::i32);
  EXPECT_EQ(c.shape, (std::vector<int64_t>{2, 3}));

  NpyHeader d = parse_npy_header(
      v2_header("{'descr': 'bfloat16', 'fortran_order': False, 'shape': (4, 1), }"), "d");
  EXPECT_EQ(d.dtype, DType::bf16);
  EXPECT_EQ(d.shape, (std::vector<int64_t>{4, 1}));
}

TEST(NpyHeader, RejectsBadMagicWithValueError) {
  std::string header = make_npy_header(DType::f32, {2});
  header[1] = 'X';
  expect_error_mentioning<ValueError>([&] { parse_npy_header(header, "/data/bad.npy"); },
                                      {"/data/bad.npy"});
}

TEST(NpyHeader, RejectsFortranOrderWithValueError) {
  std::string header = v1_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }");
  expect_error_mentioning<ValueError>([&] { parse_npy_header(header, "f.npy"); }, {"Fortran"});
}

TEST(NpyHeader, RejectsStructuredDtypeWithTypeError) {
  std::string header =
      v1_header("{'descr': [('x', '<f4'), ('y', '<f4')], 'fortran_order': False, 'shape': (2,), }");
  expect_error_mentioning<TypeError>([&] { parse_npy_header(header, "s.npy"); }, {"structured"});
}

TEST(NpyHeader, RejectsUnsupportedDescrWithTypeErrorNamingIt) {
  for (std::string descr : {">i8", ">f4", "<V1", "<c32", "O", "int4"}) {
    std::string header =
        v1_header("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }");
    expect_error_mentioning<TypeError>([&] { parse_npy_header(header, "u.npy"); }, {descr});
  }
}

TEST(NpyHeader, RejectsTruncatedHeadersWithValueError) {
  std::string header = make_npy_header(DType::f32, {3, 4});
  // Cut inside the prefix, inside the dict, and one byte short of the end.
  for (size_t keep : {size_t{0}, size_t{5}, size_t{9}, size_t{40}, header.size() - 1}) {
    EXPECT_THROW(parse_npy_header(header.substr(0, keep), "t.npy"), ValueError) << keep;
  }
  std::string v2 = v2_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  EXPECT_THROW(parse_npy_header(v2.substr(0, 11), "t2.npy"), ValueError);
}

TEST(NpyHeader, RejectsMalformedDictsWithValueError) {
  const std::vector<std::string> dicts = {
      "{'descr': '<f4', 'fortran_order': False}",                         // no shape
      "{'fortran_order': False, 'shape': (2,)}",                          // no descr
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",  // unknown key
      "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,}",
      "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
      "['descr', '<f4']",
  };
  for (const auto& dict : dicts) {
    EXPECT_THROW(parse_npy_header(v1_header(dict), "m.npy"), ValueError) << dict;
  }
}

TEST(NpyHeader, RejectsAShapeDimensionTooLargeForInt64WithValueError) {
  std::string header =
      v1_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }");
  EXPECT_THROW(parse_npy_header(header, "big.npy"), ValueError);
}

TEST(NpyHeader, RefusesMoreDimensionsThanNumpyReads) {
  auto dict = [](size_t ndim) {
    std::string shape;
    for (size_t i = 0; i < ndim; ++i) shape += "1, ";
    return "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  };
  EXPECT_EQ(parse_npy_header(v1_header(dict(kMaxNpyDims)), "d.npy").shape.size(), kMaxNpyDims);
  EXPECT_THROW(parse_npy_header(v1_header(dict(kMaxNpyDims + 1)), "d.npy"), ValueError);
}

TEST(NpyHeader, RejectsUnknownFormatVersionWithValueError) {
  std::string header = make_npy_header(DType::f32, {2});
  header[6] = '\x07';
  expect_error_mentioning<ValueError>([&] { parse_npy_header(header, "v.npy"); }, {"version 7"});
}

TEST(NpyHeader, RejectsANonZeroMinorVersionAsNumpyDoes) {
  std::string header = make_npy_header(DType::f32, {2});
  header[7] = '\x01';
  expect_error_mentioning<ValueError>([&] { parse_npy_header(header, "v.npy"); },
                                      {"v.npy", "version 1.1"});
}

const std::string kDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";

TEST(NpyHeader, RefusesAHeaderLongerThanNumpysLimitFromItsLengthField) {
  // The length field alone decides: the 4 GiB header it announces is never read.
  std::string huge = v2_header(kDict);
  for (int i = 0; i < 4; ++i) huge[8 + i] = '\xff';
  expect_error_mentioning<ValueError>([&] { npy_header_length(huge.substr(0, 12), "h.npy"); },
                                      {"h.npy", "4294967295", "10000", "max_header_size"});
  // Exactly the limit is accepted, one byte over is not.
  std::string at_limit = v2_header(kDict + std::string(kMaxNpyHeaderText - kDict.size() - 1, ' '));
  EXPECT_EQ(npy_header_length(at_limit.substr(0, 12), "h.npy"), 12 + kMaxNpyHeaderText);
  EXPECT_EQ(parse_npy_header(at_limit, "h.npy").shape, (std::vector<int64_t>{2}));
  std::string over = v2_header(kDict + std::string(kMaxNpyHeaderText - kDict.size(), ' '));
  EXPECT_THROW(npy_header_length(over.substr(0, 12), "h.npy"), ValueError);
}

TEST(NpyHeader, NonAsciiBytesAreAValueErrorWithAPrintableMessage) {
  for (std::string bad : {"\xe9", "\xff\xfe", "\xc3\xa9"}) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), " + bad + "}";
    try {
      parse_npy_header(v1_header(dict), "/d/u.npy");
      ADD_FAILURE() << "accepted a non-ASCII header";
    } catch (const ValueError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("/d/u.npy"), std::string::npos) << what;
      EXPECT_NE(what.find("non-ASCII"), std::string::npos) << what;
      // The message itself is ASCII: Python decodes it without a UnicodeDecodeError.
      for (char c : what) EXPECT_LT(static_cast<unsigned char>(c), 0x80) << what;
    }
  }
}

TEST(NpyHeader, RefusesTextPythonWouldReadDifferentlyOrNotAtAll) {
  const std::vector<std::string> dicts = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",        // an int, not a tuple
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",  // text after the dict
      "{'descr': '<f4', 'shape': (2,)}",                               // no fortran_order
      "{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}",      // a leading zero
      "{'descr': '<f4',\v'fortran_order': False, 'shape': (2,)}",      // \v is not white space
      std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)\0}", 55),  // NUL
  };
  for (const auto& dict : dicts) {
    EXPECT_THROW(parse_npy_header(v1_header(dict), "m.npy"), ValueError) << dict;
  }
  // Python 2 longs: numpy reads "2L" in versions 1.0 and 2.0 only.
  const std::string longs = "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }";
  EXPECT_EQ(parse_npy_header(v1_header(longs), "l.npy").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(parse_npy_header(v2_header(longs, '\x03'), "l.npy"), ValueError);
  EXPECT_EQ(parse_npy_header(v2_header(kDict, '\x03'), "l.npy").shape, (std::vector<int64_t>{2}));
}

TEST(NpyHeader, ParsesHugeShapesButCheckSizesRefusesThemBeforeAnyUse) {
  // The parser reads any int64 dimensions; the byte count is checked when
  // the file is opened (check_sizes, with the header's size as the offset).
  const std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
  NpyHeader h = parse_npy_header(v1_header(dict), "h.npy");
  expect_error_mentioning<ValueError>(
      [&] {
        check_sizes(ArrayInfo{h.dtype, h.shape}, "h.npy", h.data_offset);
      },
      {"h.npy", "(4294967296, 4294967296)", "float32"});
}

}  // namespace
}  // namespace jask
