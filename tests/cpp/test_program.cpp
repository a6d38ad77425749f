// Elementwise programs (program.hpp), the one path every elementwise op and
// full reduction runs. In memory (ProgramRunner): every instruction on every
// dtype against a reference in double, rounding and int32 wraparound on
// store, reductions, several outputs, malformed programs. Out of core
// (map_program, map_program_outputs, reduce_program): programs as
// jask/ops/_elementwise.py encodes them, over arrays of odd shapes under
// budgets of a few KiB, with broadcast and in-memory operands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "kernels/ops.hpp"
#include "program/program.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::array_shape;
using test::array_values;
using test::BudgetGuard;
using test::expect_error_mentioning;
using test::make_array;
using test::ProgramBuilder;
using test::run_map;
using test::run_map_multi;
using test::run_map_reduce;
using test::ScratchDir;
using test::TaskCount;
using test::test_values;

const std::vector<DType> kAllDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32};

// `v` as the engine stores it in `dt`, converted as XLA converts:
// float16/bfloat16 through float (their compute type), int32 truncated toward
// zero and saturated (NaN gives 0), bool as v != 0.
double stored(DType dt, double v) {
  switch (dt) {
    case DType::f32: return static_cast<float>(v);
    case DType::f64: return v;
    case DType::f16: return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    case DType::bf16: return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    case DType::i32:
      if (std::isnan(v)) return 0;
      return std::clamp(std::trunc(v), -2147483648.0, 2147483647.0);
    case DType::b8: return v != 0;
    default: break;  // the other dtypes: their own tests (test_dtypes.cpp)
  }
  return 0;
}

// Relative error allowed for results that are not exact: a few units in the
// last place of the compute type, or one of the storage type.
double tolerance(DType dt) {
  switch (dt) {
    case DType::f32: return 1e-6;
    case DType::f64: return 1e-13;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    default: return 0;  // int32 and bool: exact
  }
}

bool matches(double got, double want, double rel) {
  if (std::isnan(want)) return std::isnan(got);
  if (!std::isfinite(want)) return got == want;
  return std::abs(got - want) <= rel * (std::abs(want) + 1.0);
}

// Runs `program` over in-memory inputs of one length; returns each output.
std::vector<std::vector<double>> run_in_memory(const Program& program,
                                               const std::vector<DType>& in_dtypes,
                                               const std::vector<std::vector<double>>& inputs,
                                               const std::vector<double>& scalars, int64_t n) {
  std::vector<std::vector<unsigned char>> in_bytes;
  std::vector<const void*> in_ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in_bytes.push_back(test::encode(in_dtypes[i], inputs[i]));
    in_ptrs.push_back(in_bytes.back().data());
  }
  std::vector<std::vector<unsigned char>> out_bytes(
      program.n_outputs(), std::vector<unsigned char>(n * itemsize(program.out_dtype)));
  std::vector<void*> out_ptrs;
  for (auto& o : out_bytes) out_ptrs.push_back(o.data());
  ProgramRunner runner(program, in_dtypes, scalars);
  runner.run(in_ptrs, out_ptrs, n);
  std::vector<std::vector<double>> outs;
  for (auto& o : out_bytes) outs.push_back(test::decode(program.out_dtype, o.data(), n));
  return outs;
}

Program one_instruction(Opcode op, int n_inputs, DType out_dtype) {
  // Operands a, b, c are the inputs (unary ops read only a).
  const int32_t dst = n_inputs;
  return Program{dst + 1,
                 out_dtype,
                 Reduction::kNone,
                 dst,
                 {Instr{op, dst, 0, std::min(1, n_inputs - 1), std::min(2, n_inputs - 1)}}};
}

// --- every instruction on every dtype it takes ---

// The operand dtypes an instruction takes, as jax.lax's primitive does.
enum Takes : uint8_t { kF = 1, kI = 2, kB = 4, kNum = kF | kI, kInts = kI | kB, kAll = 7 };

using Ref = std::function<double(double, double, double)>;

struct InstrCase {
  const char* name;
  bool exact;  // exact in double for whole and half test values (then rounded once on store)
  Ref ref;
  uint8_t takes = kNum;
  Ref int_ref = nullptr;   // int32 and bool, where it differs from ref
  bool predicate = false;  // the first operand is a bool condition (select)
  double rel = 0;          // the reference's own error, where above the dtype's tolerance
};

const double kGeluK = std::sqrt(2.0 / M_PI);
const double kNan = std::numeric_limits<double>::quiet_NaN();

// `a` rounded to float8 format T (the encoder is checked against ml_dtypes in
// tests/test_dtypes_all.py and by its own cases in test_dtypes.cpp).
template <DType T>
double f8_ref(double a, double, double) {
  return f8_to_f32(T, f32_to_f8(T, a));
}

double wrap32(double v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v)));
}

