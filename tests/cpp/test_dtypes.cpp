// The dtypes after the first six (base/dtype.hpp): the table, the float8
// encoders, and the elementwise programs on every integer width (wraparound,
// division, shifts, comparisons and conversions as XLA computes them), the
// float8s, and reductions folded exactly in the integer's width.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "kernels/along_axis.hpp"
#include "kernels/kernels.hpp"
#include "program/program.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

const std::vector<DType> kIntDTypes = {DType::i8, DType::i16, DType::i32, DType::i64,
                                       DType::u8, DType::u16, DType::u32, DType::u64};

// Runs one instruction over int64-valued inputs of integer dtype `dt` (the operands'),
// storing as `out`; returns the stored values, sign- or zero-extended.
std::vector<int64_t> run_int(Opcode op, DType dt, DType out, const std::vector<int64_t>& a,
                             const std::vector<int64_t>& b = {}) {
  const int n_in = b.empty() ? 1 : 2;
  Program program{n_in + 1, out, Reduction::kNone, n_in, {Instr{op, n_in, 0, n_in - 1, 0}}, {}};
  const size_t isz = itemsize(dt), n = a.size();
  std::vector<unsigned char> ab(n * isz), bb(n * isz), ob(n * itemsize(out));
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(ab.data() + i * isz, &a[i], isz);
    if (!b.empty()) std::memcpy(bb.data() + i * isz, &b[i], isz);
  }
  std::vector<DType> dtypes(static_cast<size_t>(n_in), dt);
  ProgramRunner runner(program, dtypes, {});
  std::vector<const void*> ins = {ab.data()};
  if (!b.empty()) ins.push_back(bb.data());
  runner.run(ins, ob.data(), static_cast<int64_t>(n));
  std::vector<int64_t> got(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t v = 0;
    std::memcpy(&v, ob.data() + i * itemsize(out), itemsize(out));
    got[i] = wrap_int(out, v);
  }
  return got;
}

int64_t min_of(DType dt) {
  const int w = int_bits(dt);
  if (dtype_kind(dt) == DKind::kUnsigned) return 0;
  return w == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (w - 1));
}
int64_t max_of(DType dt) {
  const int w = int_bits(dt);
  if (dtype_kind(dt) == DKind::kUnsigned) return w == 64 ? -1 : (int64_t(1) << w) - 1;
  return w == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (w - 1)) - 1;
}

TEST(DTypes, TableIsConsistent) {
  ASSERT_EQ(static_cast<int>(dtype_table().size()), kNumDTypes);
  for (int c = 0; c < kNumDTypes; ++c) {
    const DTypeInfo& d = dtype_table()[static_cast<size_t>(c)];
    EXPECT_EQ(static_cast<int>(d.dtype), c);
    EXPECT_EQ(dtype_from_name(d.name), d.dtype) << d.name;
    EXPECT_EQ(dtype_from_descr(d.descr), d.dtype) << d.descr;
    EXPECT_EQ(dtype_from_int(c), d.dtype);
  }
  EXPECT_EQ(dtype_from_descr("=i8"), DType::i64);
  EXPECT_EQ(dtype_from_descr("<u1"), DType::u8);
  EXPECT_EQ(dtype_from_descr(">i8"), std::nullopt);
  EXPECT_EQ(dtype_from_descr("|i4"), std::nullopt);
  EXPECT_THROW(dtype_from_int(kNumDTypes), TypeError);
  EXPECT_EQ(itemsize(DType::c128), 16u);
}

TEST(DTypes, AddSubMulWrapInEveryWidth) {
  for (DType dt : kIntDTypes) {
    const int64_t lo = min_of(dt), hi = max_of(dt);
    // hi + 1 wraps to lo, lo - 1 to hi, hi * 2 to all ones but the lowest bit
    EXPECT_EQ(run_int(Opcode::kAdd, dt, dt, {hi, 5}, {1, -3})[0], lo) << dtype_name(dt);
    EXPECT_EQ(run_int(Opcode::kSub, dt, dt, {lo}, {1})[0], hi) << dtype_name(dt);
    EXPECT_EQ(run_int(Opcode::kMul, dt, dt, {hi}, {2})[0], wrap_int(dt, -2)) << dtype_name(dt);
    EXPECT_EQ(run_int(Opcode::kNeg, dt, dt, {lo})[0], lo) << dtype_name(dt);  // -MIN is MIN
    EXPECT_EQ(run_int(Opcode::kNot, dt, dt, {0})[0], wrap_int(dt, -1)) << dtype_name(dt);
  }
}

