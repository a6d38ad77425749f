// Dtype conversions and the in-memory helpers of matmul, gathers and
// transpose, each against a reference computed in the test: float16/bfloat16
// rounding, in-place widening and tile permutation. (Elementwise arithmetic
// and sums are programs: test_program.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/dtype.hpp"
#include "kernels/kernels.hpp"
#include "program/reduction.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

const std::vector<DType> kAllDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32};

// --- storage <-> double, written independently of the engine's converters ---

// Decodes a float16 bit pattern by its definition.
double f16_reference(uint16_t h) {
  int sign = (h & 0x8000) ? -1 : 1;
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(1024 + mant, exp - 25);
}

double bf16_reference(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Test data in storage form. Values are exact in every dtype (see
// test::test_value), so reference results compare exactly.
struct Buffer {
  DType dt;
  std::vector<unsigned char> bytes;
  Buffer(DType d, int64_t n) : dt(d), bytes(static_cast<size_t>(n) * itemsize(d)) {}
  int64_t size() const { return static_cast<int64_t>(bytes.size() / itemsize(dt)); }
  void* data() { return bytes.data(); }

  void set(int64_t i, double v) { test::encode_value(dt, v, bytes.data() + i * itemsize(dt)); }
  double get(int64_t i) const {
    const unsigned char* p = bytes.data() + i * itemsize(dt);
    switch (dt) {
      case DType::f32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case DType::f64: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
      case DType::f16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return f16_reference(h);
      }
      case DType::bf16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return bf16_reference(h);
      }
      case DType::i32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        return x;
      }
      default:
        throw std::invalid_argument(std::string("test data: no decoding for ") + dtype_name(dt));
    }
    return 0;
  }
};

Buffer test_buffer(DType dt, int64_t n, int salt) {
  Buffer b(dt, n);
  // Halves are exact in the float types; int32 gets whole numbers.
  double half = dt == DType::i32 ? 0.0 : 0.5;
  for (int64_t i = 0; i < n; ++i) b.set(i, test::test_value(i, salt) + half);
  return b;
}

// --- float16 and bfloat16 conversions ---

TEST(Float16, DecodingEveryBitPatternMatchesTheDefinition) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    double expected = f16_reference(static_cast<uint16_t>(h));
    float got = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
    }
  }
}

TEST(Float16, EveryNonNanValueRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << std::hex << h;
    } else {
      ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
    }
  }
}

TEST(Float16, RoundsToNearestEven) {
  // Between 1 and the next float16, 1 + 2^-10: the midpoint goes to the even
  // one, anything past it goes up.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xbc02);
  EXPECT_EQ(f32_to_f16(0.1f), 0x2e66);  // 0.0999755859375, the nearest float16
}

TEST(Float16, SubnormalsRoundToNearestEven) {
  const float unit = std::ldexp(1.0f, -24);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(unit), 0x0001);
  EXPECT_EQ(f32_to_f16(0.5f * unit), 0x0000);  // tie with 0: even
  EXPECT_EQ(f32_to_f16(0.75f * unit), 0x0001);
  EXPECT_EQ(f32_to_f16(1.5f * unit), 0x0002);     // tie between 1 and 2 units: even
  EXPECT_EQ(f32_to_f16(2.5f * unit), 0x0002);     // tie between 2 and 3 units: even
  EXPECT_EQ(f32_to_f16(1023.5f * unit), 0x0400);  // tie with the smallest normal
  EXPECT_EQ(f32_to_f16(-unit), 0x8001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
}

TEST(Float16, OverflowInfinityAndNan) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);  // largest float16
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // midpoint rounds to even: infinity
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0) << "NaN must not become infinity";
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(BFloat16, EveryNonNanValueRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f)))) << std::hex << h;
    } else {
      ASSERT_EQ(f32_to_bf16(f), h) << std::hex << h;
    }
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  // bfloat16 keeps 7 fraction bits: the spacing above 1 is 2^-7.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: even
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
}

TEST(BFloat16, NanStaysNan) {
  // A NaN whose payload sits in the low 16 bits would truncate to infinity.
  uint32_t bits = 0x7f800001;
  float nan;
  std::memcpy(&nan, &bits, 4);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(nan))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(-nan))));
}

// --- widening and narrowing in place ---

TEST(Kernels, WidenInPlaceTurnsStorageAtTheBackIntoComputeValuesAtTheFront) {
  const int64_t n = 37;
  for (DType dt : kAllDTypes) {
    Buffer storage = test_buffer(dt, n, 3);
    const size_t cs = compute_itemsize(dt), ss = itemsize(dt);
    std::vector<unsigned char> buf(n * cs, 0xee);
    std::memcpy(buf.data() + n * (cs - ss), storage.data(), n * ss);
    widen_in_place(dt, buf.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double got;
      if (folds_as_int(dt)) {  // int64 register values (uint64: their bits)
        int64_t v;
        std::memcpy(&v, buf.data() + i * 8, 8);
        got = dt == DType::u64 ? static_cast<double>(static_cast<uint64_t>(v))
                               : static_cast<double>(v);
      } else if (cs == 8) {
        std::memcpy(&got, buf.data() + i * 8, 8);
      } else {
        float f;
        std::memcpy(&f, buf.data() + i * 4, 4);
        got = f;
      }
      ASSERT_EQ(got, storage.get(i)) << dtype_name(dt) << " element " << i;
    }
  }
}