// The special functions, from their definitions (slowly, to full double precision).
double digamma_ref(double x) {
  if (x <= 0 && x == std::floor(x)) return kNan;
  if (x < 0) return digamma_ref(1 - x) - M_PI / std::tan(M_PI * x);
  double h = 1e-5;  // central difference of lgamma, then Richardson extrapolation
  auto d = [&](double step) {
    return (std::lgamma(x + step) - std::lgamma(x - step)) / (2 * step);
  };
  return (4 * d(h / 2) - d(h)) / 3;
}
double erf_inv_ref(double y) {
  if (std::abs(y) > 1) return kNan;
  if (std::abs(y) == 1) return std::copysign(INFINITY, y);
  double lo = -6, hi = 6;  // bisection
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

const std::vector<InstrCase> kInstrCases = {
    {"copy", true, [](double a, double, double) { return a; }, kAll},
    {"neg", true, [](double a, double, double) { return -a; }},
    {"square", true, [](double a, double, double) { return a * a; }},
    {"sqrt", false, [](double a, double, double) { return std::sqrt(a); }, kF},
    {"rsqrt", false, [](double a, double, double) { return 1.0 / std::sqrt(a); }, kF},
    {"cbrt", false, [](double a, double, double) { return std::cbrt(a); }, kF},
    {"abs", true, [](double a, double, double) { return std::abs(a); }},
    {"sign", true, [](double a, double, double) { return a > 0   ? 1.0
                                                         : a < 0 ? -1.0
                                                                 : a; }},
    {"exp", false, [](double a, double, double) { return std::exp(a); }, kF},
    {"exp2", false, [](double a, double, double) { return std::exp2(a); }, kF},
    {"log", false, [](double a, double, double) { return std::log(a); }, kF},
    {"log1p", false, [](double a, double, double) { return std::log1p(a); }, kF},
    {"expm1", false, [](double a, double, double) { return std::expm1(a); }, kF},
    {"tanh", false, [](double a, double, double) { return std::tanh(a); }, kF},
    {"sigmoid", false, [](double a, double, double) { return 1.0 / (1.0 + std::exp(-a)); }, kF},
    {"relu", true, [](double a, double, double) { return a > 0 ? a : 0.0; }},
    {"softplus", false, [](double a, double, double) { return std::log(1.0 + std::exp(a)); },
     kF},
    {"gelu", false,
     [](double a, double, double) {
       return 0.5 * a * (1.0 + std::tanh(kGeluK * (a + 0.044715 * a * a * a)));
     },
     kF},
    {"reciprocal", false, [](double a, double, double) { return 1.0 / a; }, kF},
    {"sin", false, [](double a, double, double) { return std::sin(a); }, kF},
    {"cos", false, [](double a, double, double) { return std::cos(a); }, kF},
    {"tan", false, [](double a, double, double) { return std::tan(a); }, kF},
    {"asin", false, [](double a, double, double) { return std::asin(a); }, kF},
    {"acos", false, [](double a, double, double) { return std::acos(a); }, kF},
    {"atan", false, [](double a, double, double) { return std::atan(a); }, kF},
    {"sinh", false, [](double a, double, double) { return std::sinh(a); }, kF},
    {"cosh", false, [](double a, double, double) { return std::cosh(a); }, kF},
    {"asinh", false, [](double a, double, double) { return std::asinh(a); }, kF},
    {"acosh", false, [](double a, double, double) { return std::acosh(a); }, kF},
    {"atanh", false, [](double a, double, double) { return std::atanh(a); }, kF},
    {"erf", false, [](double a, double, double) { return std::erf(a); }, kF},
    {"erfc", false, [](double a, double, double) { return std::erfc(a); }, kF},
    {"erf_inv", false, [](double a, double, double) { return erf_inv_ref(a); }, kF},
    {"lgamma", false, [](double a, double, double) { return std::lgamma(a); }, kF},
    {"digamma", false, [](double a, double, double) { return digamma_ref(a); }, kF, nullptr,
     false, 1e-9},
    {"trigamma", false,
     [](double a, double, double) {
       if (a <= 0 && a == std::floor(a)) return double(INFINITY);
       const double h = 1e-4;
       return (digamma_ref(a + h) - digamma_ref(a - h)) / (2 * h);
     },
     kF, nullptr, false, 1e-5},
    {"floor", true, [](double a, double, double) { return std::floor(a); }, kF},
    {"ceil", true, [](double a, double, double) { return std::ceil(a); }, kF},
    {"round", true, [](double a, double, double) { return std::round(a); }, kF},
    {"round_even", true, [](double a, double, double) { return std::nearbyint(a); }, kF},
    {"is_finite", true, [](double a, double, double) { return double(std::isfinite(a)); }, kF},
    {"not", true, [](double a, double, double) { return double(~static_cast<int32_t>(a)); },
     kInts},
    {"convert_float32", true, [](double a, double, double) { return stored(DType::f32, a); },
     kAll},
    {"convert_float64", true, [](double a, double, double) { return a; }, kAll},
    {"convert_float16", true, [](double a, double, double) { return stored(DType::f16, a); },
     kAll},
    {"convert_bfloat16", true, [](double a, double, double) { return stored(DType::bf16, a); },
     kAll},
    {"convert_int32", true, [](double a, double, double) { return stored(DType::i32, a); },
     kAll},
    {"convert_bool", true, [](double a, double, double) { return double(a != 0); }, kAll},
    // The dtypes after the first six (test values are small: in range of every
    // integer dtype). Unsigned: a negative float saturates to 0, a negative integer wraps
    // (and a uint32/uint64 value stored back as int32 wraps back).
    {"convert_int8", true, [](double a, double, double) { return std::trunc(a); }, kAll},
    {"convert_int16", true, [](double a, double, double) { return std::trunc(a); }, kAll},
    {"convert_int64", true, [](double a, double, double) { return std::trunc(a); }, kAll},
    {"convert_uint8", true, [](double a, double, double) { return std::max(std::trunc(a), 0.0); },
     kAll, [](double a, double, double) { return a < 0 ? a + 256 : a; }},
    {"convert_uint16", true,
     [](double a, double, double) { return std::max(std::trunc(a), 0.0); }, kAll,
     [](double a, double, double) { return a < 0 ? a + 65536 : a; }},
    {"convert_uint32", true,
     [](double a, double, double) { return std::max(std::trunc(a), 0.0); }, kAll,
     [](double a, double, double) { return a; }},
    {"convert_uint64", true,
     [](double a, double, double) { return std::max(std::trunc(a), 0.0); }, kAll,
     [](double a, double, double) { return a; }},
    {"convert_float8_e4m3fn", true, f8_ref<DType::f8_e4m3fn>, kAll},
    {"convert_float8_e5m2", true, f8_ref<DType::f8_e5m2>, kAll},
    {"convert_float8_e4m3fnuz", true, f8_ref<DType::f8_e4m3fnuz>, kAll},
    {"convert_float8_e5m2fnuz", true, f8_ref<DType::f8_e5m2fnuz>, kAll},
    {"convert_float8_e4m3b11fnuz", true, f8_ref<DType::f8_e4m3b11fnuz>, kAll},
    {"convert_float8_e4m3", true, f8_ref<DType::f8_e4m3>, kAll},
    {"convert_float8_e3m4", true, f8_ref<DType::f8_e3m4>, kAll},
    // to complex and back (the result is stored as the input's dtype: the real part)
    {"convert_complex64", true, [](double a, double, double) { return stored(DType::f32, a); },
     kAll},
    {"convert_complex128", true, [](double a, double, double) { return a; }, kAll},
    {"add", true, [](double a, double b, double) { return a + b; }},
    {"sub", true, [](double a, double b, double) { return a - b; }},
    {"mul", true, [](double a, double b, double) { return a * b; }},
    {"div", false, [](double a, double b, double) { return a / b; }, kNum,
     [](double a, double b, double) { return b == 0 ? -1.0 : std::trunc(a / b); }},
    {"rem", false, [](double a, double b, double) { return std::fmod(a, b); }, kNum,
     [](double a, double b, double) { return b == 0 ? a : std::fmod(a, b); }},
    {"max", true, [](double a, double b, double) { return std::max(a, b); }, kAll},
    {"min", true, [](double a, double b, double) { return std::min(a, b); }, kAll},
    {"pow", false, [](double a, double b, double) { return std::pow(a, b); }, kF},
    {"atan2", false, [](double a, double b, double) { return std::atan2(a, b); }, kF},
    {"nextafter", true, [](double a, double b, double) { return std::nextafter(a, b); }, kF},
    {"lt", true, [](double a, double b, double) { return double(a < b); }, kAll},
    {"le", true, [](double a, double b, double) { return double(a <= b); }, kAll},
    {"gt", true, [](double a, double b, double) { return double(a > b); }, kAll},
    {"ge", true, [](double a, double b, double) { return double(a >= b); }, kAll},
    {"eq", true, [](double a, double b, double) { return double(a == b); }, kAll},
    {"ne", true, [](double a, double b, double) { return double(a != b); }, kAll},
    {"and", true,
     [](double a, double b, double) { return double(int32_t(a) & int32_t(b)); }, kInts},
    {"or", true, [](double a, double b, double) { return double(int32_t(a) | int32_t(b)); },
     kInts},
    {"xor", true,
     [](double a, double b, double) { return double(int32_t(a) ^ int32_t(b)); }, kInts},
    {"shift_left", true,
     [](double a, double b, double) {
       return uint32_t(int32_t(b)) >= 32 ? 0.0 : wrap32(double(uint32_t(int32_t(a)) << uint32_t(int32_t(b))));
     },
     kI},
    {"shift_right_logical", true,
     [](double a, double b, double) {
       return uint32_t(int32_t(b)) >= 32 ? 0.0 : double(int32_t(uint32_t(int32_t(a)) >> uint32_t(int32_t(b))));
     },
     kI},
    {"shift_right_arithmetic", true,
     [](double a, double b, double) {
       return uint32_t(int32_t(b)) >= 32 ? (a < 0 ? -1.0 : 0.0) : double(int32_t(a) >> int32_t(b));
     },
     kI},
    {"select", true, [](double a, double b, double c) { return a != 0 ? b : c; }, kAll, nullptr,
     true},
    {"clamp", true, [](double a, double b, double c) { return std::min(std::max(b, a), c); }},
};

TEST(Program, EveryOpcodeHasAReferenceInThisTest) {
  std::set<std::string> engine, here;
  for (const auto& [name, code] : opcode_table()) engine.insert(name);
  for (const auto& c : kInstrCases) here.insert(c.name);
  EXPECT_EQ(engine, here);
  for (const auto& [name, code] : opcode_table())
    EXPECT_EQ(static_cast<int>(opcode_from_name(name)), code) << name;
  EXPECT_THROW(opcode_from_name("frobnicate"), ValueError);
}

uint8_t category(DType dt) { return dt == DType::i32 ? kI : dt == DType::b8 ? kB : kF; }

TEST(Program, EveryInstructionOnEveryDtypeMatchesADoubleReference) {
  // Over two chunks of registers (1024 elements each) and a ragged end.
  const int64_t n = 2500;
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::b8}) {
    // Whole numbers give zeros, ties and special values (log 0, 1/0, sqrt of
    // negatives); halves give fractions. Both are exact in every float dtype.
    const bool whole = dt == DType::i32 || dt == DType::b8;
    for (double offset : whole ? std::vector<double>{0.0} : std::vector<double>{0.0, 0.5}) {
      std::vector<double> a = test_values(n, 1, 6, offset), b = test_values(n, 2, 6, offset),
                          c = test_values(n, 3, 6, offset);
      if (dt == DType::b8) {
        for (auto* v : {&a, &b, &c})
          for (double& x : *v) x = x != 0;
      }
      for (const InstrCase& ic : kInstrCases) {
        if (!(ic.takes & category(dt))) continue;
        // a double reference steps in double: the other dtypes are checked below
        if (std::string(ic.name) == "nextafter" && dt != DType::f64) continue;
        const DType first = ic.predicate ? DType::b8 : dt;
        // results stored as the inputs' dtype (a conversion's as its own, then as dt)
        Program program = one_instruction(opcode_from_name(ic.name), 3, dt);
        std::vector<double> pa = a;
        if (ic.predicate)
          for (double& x : pa) x = x != 0;
        std::vector<double> got = run_in_memory(program, {first, dt, dt}, {pa, b, c}, {}, n)[0];
        const double rel = ic.exact ? 0.0 : std::max(ic.rel, tolerance(dt));
        const Ref& ref = whole && ic.int_ref ? ic.int_ref : ic.ref;
        for (int64_t i = 0; i < n; ++i) {
          double want = ref(pa[i], b[i], c[i]);
          if (dt == DType::b8 && std::string(ic.name) == "not") want = pa[i] == 0;
          // XLA's exp2 is exp(log(2) * x) with the product rounded to x's dtype
          if (std::string(ic.name) == "exp2" && (dt == DType::f16 || dt == DType::bf16))
            want = std::exp(stored(dt, stored(dt, std::log(2.0)) * pa[i]));
          want = stored(dt, want);
          ASSERT_TRUE(matches(got[i], want, rel))
              << ic.name << " on " << dtype_name(dt) << "(" << pa[i] << ", " << b[i] << ", " << c[i]
              << "), element " << i << ": got " << got[i] << ", want " << want;
        }
      }
    }
  }
}