TEST(DTypes, DivisionAndRemainderAsXla) {
  for (DType dt : kIntDTypes) {
    const bool is_signed = dtype_kind(dt) == DKind::kSigned;
    const int64_t all_ones = wrap_int(dt, -1);
    // x / 0 is all ones, x % 0 is x
    EXPECT_EQ(run_int(Opcode::kDiv, dt, dt, {7}, {0})[0], all_ones) << dtype_name(dt);
    EXPECT_EQ(run_int(Opcode::kRem, dt, dt, {7}, {0})[0], 7) << dtype_name(dt);
    EXPECT_EQ(run_int(Opcode::kDiv, dt, dt, {7}, {2})[0], 3) << dtype_name(dt);
    if (is_signed) {  // truncation toward zero; MIN / -1 is MIN, MIN % -1 is 0
      EXPECT_EQ(run_int(Opcode::kDiv, dt, dt, {-7, min_of(dt)}, {2, -1}),
                (std::vector<int64_t>{-3, min_of(dt)}))
          << dtype_name(dt);
      EXPECT_EQ(run_int(Opcode::kRem, dt, dt, {-7, min_of(dt)}, {2, -1}),
                (std::vector<int64_t>{-1, 0}))
          << dtype_name(dt);
    } else {  // the largest value divides as unsigned
      EXPECT_EQ(run_int(Opcode::kDiv, dt, dt, {max_of(dt)}, {max_of(dt)})[0], 1) << dtype_name(dt);
      EXPECT_EQ(run_int(Opcode::kRem, dt, dt, {max_of(dt)}, {2})[0], 1) << dtype_name(dt);
    }
  }
}

TEST(DTypes, ShiftsAndComparisonsInTheDtypesWidth) {
  for (DType dt : kIntDTypes) {
    const int w = int_bits(dt);
    const int64_t all_ones = wrap_int(dt, -1), lo = min_of(dt), hi = max_of(dt);
    EXPECT_EQ(run_int(Opcode::kShiftLeft, dt, dt, {1, 1, 1}, {w - 1, w, -1}),
              (std::vector<int64_t>{wrap_int(dt, int64_t(uint64_t(1) << (w - 1))), 0, 0}))
        << dtype_name(dt);
    // logical: the width's bits shifted; arithmetic: the sign bit of the width copied
    EXPECT_EQ(run_int(Opcode::kShiftRightLogical, dt, dt, {all_ones, all_ones}, {1, w}),
              (std::vector<int64_t>{wrap_int(dt, int64_t(uint64_t(-1) >> (65 - w))), 0}))
        << dtype_name(dt);
    EXPECT_EQ(run_int(Opcode::kShiftRightArithmetic, dt, dt, {all_ones, all_ones}, {1, w + 1}),
              (std::vector<int64_t>{all_ones, all_ones}))
        << dtype_name(dt);
    // unsigned comparisons: the largest value is above 1
    EXPECT_EQ(run_int(Opcode::kGt, dt, DType::b8, {hi, lo}, {1, 1}), (std::vector<int64_t>{1, 0}))
        << dtype_name(dt);
    EXPECT_EQ(run_int(Opcode::kMax, dt, dt, {hi, lo}, {lo, hi}), (std::vector<int64_t>{hi, hi}))
        << dtype_name(dt);
  }
}

TEST(DTypes, ConversionsBetweenIntegerWidthsWrap) {
  for (DType from : kIntDTypes) {
    for (DType to : kIntDTypes) {
      const Opcode op = opcode_from_name(std::string("convert_") + dtype_name(to));
      for (int64_t v : {min_of(from), max_of(from), int64_t(0), wrap_int(from, -1)}) {
        EXPECT_EQ(run_int(op, from, to, {v})[0], wrap_int(to, v))
            << dtype_name(from) << " " << v << " -> " << dtype_name(to);
      }
    }
  }
}