TEST(Kernels, NarrowInPlaceUndoesWiden) {
  const int64_t n = 37;
  for (DType dt : kAllDTypes) {
    Buffer storage = test_buffer(dt, n, 4);
    const size_t cs = compute_itemsize(dt), ss = itemsize(dt);
    std::vector<unsigned char> buf(n * cs);
    std::memcpy(buf.data() + n * (cs - ss), storage.data(), n * ss);
    widen_in_place(dt, buf.data(), n);
    narrow_in_place(dt, buf.data(), n);
    EXPECT_EQ(std::memcmp(buf.data(), storage.data(), n * ss), 0) << dtype_name(dt);
  }
}

TEST(Kernels, NarrowInPlaceWrapsInt32) {
  std::vector<int64_t> buf = {2147483648, -2147483649, 4294967297};
  narrow_in_place(DType::i32, buf.data(), 3);
  int32_t out[3];
  std::memcpy(out, buf.data(), sizeof out);
  EXPECT_EQ(out[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(out[1], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(out[2], 1);
}

TEST(Kernels, WidenAndNarrowKeepInt64AndUint64Exact) {
  // Neighbours a double cannot tell apart round-trip bit for bit.
  const std::vector<int64_t> values = {(int64_t{1} << 62) + 1, std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min() + 1, -1};
  for (DType dt : {DType::i64, DType::u64}) {
    std::vector<int64_t> buf = values;
    widen_in_place(dt, buf.data(), 4);
    EXPECT_EQ(buf, values) << dtype_name(dt);
    narrow_in_place(dt, buf.data(), 4);
    EXPECT_EQ(buf, values) << dtype_name(dt);
  }
}

// --- tile permutation ---

// out[j] = in[i] where out index j_d = in index i_perm[d], by brute force.
std::vector<int32_t> permute_reference(const std::vector<int32_t>& in,
                                       const std::vector<int64_t>& ext,
                                       const std::vector<int64_t>& perm) {
  const size_t nd = ext.size();
  std::vector<int64_t> out_ext(nd), in_stride(nd), out_stride(nd);
  for (size_t d = 0; d < nd; ++d) out_ext[d] = ext[perm[d]];
  int64_t s = 1, o = 1;
  for (size_t d = nd; d-- > 0;) {
    in_stride[d] = s;
    s *= ext[d];
    out_stride[d] = o;
    o *= out_ext[d];
  }
  std::vector<int32_t> out(in.size());
  for (int64_t flat = 0; flat < static_cast<int64_t>(in.size()); ++flat) {
    int64_t in_pos = 0;
    for (size_t d = 0; d < nd; ++d) {
      int64_t j = (flat / out_stride[d]) % out_ext[d];
      in_pos += j * in_stride[perm[d]];
    }
    out[flat] = in[in_pos];
  }
  return out;
}

std::vector<std::vector<int64_t>> all_permutations(size_t nd) {
  std::vector<int64_t> p(nd);
  for (size_t i = 0; i < nd; ++i) p[i] = static_cast<int64_t>(i);
  std::vector<std::vector<int64_t>> out;
  do out.push_back(p);
  while (std::next_permutation(p.begin(), p.end()));
  return out;
}

void check_permute(const std::vector<int64_t>& ext) {
  std::vector<int32_t> in(static_cast<size_t>(test::numel_of(ext)));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i * 3 + 1);
  for (const auto& perm : all_permutations(ext.size())) {
    std::vector<int32_t> out(in.size(), -1);
    permute_tile(in.data(), out.data(), ext.data(), perm.data(), static_cast<int>(ext.size()), 4);
    ASSERT_EQ(out, permute_reference(in, ext, perm))
        << "extents " << testing::PrintToString(ext) << ", perm " << testing::PrintToString(perm);
  }
}

TEST(Kernels, PermuteTileMatchesANaiveLoopIn2D) {
  check_permute({7, 5});
  check_permute({1, 9});
  check_permute({9, 1});
}

TEST(Kernels, PermuteTileMatchesANaiveLoopIn3DAnd4D) {
  check_permute({2, 3, 4});
  check_permute({5, 1, 3});
  check_permute({2, 3, 4, 5});
}

TEST(Kernels, PermuteTileMovesWholeElementsOfEverySize) {
  // 2-byte and 8-byte elements: bytes of one element must stay together.
  std::vector<int64_t> ext = {3, 4}, perm = {1, 0};
  std::vector<uint16_t> in16(12), out16(12);
  std::vector<double> in64(12), out64(12);
  for (int i = 0; i < 12; ++i) {
    in16[i] = static_cast<uint16_t>(0x0101 * (i + 1));
    in64[i] = i + 0.25;
  }
  permute_tile(in16.data(), out16.data(), ext.data(), perm.data(), 2, 2);
  permute_tile(in64.data(), out64.data(), ext.data(), perm.data(), 2, 8);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(out16[r * 3 + c], in16[c * 4 + r]);
      EXPECT_EQ(out64[r * 3 + c], in64[c * 4 + r]);
    }
  }
}

TEST(Kernels, PermuteTileOfAScalarCopiesIt) {
  double in = 4.5, out = 0;
  permute_tile(&in, &out, nullptr, nullptr, 0, sizeof(double));
  EXPECT_EQ(out, 4.5);
}

}  // namespace
}  // namespace jask