TEST(Program, InstructionsRefuseOperandsJaxLaxRefuses) {
  auto rejects = [](Opcode op, std::vector<DType> dtypes, const std::string& why) {
    Program program = one_instruction(op, static_cast<int>(dtypes.size()), DType::f32);
    try {
      ProgramRunner runner(program, dtypes, {});
      ADD_FAILURE() << "accepted: " << why;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(opcode_name(op)), std::string::npos) << e.what();
    }
  };
  rejects(Opcode::kSin, {DType::i32}, "sin of int32");
  rejects(Opcode::kAdd, {DType::f32, DType::f64}, "add of float32 and float64");
  rejects(Opcode::kAdd, {DType::b8, DType::b8}, "add of bools");
  rejects(Opcode::kShiftLeft, {DType::f32, DType::f32}, "a float shift");
  rejects(Opcode::kAnd, {DType::f32, DType::f32}, "a float and");
  rejects(Opcode::kSelect, {DType::f32, DType::f32, DType::f32}, "a float predicate");
  rejects(Opcode::kSelect, {DType::b8, DType::f32, DType::i32}, "branches that differ");
}

TEST(Program, Int32DivisionAndRemainderAsXla) {
  const double big = std::numeric_limits<int32_t>::max(),
               small = std::numeric_limits<int32_t>::min();
  std::vector<double> a = {7, -7, 7, -7, 5, small, small, big, 0},
                      b = {2, 2, -2, -2, 0, -1, 0, -1, 0};
  auto run = [&](Opcode op) {
    return run_in_memory(one_instruction(op, 2, DType::i32), {DType::i32, DType::i32}, {a, b}, {},
                         static_cast<int64_t>(a.size()))[0];
  };
  EXPECT_EQ(run(Opcode::kDiv), (std::vector<double>{3, -3, -3, 3, -1, small, -1, -big, -1}));
  EXPECT_EQ(run(Opcode::kRem), (std::vector<double>{1, -1, 1, -1, 5, 0, small, 0, 0}));
}

TEST(Program, FloatToInt32ConversionsSaturateAndNanGivesZero) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> x = {kNan, inf, -inf, 3e9, -3e9, 2.7, -2.7, 2147483520.0};
  for (DType dt : {DType::f32, DType::f64}) {
    std::vector<double> got = run_in_memory(one_instruction(Opcode::kToI32, 1, DType::i32), {dt},
                                            {x}, {}, static_cast<int64_t>(x.size()))[0];
    EXPECT_EQ(got, (std::vector<double>{0, 2147483647, -2147483648.0, 2147483647, -2147483648.0, 2,
                                        -2, 2147483520.0}))
        << dtype_name(dt);
    // stored straight into int32 storage: the same conversion
    got = run_in_memory(one_instruction(Opcode::kCopy, 1, DType::i32), {dt}, {x}, {},
                        static_cast<int64_t>(x.size()))[0];
    EXPECT_EQ(got[0], 0);
    EXPECT_EQ(got[1], 2147483647);
  }
}

TEST(Program, Float16InstructionsRoundEachResultAsXla) {
  // (x + 2^-12) + 2^-12 in float16 from 1: each sum rounds back to 1 (a
  // float16 has 10 fraction bits), while float would keep 1 + 2^-11.
  ProgramBuilder b{.n_operands = 2, .out_dtype = DType::f16};
  const int32_t t = b.add(Opcode::kAdd, 0, 1);
  b.add(Opcode::kAdd, t, 1);
  ProgramCode code = b.program();
  code.scalar_dtypes = {static_cast<int64_t>(DType::f16)};
  Program program = Program::build(code, 1, 1);
  std::vector<double> got =
      run_in_memory(program, {DType::f16}, {{1.0, 2.0}}, {std::ldexp(1.0, -12)}, 2)[0];
  EXPECT_EQ(got, (std::vector<double>{1.0, 2.0}));
}

TEST(Program, NextafterStepsInTheOperandsDtype) {
  std::vector<double> x = {1.0, 1.0, 0.0, -0.0}, y = {2.0, 0.0, 1.0, -1.0};
  for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
    std::vector<double> got =
        run_in_memory(one_instruction(Opcode::kNextafter, 2, dt), {dt, dt}, {x, y}, {}, 4)[0];
    const double ulp = dt == DType::f16    ? std::ldexp(1.0, -10)
                       : dt == DType::bf16 ? std::ldexp(1.0, -7)
                                           : std::ldexp(1.0, -23);
    EXPECT_EQ(got[0], 1.0 + ulp) << dtype_name(dt);
    EXPECT_EQ(got[1], 1.0 - ulp / 2) << dtype_name(dt);
    EXPECT_GT(got[2], 0) << dtype_name(dt);
    EXPECT_LT(got[3], 0) << dtype_name(dt);
  }
}

// The single ops the engine had before programs, now programs with a scalar
// register: x * s, x + s, s - x, and s alone (fill).
struct ScalarCase {
  const char* name;
  std::function<void(ProgramBuilder&)> build;  // operands: register 0 the array, 1 the scalar
  std::function<double(double, double)> ref;
};

const std::vector<ScalarCase> kScalarCases = {
    {"scale", [](ProgramBuilder& p) { p.add(Opcode::kMul, 0, 1); },
     [](double x, double s) { return x * s; }},
    {"add_scalar", [](ProgramBuilder& p) { p.add(Opcode::kAdd, 0, 1); },
     [](double x, double s) { return x + s; }},
    {"rsub_scalar", [](ProgramBuilder& p) { p.add(Opcode::kSub, 1, 0); },
     [](double x, double s) { return s - x; }},
    {"fill", [](ProgramBuilder& p) { p.outputs = {1}; }, [](double, double s) { return s; }},
};