TEST(DTypes, FloatToIntegerSaturatesTruncatesAndNanIsZero) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x = {std::nan(""), inf, -inf, 1e30, -1e30, 2.9, -2.9, 255.5};
  for (DType to : kIntDTypes) {
    const Opcode op = opcode_from_name(std::string("convert_") + dtype_name(to));
    Program program{2, to, Reduction::kNone, 1, {Instr{op, 1, 0, 0, 0}}, {}};
    ProgramRunner runner(program, {DType::f64}, {});
    std::vector<unsigned char> out(x.size() * itemsize(to));
    runner.run({x.data()}, out.data(), static_cast<int64_t>(x.size()));
    std::vector<int64_t> got(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t v = 0;
      std::memcpy(&v, out.data() + i * itemsize(to), itemsize(to));
      got[i] = wrap_int(to, v);
    }
    const bool u = dtype_kind(to) == DKind::kUnsigned;
    const int64_t lo = min_of(to), hi = max_of(to);
    const int64_t v255 = int_bits(to) == 8 ? (u ? 255 : 127) : 255;
    EXPECT_EQ(got, (std::vector<int64_t>{0, hi, lo, hi, lo, 2, u ? 0 : -2, v255}))
        << dtype_name(to);
  }
}

TEST(DTypes, Float8EncodingRoundsToNearestEvenWithTheFormatsOverflow) {
  // e4m3fn: largest 448, no inf (overflow is NaN); 464 is the tie with the next step
  EXPECT_EQ(f8_to_f32(DType::f8_e4m3fn, f32_to_f8(DType::f8_e4m3fn, 464.0)), 448.0f);
  EXPECT_TRUE(std::isnan(f8_to_f32(DType::f8_e4m3fn, f32_to_f8(DType::f8_e4m3fn, 465.0))));
  EXPECT_EQ(f8_to_f32(DType::f8_e4m3fn, f32_to_f8(DType::f8_e4m3fn, 0.001)), 0.001953125f);
  // e5m2 has inf
  EXPECT_EQ(f8_to_f32(DType::f8_e5m2, f32_to_f8(DType::f8_e5m2, 1e6)),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(f8_to_f32(DType::f8_e5m2, f32_to_f8(DType::f8_e5m2, -1e6)),
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f8_to_f32(DType::f8_e5m2, f32_to_f8(DType::f8_e5m2, 57344.0)), 57344.0f);
  // fnuz: no negative zero, NaN is 0x80
  EXPECT_EQ(f32_to_f8(DType::f8_e4m3fnuz, -0.0), 0);
  EXPECT_EQ(f32_to_f8(DType::f8_e4m3fnuz, std::nan("")), 0x80);
  EXPECT_EQ(f8_to_f32(DType::f8_e4m3b11fnuz, f32_to_f8(DType::f8_e4m3b11fnuz, 30.0)), 30.0f);
  // every finite code round-trips in every format
  for (int c = static_cast<int>(DType::f8_e4m3fn); c < kNumDTypes; ++c) {
    const auto dt = static_cast<DType>(c);
    for (int bits = 0; bits < 256; ++bits) {
      const float v = f8_to_f32(dt, static_cast<uint8_t>(bits));
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(f8_to_f32(dt, f32_to_f8(dt, v)), v) << dtype_name(dt) << " code " << bits;
    }
  }
}

TEST(DTypes, IntegerReductionsFoldExactlyInTheWidth) {
  // int8: 100 + 100 wraps to -56; uint8 max is 255 (not -1); int64 sums beyond 2^53 exactly
  auto reduce = [](DType dt, Reduction r, const std::vector<int64_t>& values) {
    Program program{2, dt, r, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
    ProgramRunner runner(program, {dt}, {});
    std::vector<unsigned char> bytes(values.size() * itemsize(dt));
    for (size_t i = 0; i < values.size(); ++i)
      std::memcpy(bytes.data() + i * itemsize(dt), &values[i], itemsize(dt));
    runner.run({bytes.data()}, nullptr, static_cast<int64_t>(values.size()));
    return runner.reduced();
  };
  EXPECT_EQ(reduce(DType::i8, Reduction::kSum, {100, 100}), -56.0);
  EXPECT_EQ(reduce(DType::u8, Reduction::kMax, {1, 255, 3}), 255.0);
  EXPECT_EQ(reduce(DType::u8, Reduction::kMin, {7, 255, 3}), 3.0);
  EXPECT_EQ(reduce(DType::i16, Reduction::kProd, {256, 256}), 0.0);
  EXPECT_EQ(reduce(DType::i64, Reduction::kSum, {int64_t(1) << 53, 1, 1}),
            static_cast<double>((int64_t(1) << 53) + 2));
  EXPECT_EQ(reduce(DType::u32, Reduction::kSum, {4294967295LL, 2}), 1.0);
}

TEST(DTypes, AxisFoldsStoreWrappedIntegers) {
  const std::vector<int64_t> sums = {200, -129, 65536 + 5};
  std::vector<int8_t> i8(3);
  store_folded(sums.data(), 3, DType::i8, i8.data());
  EXPECT_EQ(i8, (std::vector<int8_t>{-56, 127, 5}));
  std::vector<uint16_t> u16(3);
  store_folded(sums.data(), 3, DType::u16, u16.data());
  EXPECT_EQ(u16, (std::vector<uint16_t>{200, 65407, 5}));
  // int64 past 2^53 and uint64 past 2^63 keep every bit
  const std::vector<int64_t> big = {(int64_t{1} << 62) + 1, -(int64_t{1} << 62) - 3};
  std::vector<int64_t> i64(2), back(2);
  store_folded(big.data(), 2, DType::i64, i64.data());
  EXPECT_EQ(i64, big);
  load_folded(DType::u64, i64.data(), 2, back.data());
  EXPECT_EQ(back, big);
}

TEST(DTypes, ComplexArithmeticAndConversions) {
  using C = std::complex<double>;
  const std::vector<C> a = {{1, 2}, {-3, 0.5}, {0, 0}}, b = {{3, -1}, {2, 2}, {1, 0}};
  auto run = [&](Opcode op, DType in, DType out, int n_in) {
    Program program{n_in + 1, out, Reduction::kNone, n_in, {Instr{op, n_in, 0, n_in - 1, 0}}, {}};
    ProgramRunner runner(program, std::vector<DType>(static_cast<size_t>(n_in), in), {});
    std::vector<C> got(a.size());
    runner.run({a.data(), b.data()}, got.data(), static_cast<int64_t>(a.size()));
    return got;
  };
  EXPECT_EQ(run(Opcode::kMul, DType::c128, DType::c128, 2),
            (std::vector<C>{a[0] * b[0], a[1] * b[1], a[2] * b[2]}));
  EXPECT_EQ(run(Opcode::kDiv, DType::c128, DType::c128, 2)[1], a[1] / b[1]);
  // complex128 -> complex64 rounds each part to float
  const C third(1.0 / 3, -2.0 / 3);
  const std::vector<C> thirds = {third};
  Program convert{2, DType::c64, Reduction::kNone, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
  std::vector<float> c64(2);
  ProgramRunner(convert, {DType::c128}, {}).run({thirds.data()}, c64.data(), 1);
  EXPECT_EQ(c64, (std::vector<float>{static_cast<float>(1.0 / 3), static_cast<float>(-2.0 / 3)}));
  // to a real dtype: the real part
  Program to_f32{2, DType::f32, Reduction::kNone, 1, {Instr{Opcode::kToF32, 1, 0, 0, 0}}, {}};
  std::vector<float> re(3);
  ProgramRunner(to_f32, {DType::c128}, {}).run({a.data()}, re.data(), 3);
  EXPECT_EQ(re, (std::vector<float>{1, -3, 0}));
  // no reductions of complex values (a reduction gives one real value)
  Program sum{2, DType::c64, Reduction::kSum, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
  EXPECT_THROW(ProgramRunner(sum, {DType::c64}, {}), TypeError);
  EXPECT_THROW(compute_itemsize(DType::c128), TypeError);
}

}  // namespace
}  // namespace jask