TEST(Program, ScalarOperandsReachEveryElement) {
  const int64_t n = 2500;
  for (DType dt : kAllDTypes) {
    const double scalar = dt == DType::i32 ? 3.0 : 2.5;  // exact in every dtype
    std::vector<double> x = test_values(n, 1, 6, dt == DType::i32 ? 0.0 : 0.5);
    for (const ScalarCase& sc : kScalarCases) {
      ProgramBuilder b{.n_operands = 2, .out_dtype = dt};
      sc.build(b);
      Program program = Program::build(b.program(), 1, 1);
      std::vector<double> got = run_in_memory(program, {dt}, {x}, {scalar}, n)[0];
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], sc.ref(x[i], scalar))
            << sc.name << " on " << dtype_name(dt) << ", element " << i;
      }
    }
  }
}

TEST(Program, ResultsRoundOnceToTheStorageDtype) {
  // 1/3 in a float16 register is float16's 1/3; the product of two float16
  // values is computed in float and rounded once to float16.
  Program scale{2 + 1, DType::f16, Reduction::kNone, 2, {Instr{Opcode::kMul, 2, 0, 1, 0}}};
  std::vector<double> got = run_in_memory(scale, {DType::f16}, {{1, 2, 3}}, {1.0 / 3.0}, 3)[0];
  const float third = f16_to_f32(f32_to_f16(static_cast<float>(1.0 / 3.0)));
  for (int i = 0; i < 3; ++i) {
    float expected = f16_to_f32(f32_to_f16(static_cast<float>(1.0 + i) * third));
    EXPECT_EQ(got[i], expected) << i;
  }
}

TEST(Program, ConversionsInsideAProgramChangeTheRegisterDtype) {
  // float32(int32 x) * 0.5, then int32 again, then == x: one pass over three dtypes.
  ProgramBuilder b{.n_operands = 2, .out_dtype = DType::b8};
  const int32_t f = b.add(Opcode::kToF32, 0), half = b.add(Opcode::kMul, f, 1),
                back = b.add(Opcode::kToI32, half);
  b.add(Opcode::kEq, back, 0);
  ProgramCode code = b.program();
  code.scalar_dtypes = {static_cast<int64_t>(DType::f32)};
  Program program = Program::build(code, 1, 1);
  std::vector<double> got =
      run_in_memory(program, {DType::i32}, {{0, 1, 2, -3, 16777217}}, {1.0}, 5)[0];
  // 16777217 is not a float32: it comes back as 16777216
  EXPECT_EQ(got, (std::vector<double>{1, 1, 1, 1, 0}));
}

TEST(Program, Int32ArithmeticWrapsAround) {
  const double big = std::numeric_limits<int32_t>::max(),
               small = std::numeric_limits<int32_t>::min();
  // Products stay below 2^53, where double registers hold them exactly.
  std::vector<double> a = {big, small, big, 65536, 46341, 7, -7},
                      b = {1, -1, 2, 65536, 46341, 2, 2};
  auto run = [&](Opcode op) {
    return run_in_memory(one_instruction(op, 2, DType::i32), {DType::i32, DType::i32}, {a, b}, {},
                         7)[0];
  };
  auto wrap = [](double v) { return wrap32(v); };
  std::vector<double> sum = run(Opcode::kAdd), diff = run(Opcode::kSub), prod = run(Opcode::kMul);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(sum[i], wrap(a[i] + b[i])) << i;
    EXPECT_EQ(diff[i], wrap(a[i] - b[i])) << i;
    EXPECT_EQ(prod[i], wrap(a[i] * b[i])) << i;
  }
  EXPECT_EQ(sum[0], small) << "INT32_MAX + 1 wraps to INT32_MIN";
  EXPECT_EQ(prod[3], 0) << "2^16 * 2^16 wraps to 0";
  EXPECT_EQ(run(Opcode::kNeg)[1], small) << "-INT32_MIN wraps to itself";
  std::vector<double> quot = run(Opcode::kDiv);
  EXPECT_EQ(quot[5], 3) << "7 / 2 truncates toward zero";
  EXPECT_EQ(quot[6], -3) << "-7 / 2 truncates toward zero";
}

TEST(Program, ComparisonsAndLogicStoreBooleans) {
  std::vector<double> x = {1.5, -2, 3, 0}, y = {1.5, 2, -3, 0}, p = {1, 0, 1, 0}, q = {1, 1, 0, 0};
  // x < y into bool
  Program lt = one_instruction(Opcode::kLt, 2, DType::b8);
  EXPECT_EQ(run_in_memory(lt, {DType::f32, DType::f32}, {x, y}, {}, 4)[0],
            (std::vector<double>{0, 1, 0, 0}));
  // Boolean operands: p and q, not p.
  Program both = one_instruction(Opcode::kAnd, 2, DType::b8);
  EXPECT_EQ(run_in_memory(both, {DType::b8, DType::b8}, {p, q}, {}, 4)[0],
            (std::vector<double>{1, 0, 0, 0}));
  Program negated = one_instruction(Opcode::kNot, 1, DType::b8);
  EXPECT_EQ(run_in_memory(negated, {DType::b8}, {p}, {}, 4)[0], (std::vector<double>{0, 1, 0, 1}));
  // where(p, x, y): a bool condition choosing between float32 values.
  Program where = one_instruction(Opcode::kSelect, 3, DType::f32);
  EXPECT_EQ(run_in_memory(where, {DType::b8, DType::f32, DType::f32}, {p, x, y}, {}, 4)[0],
            (std::vector<double>{1.5, 2, 3, 0}));
}

TEST(Program, OperandsOfDifferentDtypesAreLoadedEachInItsOwn) {
  // float64(int32) + float64(float16), stored as float64.
  ProgramBuilder b{.n_operands = 2, .out_dtype = DType::f64};
  b.add(Opcode::kAdd, b.add(Opcode::kToF64, 0), b.add(Opcode::kToF64, 1));
  Program add = Program::build(b.program(), 2, 0);
  std::vector<double> got =
      run_in_memory(add, {DType::i32, DType::f16}, {{100000, -3}, {0.5, 0.25}}, {}, 2)[0];
  EXPECT_EQ(got, (std::vector<double>{100000.5, -2.75}));
}

TEST(Program, MaxAndMinPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> a = {nan, 1, 2}, b = {1, nan, 3};
  for (Opcode op : {Opcode::kMax, Opcode::kMin}) {
    std::vector<double> got = run_in_memory(one_instruction(op, 2, DType::f32),
                                            {DType::f32, DType::f32}, {a, b}, {}, 3)[0];
    EXPECT_TRUE(std::isnan(got[0]));
    EXPECT_TRUE(std::isnan(got[1]));
    EXPECT_EQ(got[2], op == Opcode::kMax ? 3 : 2);
  }
  for (Reduction r : {Reduction::kMax, Reduction::kMin}) {
    Program reduce{2, DType::f32, r, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}};
    ProgramRunner runner(reduce, {DType::f32}, {});
    std::vector<float> values = {1, -4, 9, 2};
    runner.run({values.data()}, nullptr, 4);
    EXPECT_EQ(runner.reduced(), r == Reduction::kMax ? 9 : -4);
    float with_nan[] = {1, std::numeric_limits<float>::quiet_NaN(), 100};
    runner.run({with_nan}, nullptr, 3);
    EXPECT_TRUE(std::isnan(runner.reduced()));
    runner.run({values.data()}, nullptr, 4);
    EXPECT_TRUE(std::isnan(runner.reduced())) << "NaN stays once seen";
  }
}

// sum(x) and sum(x * y), the full reductions, in memory.
double run_sum(DType dt, const std::vector<double>& a, const std::vector<double>* b) {
  Program program = b ? Program{3, dt, Reduction::kSum, 2, {Instr{Opcode::kMul, 2, 0, 1, 0}}}
                      : Program{2, dt, Reduction::kSum, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}};
  std::vector<DType> dtypes(b ? 2 : 1, dt);
  ProgramRunner runner(program, dtypes, {});
  std::vector<unsigned char> ea = test::encode(dt, a), eb = test::encode(dt, b ? *b : a);
  std::vector<const void*> in = {ea.data()};
  if (b) in.push_back(eb.data());
  runner.run(in, nullptr, static_cast<int64_t>(a.size()));
  return runner.reduced();
}

TEST(Program, SumsMatchADoubleLoop) {
  for (DType dt : kAllDTypes) {
    for (int64_t n : {0, 1, 3, 4, 37, 1001, 2500}) {
      std::vector<double> a = test_values(n, 1), b = test_values(n, 2);
      double sum = 0, dot = 0;
      for (int64_t i = 0; i < n; ++i) {
        sum += a[i];
        dot += a[i] * b[i];
      }
      EXPECT_EQ(run_sum(dt, a, nullptr), sum) << dtype_name(dt) << " n=" << n;
      EXPECT_EQ(run_sum(dt, a, &b), dot) << dtype_name(dt) << " n=" << n;
    }
  }
}

TEST(Program, SumsAccumulateInDouble) {
  // 2^24 + 1 + 1 + ... is lost entirely when accumulated in float.
  std::vector<double> a(9, 1.0);
  a[0] = 16777216.0;
  EXPECT_EQ(run_sum(DType::f32, a, nullptr), 16777224.0);
}

TEST(Program, SeveralOutputsAreStoredFromTheirRegisters) {
  // m = x * y, s = m + 1, t = s * x: outputs (m, s, t), then (t, m).
  ProgramBuilder b{.n_operands = 3};
  const int32_t m = b.add(Opcode::kMul, 0, 1), s = b.add(Opcode::kAdd, m, 2),
                t = b.add(Opcode::kMul, s, 0);
  const int64_t n = 2500;
  std::vector<double> x = test_values(n, 1), y = test_values(n, 2);
  for (const std::vector<int32_t>& outputs :
       {std::vector<int32_t>{m, s, t}, std::vector<int32_t>{t, m}}) {
    b.outputs = outputs;
    Program program = Program::build(b.program(), 2, 1);
    ASSERT_EQ(program.n_outputs(), outputs.size());
    auto got = run_in_memory(program, {DType::f32, DType::f32}, {x, y}, {1.0}, n);
    for (size_t o = 0; o < outputs.size(); ++o) {
      for (int64_t i = 0; i < n; ++i) {
        const double mv = x[i] * y[i], sv = mv + 1, tv = sv * x[i];
        const double want = outputs[o] == m ? mv : outputs[o] == s ? sv : tv;
        ASSERT_EQ(got[o][i], want) << "output " << o << ", element " << i;
      }
    }
  }
}

TEST(Program, RunnerChecksTheNumberOfOutputBuffers) {
  ProgramBuilder b{.n_operands = 1};
  const int32_t r = b.add(Opcode::kNeg, 0);
  b.outputs = {r, 0};
  Program two = Program::build(b.program(), 1, 0);
  ProgramRunner runner(two, {DType::f32}, {});
  float x = 1, out1 = 0, out2 = 0;
  EXPECT_THROW(runner.run({&x}, &out1, 1), ValueError) << "one buffer for two outputs";
  EXPECT_THROW(runner.run({&x}, std::vector<void*>{&out1}, 1), ValueError);
  runner.run({&x}, std::vector<void*>{&out1, &out2}, 1);
  EXPECT_EQ(out1, -1);
  EXPECT_EQ(out2, 1);
}

// Program::build rejects each malformation with a ValueError; `inputs` and
// `scalars` count the operands (registers 0..inputs+scalars-1).
void expect_malformed(const ProgramCode& code, size_t inputs, size_t scalars,
                      const std::string& why) {
  try {
    Program::build(code, inputs, scalars);
    ADD_FAILURE() << "accepted: " << why;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed elementwise program"), std::string::npos)
        << e.what();
  }
}

TEST(Program, BuildRejectsMalformedPrograms) {
  const int64_t add = static_cast<int64_t>(Opcode::kAdd);
  // A valid one first: r2 = r0 + r1.
  const ProgramCode good{3, DType::f32, 0, {2}, {add}, {2}, {0}, {1}, {0}};
  EXPECT_NO_THROW(Program::build(good, 2, 0));
  auto with = [&](auto change) {
    ProgramCode p = good;
    change(p);
    return p;
  };
  expect_malformed(with([](ProgramCode& p) { p.dst.clear(); }), 2, 0, "fields of unequal length");
  expect_malformed(with([](ProgramCode& p) { p.out_regs.clear(); }), 2, 0, "no output register");
  expect_malformed(with([](ProgramCode& p) { p.reduction = 7; }), 2, 0, "unknown reduction");
  expect_malformed(with([](ProgramCode& p) { p.reduction = -1; }), 2, 0, "negative reduction");
  expect_malformed(with([](ProgramCode& p) { p.op = {999}; }), 2, 0, "unknown opcode");
  expect_malformed(with([](ProgramCode& p) { p.op = {-1}; }), 2, 0, "negative opcode");
  expect_malformed(with([](ProgramCode& p) { p.dst = {0}; }), 2, 0,
                   "an instruction writing an input register");
  expect_malformed(with([](ProgramCode& p) { p.dst = {3}; }), 2, 0, "destination past n_regs");
  expect_malformed(with([](ProgramCode& p) { p.a = {3}; }), 2, 0, "operand register past n_regs");
  expect_malformed(with([](ProgramCode& p) { p.b = {-1}; }), 2, 0, "negative operand register");
  expect_malformed(with([](ProgramCode& p) { p.out_regs = {3}; }), 2, 0,
                   "output register past n_regs");
  expect_malformed(with([](ProgramCode& p) { p.out_regs = {-1}; }), 2, 0,
                   "negative output register");
  expect_malformed(good, 2, 2, "fewer registers than operands");
  expect_malformed(with([](ProgramCode& p) { p.n_regs = 5000; }), 2, 0, "too many registers");
  // Several outputs: further registers in out_regs.
  const ProgramCode two = with([](ProgramCode& p) { p.out_regs = {2, 0}; });
  EXPECT_EQ(Program::build(two, 2, 0).n_outputs(), 2u);
  expect_malformed(with([](ProgramCode& p) {
                     p.out_regs = {2, 3};
                   }),
                   2, 0, "further output register past n_regs");
  ProgramCode reduced_two = two;
  reduced_two.reduction = static_cast<int64_t>(Reduction::kSum);
  expect_malformed(reduced_two, 2, 0, "a reduction with several outputs");
}

// --- out of core: map_program, map_program_outputs, reduce_program ---

// The ops the engine once had as single kernels, as Python's encode writes
// them: the arrays (x, and y for binary ops), then the scalar s, which is
// register 1 after one array and 2 after two.
struct MapCase {
  const char* name;
  int arrays;
  std::function<void(ProgramBuilder&)> build;
  std::function<double(double, double, double)> ref;
};

const std::vector<MapCase> kMapCases = {
    {"add", 2, [](ProgramBuilder& p) { p.add(Opcode::kAdd, 0, 1); },
     [](double x, double y, double) { return x + y; }},
    {"sub", 2, [](ProgramBuilder& p) { p.add(Opcode::kSub, 0, 1); },
     [](double x, double y, double) { return x - y; }},
    {"mul", 2, [](ProgramBuilder& p) { p.add(Opcode::kMul, 0, 1); },
     [](double x, double y, double) { return x * y; }},
    {"neg", 1, [](ProgramBuilder& p) { p.add(Opcode::kNeg, 0); },
     [](double x, double, double) { return -x; }},
    {"square", 1, [](ProgramBuilder& p) { p.add(Opcode::kSquare, 0); },
     [](double x, double, double) { return x * x; }},
    {"scale", 1, [](ProgramBuilder& p) { p.add(Opcode::kMul, 0, 1); },
     [](double x, double, double s) { return x * s; }},
    {"add_scalar", 1, [](ProgramBuilder& p) { p.add(Opcode::kAdd, 0, 1); },
     [](double x, double, double s) { return x + s; }},
    {"rsub_scalar", 1, [](ProgramBuilder& p) { p.add(Opcode::kSub, 1, 0); },
     [](double x, double, double s) { return s - x; }},
    {"copy", 1, [](ProgramBuilder& p) { p.add(Opcode::kCopy, 0); },
     [](double x, double, double) { return x; }},
};

const MapCase& map_case(const std::string& name) {
  for (const auto& c : kMapCases) {
    if (name == c.name) return c;
  }
  throw std::invalid_argument("no map case " + name);
}

void check_map_case(const MapCase& mc, DType dt, const std::vector<int64_t>& shape, double scalar) {
  const int64_t n = test::numel_of(shape);
  // Halves are exact in every float dtype; int32 takes whole numbers.
  const double offset = dt == DType::i32 ? 0.0 : 0.5;
  std::vector<double> x = test_values(n, 1, 6, offset), y = test_values(n, 2, 6, offset);
  std::vector<int32_t> handles = {make_array(dt, shape, x)};
  if (mc.arrays == 2) handles.push_back(make_array(dt, shape, y));
  ProgramBuilder b{.out_shape = shape, .n_operands = mc.arrays + 1, .out_dtype = dt};
  mc.build(b);
  int32_t out = run_map(mc.name, handles, {}, {scalar}, b.params());
  ArrayRef arr = Registry::instance().get(out);
  EXPECT_EQ(arr->info().dtype, dt);
  EXPECT_EQ(arr->info().shape, shape);
  EXPECT_TRUE(arr->is_scratch());
  std::vector<double> got = array_values(out);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], mc.ref(x[i], y[i], scalar))
        << mc.name << " on " << dtype_name(dt) << ", element " << i;
  }
}

TEST(Programs, TheFormerSingleKernelOpsMatchAnElementwiseReference) {
  ScratchDir scratch;
  BudgetGuard budget(8192);
  TaskCount tasks;
  for (const MapCase& mc : kMapCases) check_map_case(mc, DType::f32, {97, 61}, 2.5);
  // Blocks of a few hundred elements: over ten per op, the last one ragged.
  EXPECT_GT(tasks.delta(), kMapCases.size() * 10);
}

TEST(Programs, WorkOnEveryDtype) {
  ScratchDir scratch;
  BudgetGuard budget(16384);
  for (DType dt : kAllDTypes) {
    const double scalar = dt == DType::i32 ? 3.0 : 2.5;
    for (const char* name : {"add", "mul", "scale", "rsub_scalar"})
      check_map_case(map_case(name), dt, {37, 23}, scalar);
  }
}

TEST(Programs, AcceptZeroDimensionalAndEmptyArrays) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  check_map_case(map_case("add"), DType::f32, {}, 0);
  check_map_case(map_case("neg"), DType::f32, {0, 5}, 0);

  ProgramBuilder sum{.out_shape = {}, .n_operands = 1, .reduction = Reduction::kSum};
  sum.add(Opcode::kCopy, 0);
  EXPECT_EQ(run_map_reduce("sum", {make_array(DType::f32, {}, {2.5})}, {}, {}, sum.params()), 2.5);
  const int32_t empty = make_array(DType::f32, {0, 5}, {});
  sum.out_shape = {0, 5};
  EXPECT_EQ(run_map_reduce("sum", {empty}, {}, {}, sum.params()), 0.0);

  ProgramBuilder two{.out_shape = {0, 5}, .n_operands = 1};
  two.outputs = {two.add(Opcode::kNeg, 0), 0};
  std::vector<int32_t> outs = run_map_multi("neg", {empty}, {}, {}, two.params());
  ASSERT_EQ(outs.size(), 2u);
  for (int32_t h : outs) EXPECT_EQ(array_shape(h), (std::vector<int64_t>{0, 5}));
}

// sum(x), or sum(x * y) with two arrays, over arrays on disk.
double sum_on_disk(DType dt, const std::vector<int32_t>& handles,
                   const std::vector<int64_t>& shape) {
  ProgramBuilder b{.out_shape = shape,
                   .n_operands = static_cast<int32_t>(handles.size()),
                   .out_dtype = dt,
                   .reduction = Reduction::kSum};
  if (handles.size() == 1)
    b.add(Opcode::kCopy, 0);
  else
    b.add(Opcode::kMul, 0, 1);
  return run_map_reduce(handles.size() == 1 ? "sum" : "vdot", handles, {}, {}, b.params());
}

TEST(Programs, SumsMatchADoubleReference) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  for (DType dt : kAllDTypes) {
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{97, 61}, {37, 23}, {1}, {0}}) {
      const int64_t n = test::numel_of(shape);
      std::vector<double> a = test_values(n, 1), b = test_values(n, 2);
      int32_t ha = make_array(dt, shape, a), hb = make_array(dt, shape, b);
      double sum = 0, dot = 0;
      for (int64_t i = 0; i < n; ++i) {
        sum += a[i];
        dot += a[i] * b[i];
      }
      EXPECT_EQ(sum_on_disk(dt, {ha}, shape), sum) << dtype_name(dt) << " n=" << n;
      EXPECT_EQ(sum_on_disk(dt, {ha, hb}, shape), dot) << dtype_name(dt) << " n=" << n;
    }
  }
}

TEST(Programs, MaxAndMinOfAnExpression) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {97, 61};
  const int64_t n = test::numel_of(shape);
  std::vector<double> x = test_values(n, 1, 6, 0.5), y = test_values(n, 2, 6, 0.5);
  const std::vector<int32_t> handles = {make_array(DType::f32, shape, x),
                                        make_array(DType::f32, shape, y)};
  for (Reduction r : {Reduction::kMax, Reduction::kMin}) {
    // max (or min) of x * y - 1.5
    ProgramBuilder b{.out_shape = shape, .n_operands = 3, .reduction = r};
    b.add(Opcode::kSub, b.add(Opcode::kMul, 0, 1), 2);
    double want = r == Reduction::kMax ? -INFINITY : INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      want = r == Reduction::kMax ? std::max(want, x[i] * y[i] - 1.5)
                                  : std::min(want, x[i] * y[i] - 1.5);
    }
    EXPECT_EQ(run_map_reduce("mul+sub+max", handles, {}, {1.5}, b.params()), want);
  }
}

// Every reduction of the table at the end of a program, against its loop
// reference: v = x * y / 2 with x, y whole numbers in [-2, 2], and 1 where v
// is 0, so that the product of 851 factors is neither 0 nor out of range.
// Sums, products (of powers of two) and extremes are then exact in any order.
TEST(Programs, EveryReductionOfTheTableMatchesItsReference) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {37, 23};
  const int64_t n = test::numel_of(shape);
  std::vector<double> x = test_values(n, 1, 2), y = test_values(n, 2, 2), v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = x[i] * y[i] == 0 ? 1 : x[i] * y[i] / 2;
  const std::vector<int32_t> handles = {make_array(DType::f32, shape, x),
                                        make_array(DType::f32, shape, y)};
  EXPECT_EQ(test::reduction_references().size(), std::size(kReductions));
  for (const ReductionRule& rule : kReductions) {
    // registers: x, y, then the scalars 0, 1, 0.5
    ProgramBuilder b{.out_shape = shape, .n_operands = 5, .reduction = rule.kind};
    const int32_t half = b.add(Opcode::kMul, b.add(Opcode::kMul, 0, 1), 4);
    b.add(Opcode::kSelect, b.add(Opcode::kEq, half, 2), 3, half);
    const double want = test::reduction_references().at(rule.name)(v);
    EXPECT_EQ(run_map_reduce(rule.name, handles, {}, {0.0, 1.0, 0.5}, b.params()), want)
        << rule.name;
  }
}

TEST(Programs, TwoAndThreeOutputsAreWrittenInOnePass) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {97, 61};
  const int64_t n = test::numel_of(shape);
  std::vector<double> x = test_values(n, 1, 6, 0.5), y = test_values(n, 2, 6, 0.5);
  const std::vector<int32_t> handles = {make_array(DType::f32, shape, x),
                                        make_array(DType::f32, shape, y)};
  // m = x * y, v = m + s, u = v * x: a new state and an update computed from it.
  ProgramBuilder b{.out_shape = shape, .n_operands = 3};
  const int32_t m = b.add(Opcode::kMul, 0, 1), v = b.add(Opcode::kAdd, m, 2),
                u = b.add(Opcode::kMul, v, 0);
  auto reference = [&](int32_t reg, int64_t i) {
    const double mv = x[i] * y[i], vv = mv + 1.5;
    return reg == m ? mv : reg == v ? vv : vv * x[i];
  };
  for (const std::vector<int32_t>& outputs :
       {std::vector<int32_t>{m, u}, std::vector<int32_t>{m, v, u}}) {
    b.outputs = outputs;
    // Two inputs and the outputs share the budget; one pass is one task per block.
    const int64_t block =
        plan_stream_block("test", "test", n, 4 * (2 + static_cast<int64_t>(outputs.size())), 0);
    TaskCount tasks;
    std::vector<int32_t> outs = run_map_multi("mul+add+mul", handles, {}, {1.5}, b.params());
    EXPECT_EQ(tasks.delta(), static_cast<uint64_t>((n + block - 1) / block));
    EXPECT_GT(tasks.delta(), 20u) << "many small blocks";
    ASSERT_EQ(outs.size(), outputs.size());
    EXPECT_EQ(std::set<int32_t>(outs.begin(), outs.end()).size(), outs.size())
        << "distinct handles";
    for (size_t o = 0; o < outs.size(); ++o) {
      EXPECT_EQ(Registry::instance().get(outs[o])->info().describe(), "float32[97,61]");
      std::vector<double> got = array_values(outs[o]);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i], reference(outputs[o], i)) << "output " << o << ", element " << i;
    }
  }
}

// Blocks of several hundred thousand elements are cut between compute
// threads; every element still comes out as the reference has it, in float64
// too, across blocks whose length is not a multiple of any share.
TEST(Programs, BlocksSplitBetweenComputeThreadsGiveEveryElementExactly) {
  ScratchDir scratch;
  BudgetGuard budget(24 << 20);
  for (DType dt : {DType::f32, DType::f64}) {
    const std::vector<int64_t> shape = {1000003};
    const int64_t n = test::numel_of(shape);
    std::vector<double> x = test_values(n, 1, 6, 0.25), y = test_values(n, 2, 6, 0.5);
    const std::vector<int32_t> handles = {make_array(dt, shape, x), make_array(dt, shape, y)};
    // m = x * y, v = m + x.
    ProgramBuilder b{.out_shape = shape, .n_operands = 2};
    const int32_t m = b.add(Opcode::kMul, 0, 1), v = b.add(Opcode::kAdd, m, 0);
    b.outputs = {m, v};
    TaskCount tasks;
    std::vector<int32_t> outs = run_map_multi("mul+add", handles, {}, {}, b.params());
    EXPECT_GE(tasks.delta(), 2u) << "several blocks";
    const std::vector<double> got_m = array_values(outs[0]), got_v = array_values(outs[1]);
    for (int64_t i = 0; i < n; ++i) {
      const auto xf = static_cast<float>(x[i]), yf = static_cast<float>(y[i]);
      const double mv = dt == DType::f32 ? static_cast<double>(xf * yf) : x[i] * y[i];
      const double vv = dt == DType::f32 ? static_cast<double>(xf * yf + xf) : mv + x[i];
      ASSERT_EQ(got_m[i], mv) << dtype_name(dt) << " element " << i;
      ASSERT_EQ(got_v[i], vv) << dtype_name(dt) << " element " << i;
    }
  }
}

TEST(Programs, SeveralOutputsNeedMapProgramOutputsAndNoReduction) {
  ScratchDir scratch;
  const int32_t x = make_array(DType::f32, {3}, {1, 2, 3});
  ProgramBuilder two{.out_shape = {3}, .n_operands = 1};
  two.outputs = {two.add(Opcode::kNeg, 0), 0};
  const size_t live = Registry::instance().size();
  expect_error_mentioning<ValueError>([&] { run_map("neg", {x}, {}, {}, two.params()); },
                                      {"neg", "2 outputs"});
  EXPECT_EQ(Registry::instance().size(), live) << "the outputs of a refused call stay registered";
  two.reduction = Reduction::kSum;
  expect_error_mentioning<ValueError>([&] { run_map_reduce("neg", {x}, {}, {}, two.params()); },
                                      {"several outputs", "reduction"});

  ProgramBuilder sum{.out_shape = {3}, .n_operands = 1, .reduction = Reduction::kSum};
  sum.add(Opcode::kCopy, 0);
  expect_error_mentioning<ValueError>([&] { run_map_multi("sum", {x}, {}, {}, sum.params()); },
                                      {"sum", "reduction"});
  EXPECT_THROW(run_map("sum", {x}, {}, {}, sum.params()), ValueError);
  ProgramBuilder neg{.out_shape = {3}, .n_operands = 1};
  neg.add(Opcode::kNeg, 0);
  expect_error_mentioning<ValueError>([&] { run_map_reduce("neg", {x}, {}, {}, neg.params()); },
                                      {"neg", "no reduction"});
  EXPECT_EQ(Registry::instance().size(), live);
}

TEST(Programs, MalformedParamsAreValueErrorsNamingTheOp) {
  ScratchDir scratch;
  const int32_t x = make_array(DType::f32, {3}, {1, 2, 3});
  ProgramBuilder good{.out_shape = {3}, .n_operands = 1};
  good.add(Opcode::kNeg, 0);
  EXPECT_EQ(array_values(run_map("neg", {x}, {}, {}, good.params())),
            (std::vector<double>{-1, -2, -3}));
  // Calls that do not match the map kernel's schema name the kernel and the field.
  auto with = [&](const char* field, AttrValue value) {
    Attrs a = good.params();
    a[field] = std::move(value);
    return a;
  };
  Attrs missing = good.params();
  missing.erase("shape");
  const std::vector<std::pair<Attrs, std::vector<std::string>>> malformed = {
      {missing, {"kernel 'map'", "'shape'", "missing"}},
      {with("shape", std::string("3")), {"kernel 'map'", "'shape'", "int64 array", "a string"}},
      {with("n_regs", std::vector<int64_t>{2}), {"kernel 'map'", "'n_regs'", "an int64"}},
      {with("out_dtype", int64_t{42}), {"kernel 'map'", "'out_dtype'", "dtype"}},
      {with("frobnicate", int64_t{1}), {"kernel 'map'", "'frobnicate'", "not a parameter"}},
      {with("memory_dtypes", std::vector<int64_t>{0}), {"kernel 'map'", "'memory_dtypes'"}},
      {with("shape", std::vector<int64_t>{-3}), {"neg", "negative extent"}},
      {with("a", std::vector<int64_t>{7}), {"neg", "malformed"}},
  };
  for (const auto& [params, needles] : malformed) {
    try {
      run_map("neg", {x}, {}, {}, params);
      ADD_FAILURE() << "accepted a malformed call";
    } catch (const std::exception& e) {  // ValueError, or TypeError for the dtype code
      for (const auto& needle : needles) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
            << "'" << needle << "' not in: " << e.what();
      }
    }
  }
  // An in-memory operand of another size than its header says.
  ProgramBuilder with_memory{.out_shape = {3}, .n_operands = 2, .memory = {{DType::f32, {3}}}};
  with_memory.add(Opcode::kAdd, 0, 1);
  std::vector<float> two_values = {1, 2};
  expect_error_mentioning<ValueError>(
      [&] {
        run_map("add", {x}, {MemoryOperand{two_values.data(), 8}}, {}, with_memory.params());
      },
      {"add", "in-memory operand of 8 bytes", "float32[3]"});
  // More operands than the program has registers for, and an unknown handle.
  EXPECT_THROW(run_map("neg", {x, x}, {}, {}, good.params()), ValueError);
  EXPECT_THROW(run_map("neg", {987654}, {}, {}, good.params()), ValueError);
}

// The values of an operand of `shape` at every position of `out`, by NumPy's
// broadcasting rule, computed by brute force.
std::vector<double> broadcast_reference(const std::vector<double>& values,
                                        const std::vector<int64_t>& shape,
                                        const std::vector<int64_t>& out) {
  const size_t nd = out.size();
  std::vector<int64_t> padded(nd - shape.size(), 1);
  padded.insert(padded.end(), shape.begin(), shape.end());
  std::vector<double> result(static_cast<size_t>(test::numel_of(out)));
  for (int64_t flat = 0; flat < static_cast<int64_t>(result.size()); ++flat) {
    int64_t rest = flat, src = 0, stride = 1;
    for (size_t d = nd; d-- > 0;) {
      const int64_t i = rest % out[d];
      rest /= out[d];
      if (padded[d] != 1) src += i * stride;
      stride *= padded[d];
    }
    result[flat] = values[src];
  }
  return result;
}

TEST(Programs, SmallerOperandsBroadcastToTheOutput) {
  ScratchDir scratch;
  BudgetGuard budget(8192);  // a quarter, 2048 bytes, for operands kept whole
  struct Case {
    std::vector<int64_t> out;
    std::vector<std::vector<int64_t>> operands;
  };
  const std::vector<Case> cases = {
      // A row, a column, a 1x1 and a 0-d array: small, loaded whole.
      {{97, 61}, {{97, 61}, {61}, {97, 1}, {1, 61}, {}}},
      // Too large to keep: (40, 30, 1) varies along leading axes only (one
      // range per block); (40, 1, 20) and (30, 20) are gathered run by run.
      {{40, 30, 20}, {{40, 30, 20}, {40, 30, 1}, {40, 1, 20}, {30, 20}}},
      // No operand of the output's shape at all.
      {{50, 40}, {{50, 1}, {40}}},
  };
  for (const Case& c : cases) {
    const int64_t n = test::numel_of(c.out);
    std::vector<int32_t> handles;
    std::vector<std::vector<double>> spread;  // each operand at every output position
    for (size_t k = 0; k < c.operands.size(); ++k) {
      std::vector<double> values =
          test_values(test::numel_of(c.operands[k]), static_cast<int>(k) + 1, 6, 0.5);
      handles.push_back(make_array(DType::f32, c.operands[k], values));
      spread.push_back(broadcast_reference(values, c.operands[k], c.out));
    }
    // o0 + o1 - o2 + o3 - ..., keeping the first partial result as a second output.
    ProgramBuilder b{.out_shape = c.out, .n_operands = static_cast<int32_t>(handles.size())};
    int32_t acc = b.add(Opcode::kAdd, 0, 1);
    const int32_t first = acc;
    for (int32_t k = 2; k < b.n_operands; ++k)
      acc = b.add(k % 2 ? Opcode::kAdd : Opcode::kSub, acc, k);
    b.outputs = {acc, first};
    TaskCount tasks;
    std::vector<int32_t> outs = run_map_multi("broadcast", handles, {}, {}, b.params());
    EXPECT_GT(tasks.delta(), 5u);
    std::vector<double> want(n), want_first(n);
    for (int64_t i = 0; i < n; ++i) {
      want_first[i] = spread[0][i] + spread[1][i];
      want[i] = want_first[i];
      for (size_t k = 2; k < spread.size(); ++k) want[i] += k % 2 ? spread[k][i] : -spread[k][i];
    }
    EXPECT_EQ(array_shape(outs[0]), c.out);
    EXPECT_EQ(array_values(outs[0]), want) << testing::PrintToString(c.out);
    EXPECT_EQ(array_values(outs[1]), want_first) << testing::PrintToString(c.out);
  }
}

TEST(Programs, OperandsThatDoNotBroadcastAreRefusedNamingTheShapes) {
  ScratchDir scratch;
  const int32_t a = make_array(DType::f32, {3, 4}, test_values(12)),
                b = make_array(DType::f32, {4, 3}, test_values(12));
  ProgramBuilder add{.out_shape = {3, 4}, .n_operands = 2};
  add.add(Opcode::kAdd, 0, 1);
  expect_error_mentioning<ValueError>(
      [&] {
        run_map("add", {a, b}, {}, {}, add.params());
      },
      {"add", "float32[4,3]", "(4, 3)", "(3, 4)"});
  // An operand larger than the output.
  ProgramBuilder neg{.out_shape = {4}, .n_operands = 1};
  neg.add(Opcode::kNeg, 0);
  expect_error_mentioning<ValueError>([&] { run_map("neg", {a}, {}, {}, neg.params()); },
                                      {"neg", "(3, 4)"});
  // An in-memory operand likewise.
  std::vector<float> row(3, 1.0f);
  ProgramBuilder mem{.out_shape = {3, 4}, .n_operands = 2, .memory = {{DType::f32, {3}}}};
  mem.add(Opcode::kAdd, 0, 1);
  expect_error_mentioning<ValueError>(
      [&] {
        run_map("add", {a}, {MemoryOperand{row.data(), 12}}, {}, mem.params());
      },
      {"add", "(3,)", "(3, 4)"});
}

TEST(Programs, InMemoryOperandsAreReadInPlace) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {97, 61};
  const int64_t n = test::numel_of(shape);
  std::vector<double> x = test_values(n, 1, 6, 0.5);
  const int32_t hx = make_array(DType::f32, shape, x);
  // A bias row (float32), a full-shape float64 array and a column (float32), as XLA holds them.
  std::vector<float> bias(61), column(97);
  std::vector<double> full(static_cast<size_t>(n));
  for (int64_t i = 0; i < 61; ++i) bias[i] = static_cast<float>(test::test_value(i, 2) + 0.5);
  for (int64_t i = 0; i < 97; ++i) column[i] = static_cast<float>(test::test_value(i, 3));
  for (int64_t i = 0; i < n; ++i) full[i] = test::test_value(i, 4) + 0.25;
  const std::vector<MemoryOperand> buffers = {{bias.data(), bias.size() * 4},
                                              {full.data(), full.size() * 8},
                                              {column.data(), column.size() * 4}};
  // Registers: x, bias, full, column, then the scalar s. ((x * bias + float32(full)) - column) * s.
  ProgramBuilder b{.out_shape = shape,
                   .n_operands = 5,
                   .memory = {{DType::f32, {61}}, {DType::f64, {97, 61}}, {DType::f32, {97, 1}}}};
  const int32_t full32 = b.add(Opcode::kToF32, 2);
  b.add(Opcode::kMul,
        b.add(Opcode::kSub, b.add(Opcode::kAdd, b.add(Opcode::kMul, 0, 1), full32), 3), 4);
  std::vector<double> got = array_values(run_map("dense_layer", {hx}, buffers, {2.0}, b.params()));
  for (int64_t i = 0; i < n; ++i) {
    const double want = ((x[i] * bias[i % 61] + full[i]) - column[i / 61]) * 2.0;
    ASSERT_EQ(got[i], static_cast<float>(want)) << "element " << i;
  }

  // No array on disk at all: an in-memory row broadcast to a DiskArray, and a scalar alone.
  ProgramBuilder spread{.out_shape = shape, .n_operands = 1, .memory = {{DType::f32, {61}}}};
  spread.add(Opcode::kCopy, 0);
  std::vector<double> rows =
      array_values(run_map("broadcast_to", {}, {buffers[0]}, {}, spread.params()));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(rows[i], bias[i % 61]) << "element " << i;
  ProgramBuilder full_of{.out_shape = shape, .n_operands = 1, .out_dtype = DType::bf16};
  full_of.outputs = {0};
  const int32_t filled = run_map("full", {}, {}, {2.5}, full_of.params());
  EXPECT_EQ(Registry::instance().get(filled)->info().describe(), "bfloat16[97,61]");
  EXPECT_EQ(array_values(filled), std::vector<double>(static_cast<size_t>(n), 2.5));
}

}  // namespace
}  // namespace jask
