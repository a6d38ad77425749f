#include "program/program.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "base/errors.hpp"
#include "program/special.hpp"

namespace jask {
namespace {

constexpr int64_t kChunk = 1024;  // elements per register: stays in L1/L2

// The dtypes an instruction accepts for its operands (jax.lax's rules).
constexpr uint8_t kFloats = 1, kSigned = 2, kUnsigned = 8, kBool = 4, kComplex = 16;
constexpr uint8_t kInts = kSigned | kUnsigned, kNumbers = kFloats | kInts,
                  kIntegers = kInts | kBool, kAny = kFloats | kInts | kBool | kComplex,
                  kNumbersC = kNumbers | kComplex, kFloatsC = kFloats | kComplex;

struct OpcodeInfo {
  const char* name;
  Opcode op;
  int arity;        // operands read: a; a, b; a, b, c
  uint8_t accepts;  // dtypes of a (select: of b and c)
};

const OpcodeInfo kOpcodes[] = {
    {"copy", Opcode::kCopy, 1, kAny},
    {"neg", Opcode::kNeg, 1, kNumbersC},
    {"square", Opcode::kSquare, 1, kNumbers},
    {"sqrt", Opcode::kSqrt, 1, kFloats},
    {"rsqrt", Opcode::kRsqrt, 1, kFloats},
    {"cbrt", Opcode::kCbrt, 1, kFloats},
    {"abs", Opcode::kAbs, 1, kNumbers},
    {"sign", Opcode::kSign, 1, kNumbers},
    {"exp", Opcode::kExp, 1, kFloatsC},
    {"exp2", Opcode::kExp2, 1, kFloats},
    {"log", Opcode::kLog, 1, kFloats},
    {"log1p", Opcode::kLog1p, 1, kFloats},
    {"expm1", Opcode::kExpm1, 1, kFloats},
    {"tanh", Opcode::kTanh, 1, kFloats},
    {"sigmoid", Opcode::kSigmoid, 1, kFloats},
    {"relu", Opcode::kRelu, 1, kNumbers},
    {"softplus", Opcode::kSoftplus, 1, kFloats},
    {"gelu", Opcode::kGelu, 1, kFloats},
    {"reciprocal", Opcode::kReciprocal, 1, kFloats},
    {"sin", Opcode::kSin, 1, kFloats},
    {"cos", Opcode::kCos, 1, kFloats},
    {"tan", Opcode::kTan, 1, kFloats},
    {"asin", Opcode::kAsin, 1, kFloats},
    {"acos", Opcode::kAcos, 1, kFloats},
    {"atan", Opcode::kAtan, 1, kFloats},
    {"sinh", Opcode::kSinh, 1, kFloats},
    {"cosh", Opcode::kCosh, 1, kFloats},
    {"asinh", Opcode::kAsinh, 1, kFloats},
    {"acosh", Opcode::kAcosh, 1, kFloats},
    {"atanh", Opcode::kAtanh, 1, kFloats},
    {"erf", Opcode::kErf, 1, kFloats},
    {"erfc", Opcode::kErfc, 1, kFloats},
    {"erf_inv", Opcode::kErfInv, 1, kFloats},
    {"lgamma", Opcode::kLgamma, 1, kFloats},
    {"digamma", Opcode::kDigamma, 1, kFloats},
    {"trigamma", Opcode::kTrigamma, 1, kFloats},
    {"floor", Opcode::kFloor, 1, kFloats},
    {"ceil", Opcode::kCeil, 1, kFloats},
    {"round", Opcode::kRound, 1, kFloats},
    {"round_even", Opcode::kRoundEven, 1, kFloats},
    {"is_finite", Opcode::kIsFinite, 1, kFloats},
    {"not", Opcode::kNot, 1, kIntegers},
    {"convert_float32", Opcode::kToF32, 1, kAny},
    {"convert_float64", Opcode::kToF64, 1, kAny},
    {"convert_float16", Opcode::kToF16, 1, kAny},
    {"convert_bfloat16", Opcode::kToBf16, 1, kAny},
    {"convert_int32", Opcode::kToI32, 1, kAny},
    {"convert_bool", Opcode::kToBool, 1, kAny},
    {"add", Opcode::kAdd, 2, kNumbersC},
    {"sub", Opcode::kSub, 2, kNumbersC},
    {"mul", Opcode::kMul, 2, kNumbersC},
    {"div", Opcode::kDiv, 2, kNumbersC},
    {"rem", Opcode::kRem, 2, kNumbers},
    {"max", Opcode::kMax, 2, kIntegers | kFloats},
    {"min", Opcode::kMin, 2, kIntegers | kFloats},
    {"pow", Opcode::kPow, 2, kFloats},
    {"atan2", Opcode::kAtan2, 2, kFloats},
    {"nextafter", Opcode::kNextafter, 2, kFloats},
    {"lt", Opcode::kLt, 2, kIntegers | kFloats},
    {"le", Opcode::kLe, 2, kIntegers | kFloats},
    {"gt", Opcode::kGt, 2, kIntegers | kFloats},
    {"ge", Opcode::kGe, 2, kIntegers | kFloats},
    {"eq", Opcode::kEq, 2, kAny},
    {"ne", Opcode::kNe, 2, kAny},
    {"and", Opcode::kAnd, 2, kIntegers},
    {"or", Opcode::kOr, 2, kIntegers},
    {"xor", Opcode::kXor, 2, kIntegers},
    {"shift_left", Opcode::kShiftLeft, 2, kInts},
    {"shift_right_logical", Opcode::kShiftRightLogical, 2, kInts},
    {"shift_right_arithmetic", Opcode::kShiftRightArithmetic, 2, kInts},
    {"select", Opcode::kSelect, 3, kAny},
    {"clamp", Opcode::kClamp, 3, kNumbers},
    {"convert_int8", Opcode::kToI8, 1, kAny},
    {"convert_int16", Opcode::kToI16, 1, kAny},
    {"convert_int64", Opcode::kToI64, 1, kAny},
    {"convert_uint8", Opcode::kToU8, 1, kAny},
    {"convert_uint16", Opcode::kToU16, 1, kAny},
    {"convert_uint32", Opcode::kToU32, 1, kAny},
    {"convert_uint64", Opcode::kToU64, 1, kAny},
    {"convert_float8_e4m3fn", Opcode::kToF8E4M3Fn, 1, kAny},
    {"convert_float8_e5m2", Opcode::kToF8E5M2, 1, kAny},
    {"convert_float8_e4m3fnuz", Opcode::kToF8E4M3Fnuz, 1, kAny},
    {"convert_float8_e5m2fnuz", Opcode::kToF8E5M2Fnuz, 1, kAny},
    {"convert_float8_e4m3b11fnuz", Opcode::kToF8E4M3B11Fnuz, 1, kAny},
    {"convert_float8_e4m3", Opcode::kToF8E4M3, 1, kAny},
    {"convert_float8_e3m4", Opcode::kToF8E3M4, 1, kAny},
    {"convert_complex64", Opcode::kToC64, 1, kAny},
    {"convert_complex128", Opcode::kToC128, 1, kAny},
};
constexpr size_t kNumOpcodes = sizeof(kOpcodes) / sizeof(kOpcodes[0]);

const OpcodeInfo& info_of(Opcode op) {
  for (const auto& info : kOpcodes) {
    if (info.op == op) return info;
  }
  throw ValueError("unknown opcode " + std::to_string(static_cast<int>(op)));
}

uint8_t category(DType dt) {
  switch (dtype_kind(dt)) {
    case DKind::kFloat: return kFloats;
    case DKind::kSigned: return kSigned;
    case DKind::kUnsigned: return kUnsigned;
    case DKind::kBool: return kBool;
    case DKind::kComplex: return kComplex;
  }
  return 0;
}

// The dtype a conversion instruction gives; nullopt for the other instructions.
std::optional<DType> conversion_target(Opcode op) {
  switch (op) {
    case Opcode::kToF32: return DType::f32;
    case Opcode::kToF64: return DType::f64;
    case Opcode::kToF16: return DType::f16;
    case Opcode::kToBf16: return DType::bf16;
    case Opcode::kToI32: return DType::i32;
    case Opcode::kToBool: return DType::b8;
    case Opcode::kToI8: return DType::i8;
    case Opcode::kToI16: return DType::i16;
    case Opcode::kToI64: return DType::i64;
    case Opcode::kToU8: return DType::u8;
    case Opcode::kToU16: return DType::u16;
    case Opcode::kToU32: return DType::u32;
    case Opcode::kToU64: return DType::u64;
    case Opcode::kToF8E4M3Fn: return DType::f8_e4m3fn;
    case Opcode::kToF8E5M2: return DType::f8_e5m2;
    case Opcode::kToF8E4M3Fnuz: return DType::f8_e4m3fnuz;
    case Opcode::kToF8E5M2Fnuz: return DType::f8_e5m2fnuz;
    case Opcode::kToF8E4M3B11Fnuz: return DType::f8_e4m3b11fnuz;
    case Opcode::kToF8E4M3: return DType::f8_e4m3;
    case Opcode::kToF8E3M4: return DType::f8_e3m4;
    case Opcode::kToC64: return DType::c64;
    case Opcode::kToC128: return DType::c128;
    default: return std::nullopt;
  }
}

bool gives_bool(Opcode op) {
  switch (op) {
    case Opcode::kLt:
    case Opcode::kLe:
    case Opcode::kGt:
    case Opcode::kGe:
    case Opcode::kEq:
    case Opcode::kNe:
    case Opcode::kIsFinite: return true;
    default: return false;
  }
}

// How a register of each dtype holds its values.
// Complex registers hold complex<double> (complex64 rounded to float parts
// after every instruction).
enum class Kind { kFloat, kDouble, kInt, kComplex };
using Cplx = std::complex<double>;
Kind kind_of(DType dt) {
  if (dt == DType::f64) return Kind::kDouble;
  switch (dtype_kind(dt)) {
    case DKind::kFloat: return Kind::kFloat;
    case DKind::kComplex: return Kind::kComplex;
    default: return Kind::kInt;
  }
}

Cplx round_c64(Cplx z) { return {static_cast<float>(z.real()), static_cast<float>(z.imag())}; }

// A float converted to integer dtype `to` as XLA's CPU backend converts
// (jax.lax.convert_element_type): truncation toward zero, saturating at the
// dtype's range, NaN gives 0; to bool: x != 0. The result as an int64
// register value (uint64: its bits).
int64_t float_to_int(DType to, double v) {
  if (to == DType::b8) return v != 0;
  if (std::isnan(v)) return 0;
  const int bits = int_bits(to);
  if (dtype_kind(to) == DKind::kUnsigned) {
    if (v <= 0) return 0;
    const double limit = std::ldexp(1.0, bits);  // 2^bits: out of range
    if (v >= limit) return bits == 64 ? int64_t(-1) : int64_t((uint64_t(1) << bits) - 1);
    return static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  const double limit = std::ldexp(1.0, bits - 1);
  if (v >= limit) return bits == 64 ? std::numeric_limits<int64_t>::max() : int64_t(limit) - 1;
  if (v <= -limit) return bits == 64 ? std::numeric_limits<int64_t>::min() : -int64_t(limit);
  return static_cast<int64_t>(v);
}

// An int64 register value of integer dtype `from` as a float of type F.
template <class F>
F int_to_float(DType from, int64_t v) {
  if (from == DType::u64) return static_cast<F>(static_cast<uint64_t>(v));
  return static_cast<F>(v);
}

bool narrow_float(DType dt) { return dt == DType::f16 || dt == DType::bf16 || is_float8(dt); }

// A float value rounded to float16, bfloat16 or a float8 (and back): what an
// instruction of that dtype stores into its register.
float rounded(DType dt, float v) { return round_to(dt, v); }

template <class C, class S, class Load>
void load_chunk(const void* src, C* dst, int64_t n, Load load) {
  auto* s = static_cast<const S*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<C>(load(s[i]));
}

// Storage values of dtype `dt` into a register of the same dtype.
void load(DType dt, const void* src, void* dst, int64_t n) {
  auto* f = static_cast<float*>(dst);
  auto* l = static_cast<int64_t*>(dst);
  auto same = [](auto v) { return v; };
  switch (dt) {
    case DType::f32: return load_chunk<float, float>(src, f, n, same);
    case DType::f64: return load_chunk<double, double>(src, static_cast<double*>(dst), n, same);
    case DType::f16: return load_chunk<float, uint16_t>(src, f, n, f16_to_f32);
    case DType::bf16: return load_chunk<float, uint16_t>(src, f, n, bf16_to_f32);
    case DType::i8: return load_chunk<int64_t, int8_t>(src, l, n, same);
    case DType::i16: return load_chunk<int64_t, int16_t>(src, l, n, same);
    case DType::i32: return load_chunk<int64_t, int32_t>(src, l, n, same);
    case DType::i64: return load_chunk<int64_t, int64_t>(src, l, n, same);
    case DType::u8: return load_chunk<int64_t, uint8_t>(src, l, n, same);
    case DType::u16: return load_chunk<int64_t, uint16_t>(src, l, n, same);
    case DType::u32: return load_chunk<int64_t, uint32_t>(src, l, n, same);
    case DType::u64: return load_chunk<int64_t, uint64_t>(src, l, n, same);
    case DType::b8:
      return load_chunk<int64_t, uint8_t>(src, l, n, [](uint8_t v) { return v != 0; });
    case DType::c64: {
      auto* s = static_cast<const float*>(src);
      auto* d = static_cast<Cplx*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = Cplx(s[2 * i], s[2 * i + 1]);
      return;
    }
    case DType::c128: return load_chunk<Cplx, Cplx>(src, static_cast<Cplx*>(dst), n, same);
    default:
      if (is_float8(dt))
        return load_chunk<float, uint8_t>(src, f, n, [dt](uint8_t v) { return f8_to_f32(dt, v); });
      throw TypeError(std::string("cannot load ") + dtype_name(dt));
  }
}

template <class S, class C>
void pack_chunk(const C* src, void* dst, int64_t n) {
  auto* d = static_cast<S*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<S>(src[i]);
}

// A register of dtype `dt` into storage values of the same dtype.
void pack(DType dt, const void* src, void* dst, int64_t n) {
  const auto* f = static_cast<const float*>(src);
  const auto* l = static_cast<const int64_t*>(src);
  switch (dt) {
    case DType::f32: return pack_chunk<float>(f, dst, n);
    case DType::f64: return pack_chunk<double>(static_cast<const double*>(src), dst, n);
    case DType::f16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(f[i]);
      return;
    }
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(f[i]);
      return;
    }
    case DType::i8: return pack_chunk<int8_t>(l, dst, n);
    case DType::i16: return pack_chunk<int16_t>(l, dst, n);
    case DType::i32: return pack_chunk<int32_t>(l, dst, n);
    case DType::i64: return pack_chunk<int64_t>(l, dst, n);
    case DType::u8:
    case DType::b8: return pack_chunk<uint8_t>(l, dst, n);
    case DType::u16: return pack_chunk<uint16_t>(l, dst, n);
    case DType::u32: return pack_chunk<uint32_t>(l, dst, n);
    case DType::u64: return pack_chunk<uint64_t>(l, dst, n);
    default:
      if (is_float8(dt)) {
        auto* d = static_cast<uint8_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f8(dt, f[i]);
        return;
      }
      if (dt == DType::c64) {
        const auto* z = static_cast<const Cplx*>(src);
        auto* d = static_cast<float*>(dst);
        for (int64_t i = 0; i < n; ++i) {
          d[2 * i] = static_cast<float>(z[i].real());
          d[2 * i + 1] = static_cast<float>(z[i].imag());
        }
        return;
      }
      if (dt == DType::c128) return pack_chunk<Cplx>(static_cast<const Cplx*>(src), dst, n);
      throw TypeError(std::string("cannot store ") + dtype_name(dt));
  }
}

// A register of dtype `from` (held as `from`'s compute type) into one of
// dtype `to`, as convert_element_type converts; narrow float results rounded.
void convert_register(DType from, const void* src, DType to, void* dst, int64_t n);

// Complex conversions: to complex, a real value's imaginary part is 0; from
// complex, a real dtype takes the real part (bool: z != 0), as XLA converts.
void convert_complex(DType from, const void* src, DType to, void* dst, int64_t n) {
  if (kind_of(to) == Kind::kComplex) {
    auto* d = static_cast<Cplx*>(dst);
    if (kind_of(from) == Kind::kComplex) {
      const auto* s = static_cast<const Cplx*>(src);
      for (int64_t i = 0; i < n; ++i) d[i] = to == DType::c64 ? round_c64(s[i]) : s[i];
      return;
    }
    std::vector<double> re(static_cast<size_t>(n));
    convert_register(from, src, DType::f64, re.data(), n);
    for (int64_t i = 0; i < n; ++i)
      d[i] = to == DType::c64 ? round_c64(Cplx(re[i], 0)) : Cplx(re[i], 0);
    return;
  }
  const auto* s = static_cast<const Cplx*>(src);
  if (to == DType::b8) {
    auto* d = static_cast<int64_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = s[i] != Cplx(0, 0);
    return;
  }
  std::vector<double> re(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) re[i] = s[i].real();
  convert_register(DType::f64, re.data(), to, dst, n);
}

void convert_register(DType from, const void* src, DType to, void* dst, int64_t n) {
  if (kind_of(from) == Kind::kComplex || kind_of(to) == Kind::kComplex)
    return convert_complex(from, src, to, dst, n);
  auto from_float = [&](const auto* s) {
    switch (kind_of(to)) {
      case Kind::kFloat: {
        auto* d = static_cast<float*>(dst);
        if (is_float8(to)) {  // straight from the source's precision: rounded once
          for (int64_t i = 0; i < n; ++i)
            d[i] = f8_to_f32(to, f32_to_f8(to, static_cast<double>(s[i])));
          return;
        }
        for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
        if (to != DType::f32)
          for (int64_t i = 0; i < n; ++i) d[i] = rounded(to, d[i]);
        return;
      }
      case Kind::kDouble: {
        auto* d = static_cast<double*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = static_cast<double>(s[i]);
        return;
      }
      case Kind::kInt: {
        auto* d = static_cast<int64_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = float_to_int(to, static_cast<double>(s[i]));
        return;
      }
      case Kind::kComplex: return;  // convert_complex's
    }
  };
  switch (kind_of(from)) {
    case Kind::kFloat: return from_float(static_cast<const float*>(src));
    case Kind::kDouble: return from_float(static_cast<const double*>(src));
    case Kind::kInt: break;
    case Kind::kComplex: return;  // convert_complex's
  }
  const auto* s = static_cast<const int64_t*>(src);
  switch (kind_of(to)) {
    case Kind::kFloat: {
      auto* d = static_cast<float*>(dst);
      if (is_float8(to)) {
        for (int64_t i = 0; i < n; ++i)
          d[i] = f8_to_f32(to, f32_to_f8(to, int_to_float<double>(from, s[i])));
        return;
      }
      for (int64_t i = 0; i < n; ++i) d[i] = int_to_float<float>(from, s[i]);
      if (to != DType::f32)
        for (int64_t i = 0; i < n; ++i) d[i] = rounded(to, d[i]);
      return;
    }
    case Kind::kDouble: {
      auto* d = static_cast<double*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = int_to_float<double>(from, s[i]);
      return;
    }
    case Kind::kInt: {
      auto* d = static_cast<int64_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = wrap_int(to, s[i]);
      return;
    }
    case Kind::kComplex: return;  // convert_complex's
  }
}

template <class D, class C, class F>
void unary(D* d, const C* a, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
}
template <class D, class C, class F>
void binary(D* d, const C* a, const C* b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

// NaN propagates, as in jax.lax.max / jax.lax.min.
template <class C>
C max_of(C x, C y) {
  return (x != x || x > y) ? x : y;
}
template <class C>
C min_of(C x, C y) {
  return (x != x || x < y) ? x : y;
}

// The next representable value after x toward y in a 16-bit float format
// (float16 or bfloat16) whose bits `to_bits` and `from_bits` convert.
template <class ToBits, class FromBits>
float nextafter_16(float x, float y, ToBits to_bits, FromBits from_bits) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<float>::quiet_NaN();
  if (x == y) return y;
  if (x == 0) return from_bits(static_cast<uint16_t>(y > 0 ? 0x0001 : 0x8001));
  const uint16_t bits = to_bits(x);
  const bool away = (x < y) == (x > 0);  // magnitude grows
  return from_bits(static_cast<uint16_t>(away ? bits + 1 : bits - 1));
}

// Comparisons give bool (0 or 1 in an int64 register) from operands of any dtype.
template <class C>
bool compare(Opcode op, int64_t* d, const C* a, const C* b, int64_t n) {
  using R = int64_t;
  switch (op) {
    case Opcode::kLt: binary(d, a, b, n, [](C x, C y) { return R(x < y); }); return true;
    case Opcode::kLe: binary(d, a, b, n, [](C x, C y) { return R(x <= y); }); return true;
    case Opcode::kGt: binary(d, a, b, n, [](C x, C y) { return R(x > y); }); return true;
    case Opcode::kGe: binary(d, a, b, n, [](C x, C y) { return R(x >= y); }); return true;
    case Opcode::kEq: binary(d, a, b, n, [](C x, C y) { return R(x == y); }); return true;
    case Opcode::kNe: binary(d, a, b, n, [](C x, C y) { return R(x != y); }); return true;
    default: return false;
  }
}

// Instructions on float registers: C is float (float32, float16, bfloat16:
// XLA computes those in float32) or double (float64). `dt` is the operands'
// dtype (nextafter steps in it).
template <class C>
void float_instr(Opcode op, DType dt, void* dv, const void* av, const void* bv, const void* cv,
                 int64_t n) {
  const C* a = static_cast<const C*>(av);
  const C* b = static_cast<const C*>(bv);
  const C* c = static_cast<const C*>(cv);
  if (op == Opcode::kIsFinite) {
    unary(static_cast<int64_t*>(dv), a, n, [](C x) { return int64_t(std::isfinite(x)); });
    return;
  }
  if (compare(op, static_cast<int64_t*>(dv), a, b, n)) return;
  C* d = static_cast<C*>(dv);
  // A value rounded to the operands' dtype: for instructions XLA expands into several
  // operations, each rounded (float16, bfloat16).
  const bool narrow_dtype = narrow_float(dt);
  auto narrow = [narrow_dtype, dt](C v) {
    if constexpr (std::is_same_v<C, float>) {
      if (narrow_dtype) return rounded(dt, v);
    }
    return v;
  };
  using std::abs, std::sqrt, std::exp, std::log, std::log1p, std::expm1, std::tanh, std::pow;
  const C zero(0), one(1);
  // Special functions without a float overload are computed in double.
  auto in_double = [&](double (*f)(double)) {
    unary(d, a, n, [f](C x) { return static_cast<C>(f(static_cast<double>(x))); });
  };
  switch (op) {
    case Opcode::kCopy: return unary(d, a, n, [](C x) { return x; });
    case Opcode::kNeg: return unary(d, a, n, [](C x) { return -x; });
    case Opcode::kSquare: return unary(d, a, n, [](C x) { return x * x; });
    case Opcode::kSqrt: return unary(d, a, n, [](C x) { return sqrt(x); });
    case Opcode::kRsqrt: return unary(d, a, n, [one](C x) { return one / sqrt(x); });
    case Opcode::kCbrt: return unary(d, a, n, [](C x) { return std::cbrt(x); });
    case Opcode::kAbs: return unary(d, a, n, [](C x) { return abs(x); });
    case Opcode::kSign:
      return unary(d, a, n, [zero, one](C x) { return x > zero ? one : x < zero ? -one : x; });
    case Opcode::kExp: return unary(d, a, n, [](C x) { return exp(x); });
    case Opcode::kExp2: {  // as XLA lowers it: exp(log(2) * x), the product in x's dtype
      const C ln2 = narrow(C(0.6931471805599453));
      return unary(d, a, n, [ln2, narrow](C x) { return exp(narrow(ln2 * x)); });
    }
    case Opcode::kLog: return unary(d, a, n, [](C x) { return log(x); });
    case Opcode::kLog1p: return unary(d, a, n, [](C x) { return log1p(x); });
    case Opcode::kExpm1: return unary(d, a, n, [](C x) { return expm1(x); });
    case Opcode::kTanh: return unary(d, a, n, [](C x) { return tanh(x); });
    case Opcode::kSigmoid:  // as XLA lowers it: 1 / (1 + exp(-x)), each step in x's dtype
      return unary(d, a, n, [one, narrow](C x) { return one / narrow(one + narrow(exp(-x))); });
    // max(x, 0): NaN propagates, as in jax.nn.relu
    case Opcode::kRelu:
      return unary(d, a, n, [zero](C x) { return x > zero || x != x ? x : zero; });
    case Opcode::kSoftplus:
      return unary(d, a, n, [zero](C x) { return log1p(exp(-abs(x))) + (x > zero ? x : zero); });
    case Opcode::kGelu:  // tanh approximation, jax.nn.gelu's default
      return unary(d, a, n, [](C x) {
        const C k = C(0.7978845608028654), c3 = C(0.044715);
        return C(0.5) * x * (C(1) + tanh(k * (x + c3 * x * x * x)));
      });
    case Opcode::kReciprocal: return unary(d, a, n, [one](C x) { return one / x; });
    case Opcode::kSin: return unary(d, a, n, [](C x) { return std::sin(x); });
    case Opcode::kCos: return unary(d, a, n, [](C x) { return std::cos(x); });
    case Opcode::kTan: return unary(d, a, n, [](C x) { return std::tan(x); });
    case Opcode::kAsin: return unary(d, a, n, [](C x) { return std::asin(x); });
    case Opcode::kAcos: return unary(d, a, n, [](C x) { return std::acos(x); });
    case Opcode::kAtan: return unary(d, a, n, [](C x) { return std::atan(x); });
    case Opcode::kSinh: return unary(d, a, n, [](C x) { return std::sinh(x); });
    case Opcode::kCosh: return unary(d, a, n, [](C x) { return std::cosh(x); });
    case Opcode::kAsinh: return unary(d, a, n, [](C x) { return std::asinh(x); });
    case Opcode::kAcosh: return unary(d, a, n, [](C x) { return std::acosh(x); });
    case Opcode::kAtanh: return unary(d, a, n, [](C x) { return std::atanh(x); });
    case Opcode::kErf: return unary(d, a, n, [](C x) { return std::erf(x); });
    case Opcode::kErfc: return unary(d, a, n, [](C x) { return std::erfc(x); });
    case Opcode::kErfInv: return in_double(erf_inv);
    case Opcode::kLgamma: return in_double(log_gamma);
    case Opcode::kDigamma: return in_double(digamma);
    case Opcode::kTrigamma: return in_double(trigamma);
    case Opcode::kFloor: return unary(d, a, n, [](C x) { return std::floor(x); });
    case Opcode::kCeil: return unary(d, a, n, [](C x) { return std::ceil(x); });
    case Opcode::kRound: return unary(d, a, n, [](C x) { return std::round(x); });
    case Opcode::kRoundEven: return unary(d, a, n, [](C x) { return round_half_even(x); });
    case Opcode::kAdd: return binary(d, a, b, n, [](C x, C y) { return x + y; });
    case Opcode::kSub: return binary(d, a, b, n, [](C x, C y) { return x - y; });
    case Opcode::kMul: return binary(d, a, b, n, [](C x, C y) { return x * y; });
    case Opcode::kDiv: return binary(d, a, b, n, [](C x, C y) { return x / y; });
    case Opcode::kRem: return binary(d, a, b, n, [](C x, C y) { return std::fmod(x, y); });
    case Opcode::kMax: return binary(d, a, b, n, max_of<C>);
    case Opcode::kMin: return binary(d, a, b, n, min_of<C>);
    case Opcode::kPow: return binary(d, a, b, n, [](C x, C y) { return pow(x, y); });
    case Opcode::kAtan2: return binary(d, a, b, n, [](C x, C y) { return std::atan2(x, y); });
    case Opcode::kNextafter:
      if constexpr (std::is_same_v<C, float>) {
        if (dt == DType::f16)
          return binary(d, a, b, n,
                        [](C x, C y) { return nextafter_16(x, y, f32_to_f16, f16_to_f32); });
        if (dt == DType::bf16)
          return binary(d, a, b, n,
                        [](C x, C y) { return nextafter_16(x, y, f32_to_bf16, bf16_to_f32); });
        if (is_float8(dt))
          return binary(d, a, b, n, [dt](C x, C y) {
            return nextafter_16(
                x, y, [dt](float v) { return static_cast<uint16_t>(f32_to_f8(dt, v)); },
                [dt](uint16_t bits) { return f8_to_f32(dt, static_cast<uint8_t>(bits)); });
          });
      }
      return binary(d, a, b, n, [](C x, C y) { return std::nextafter(x, y); });
    case Opcode::kSelect:
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<const int64_t*>(av)[i] != 0 ? b[i] : c[i];
      return;
    case Opcode::kClamp:
      for (int64_t i = 0; i < n; ++i) d[i] = min_of(max_of(b[i], a[i]), c[i]);
      return;
    default: throw ValueError(std::string("no float form of instruction ") + opcode_name(op));
  }
}

// Instructions on integer and bool registers (int64 registers holding the
// dtype's value, sign- or zero-extended; bool 0 or 1), as XLA computes them in
// the dtype's width: arithmetic wraps around; x / 0 is -1 (all ones) and
// x % 0 is x; MIN / -1 is MIN and MIN % -1 is 0; shifts by the width or more
// (or negative) give 0, or the sign bit everywhere for the arithmetic right
// shift. U is the operands' value type: int64_t for signed dtypes and bool,
// uint64_t for unsigned ones (comparisons, division, max/min unsigned). The
// caller wraps the result to the dtype's width.
template <class U>
void int_instr(Opcode op, DType dt, void* dv, const void* av, const void* bv, const void* cv,
               int64_t n) {
  using W = uint64_t;  // wrapping arithmetic
  const U* a = static_cast<const U*>(av);
  const U* b = static_cast<const U*>(bv);
  const U* c = static_cast<const U*>(cv);
  if (compare(op, static_cast<int64_t*>(dv), a, b, n)) return;
  U* d = static_cast<U*>(dv);
  constexpr bool is_signed = std::is_signed_v<U>;
  const int width = int_bits(dt);
  const W mask = width >= 64 ? ~W(0) : (W(1) << width) - 1;
  // The value's bits read as the dtype's signed type, sign-extended.
  auto as_signed = [width](U x) {
    const W u = W(x);
    if (width >= 64) return int64_t(u);
    const W sign = W(1) << (width - 1);
    return int64_t((u & ((sign << 1) - 1)) ^ sign) - int64_t(sign);
  };
  switch (op) {
    case Opcode::kCopy: return unary(d, a, n, [](U x) { return x; });
    case Opcode::kNeg: return unary(d, a, n, [](U x) { return U(W(0) - W(x)); });
    case Opcode::kSquare: return unary(d, a, n, [](U x) { return U(W(x) * W(x)); });
    case Opcode::kAbs:
      return unary(d, a, n, [](U x) { return is_signed && x < 0 ? U(W(0) - W(x)) : x; });
    case Opcode::kSign: return unary(d, a, n, [](U x) { return U((x > 0) - (x < 0)); });
    case Opcode::kRelu: return unary(d, a, n, [](U x) { return x > 0 ? x : U(0); });
    case Opcode::kNot:
      if (dt == DType::b8) return unary(d, a, n, [](U x) { return U(x == 0); });
      return unary(d, a, n, [](U x) { return U(~W(x)); });
    case Opcode::kAdd: return binary(d, a, b, n, [](U x, U y) { return U(W(x) + W(y)); });
    case Opcode::kSub: return binary(d, a, b, n, [](U x, U y) { return U(W(x) - W(y)); });
    case Opcode::kMul: return binary(d, a, b, n, [](U x, U y) { return U(W(x) * W(y)); });
    case Opcode::kDiv:
      return binary(d, a, b, n, [](U x, U y) {
        if (y == 0) return U(~W(0));
        if constexpr (is_signed)
          if (y == -1) return U(W(0) - W(x));  // MIN / -1 wraps to MIN
        return U(x / y);
      });
    case Opcode::kRem:
      return binary(d, a, b, n, [](U x, U y) {
        if (y == 0) return x;
        if constexpr (is_signed)
          if (y == -1) return U(0);
        return U(x % y);
      });
    case Opcode::kMax: return binary(d, a, b, n, [](U x, U y) { return std::max(x, y); });
    case Opcode::kMin: return binary(d, a, b, n, [](U x, U y) { return std::min(x, y); });
    case Opcode::kAnd: return binary(d, a, b, n, [](U x, U y) { return U(x & y); });
    case Opcode::kOr: return binary(d, a, b, n, [](U x, U y) { return U(x | y); });
    case Opcode::kXor: return binary(d, a, b, n, [](U x, U y) { return U(x ^ y); });
    // The shift amount is read as the dtype's unsigned value.
    case Opcode::kShiftLeft:
      return binary(d, a, b, n, [width, mask](U x, U y) {
        const W s = W(y) & mask;
        return s >= W(width) ? U(0) : U(W(x) << s);
      });
    case Opcode::kShiftRightLogical:
      return binary(d, a, b, n, [width, mask](U x, U y) {
        const W s = W(y) & mask;
        return s >= W(width) ? U(0) : U((W(x) & mask) >> s);
      });
    case Opcode::kShiftRightArithmetic:
      return binary(d, a, b, n, [width, mask, as_signed](U x, U y) {
        const W s = W(y) & mask;
        const int64_t v = as_signed(x);
        return s >= W(width) ? U(v < 0 ? -1 : 0) : U(v >> s);
      });
    case Opcode::kSelect:
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<const int64_t*>(av)[i] != 0 ? b[i] : c[i];
      return;
    case Opcode::kClamp:
      for (int64_t i = 0; i < n; ++i) d[i] = std::min(std::max(b[i], a[i]), c[i]);
      return;
    default: throw ValueError(std::string("no integer form of instruction ") + opcode_name(op));
  }
}

// Instructions on complex registers (complex64 and complex128, computed in
// complex<double>; the caller rounds complex64 results).
void complex_instr(Opcode op, void* dv, const void* av, const void* bv, const void* cv, int64_t n) {
  const auto* a = static_cast<const Cplx*>(av);
  const auto* b = static_cast<const Cplx*>(bv);
  const auto* c = static_cast<const Cplx*>(cv);
  if (op == Opcode::kEq || op == Opcode::kNe) {
    const bool eq = op == Opcode::kEq;
    binary(static_cast<int64_t*>(dv), a, b, n,
           [eq](Cplx x, Cplx y) { return int64_t((x == y) == eq); });
    return;
  }
  auto* d = static_cast<Cplx*>(dv);
  switch (op) {
    case Opcode::kCopy: return unary(d, a, n, [](Cplx x) { return x; });
    case Opcode::kNeg: return unary(d, a, n, [](Cplx x) { return -x; });
    case Opcode::kExp: return unary(d, a, n, [](Cplx x) { return std::exp(x); });
    case Opcode::kAdd: return binary(d, a, b, n, [](Cplx x, Cplx y) { return x + y; });
    case Opcode::kSub: return binary(d, a, b, n, [](Cplx x, Cplx y) { return x - y; });
    case Opcode::kMul: return binary(d, a, b, n, [](Cplx x, Cplx y) { return x * y; });
    case Opcode::kDiv: return binary(d, a, b, n, [](Cplx x, Cplx y) { return x / y; });
    case Opcode::kSelect:
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<const int64_t*>(av)[i] != 0 ? b[i] : c[i];
      return;
    default: throw ValueError(std::string("no complex form of instruction ") + opcode_name(op));
  }
}

}  // namespace

std::vector<std::pair<std::string, int>> opcode_table() {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& info : kOpcodes) out.emplace_back(info.name, static_cast<int>(info.op));
  return out;
}

Opcode opcode_from_name(const std::string& name) {
  for (const auto& info : kOpcodes) {
    if (name == info.name) return info.op;
  }
  throw ValueError("unknown elementwise instruction '" + name + "'");
}

const char* opcode_name(Opcode op) { return info_of(op).name; }

Program Program::build(const ProgramCode& code, size_t n_inputs, size_t n_scalars) {
  auto bad = [](const std::string& why) {
    return ValueError("malformed elementwise program: " + why);
  };
  const size_t n_instr = code.op.size();
  if (code.dst.size() != n_instr || code.a.size() != n_instr || code.b.size() != n_instr ||
      code.c.size() != n_instr) {
    throw bad("the instruction fields op, dst, a, b, c differ in length");
  }
  if (code.out_regs.empty()) throw bad("no output register");
  const int64_t fixed = static_cast<int64_t>(n_inputs + n_scalars);
  if (code.n_regs < fixed || code.n_regs > 4096) throw bad("register count");
  auto reg_ok = [&](int64_t r) { return r >= 0 && r < code.n_regs; };
  for (int64_t r : code.out_regs) {
    if (!reg_ok(r)) throw bad("output register");
  }
  if (!code.scalar_dtypes.empty() && code.scalar_dtypes.size() != n_scalars) {
    throw bad(std::to_string(code.scalar_dtypes.size()) + " scalar dtypes for " +
              std::to_string(n_scalars) + " scalars");
  }
  Program prog;
  prog.n_regs = static_cast<int32_t>(code.n_regs);
  prog.out_dtype = code.out_dtype;
  prog.reduction = reduction_from_code(code.reduction, "malformed elementwise program", true);
  prog.out_reg = static_cast<int32_t>(code.out_regs[0]);
  for (int64_t dt : code.scalar_dtypes) {
    try {
      prog.scalar_dtypes.push_back(dtype_from_int(dt));
    } catch (const std::exception&) {
      throw bad("unknown scalar dtype code " + std::to_string(dt));
    }
  }
  for (size_t i = 0; i < n_instr; ++i) {
    if (code.op[i] < 0 || code.op[i] >= static_cast<int64_t>(kNumOpcodes)) {
      throw bad("unknown opcode " + std::to_string(code.op[i]));
    }
    if (!reg_ok(code.dst[i]) || code.dst[i] < fixed || !reg_ok(code.a[i]) || !reg_ok(code.b[i]) ||
        !reg_ok(code.c[i])) {
      throw bad("register out of range in instruction " + std::to_string(i));
    }
    prog.code.push_back(Instr{static_cast<Opcode>(code.op[i]), static_cast<int32_t>(code.dst[i]),
                              static_cast<int32_t>(code.a[i]), static_cast<int32_t>(code.b[i]),
                              static_cast<int32_t>(code.c[i])});
  }
  for (size_t i = 1; i < code.out_regs.size(); ++i) {
    prog.more_out_regs.push_back(static_cast<int32_t>(code.out_regs[i]));
  }
  if (!prog.more_out_regs.empty() && prog.reduction != Reduction::kNone) {
    throw bad("a program with several outputs cannot end in a reduction");
  }
  return prog;
}

std::vector<DType> Program::register_dtypes(const std::vector<DType>& input_dtypes) const {
  std::vector<std::optional<DType>> dtypes(static_cast<size_t>(n_regs));
  for (size_t i = 0; i < input_dtypes.size(); ++i) dtypes[i] = input_dtypes[i];
  for (size_t s = 0; s < scalar_dtypes.size(); ++s)
    dtypes[input_dtypes.size() + s] = scalar_dtypes[s];
  // Without declared scalar dtypes, the registers after the inputs that no
  // instruction writes are scalars of the output's dtype.
  std::vector<bool> written(static_cast<size_t>(n_regs), false);
  for (const Instr& in : code) written[static_cast<size_t>(in.dst)] = true;
  if (scalar_dtypes.empty()) {
    for (size_t r = input_dtypes.size(); r < dtypes.size(); ++r) {
      if (!written[r]) dtypes[r] = out_dtype;
    }
  }
  for (size_t i = 0; i < code.size(); ++i) {
    const Instr& in = code[i];
    const OpcodeInfo& info = info_of(in.op);
    auto fail = [&](const std::string& why) {
      return ValueError("malformed elementwise program: instruction " + std::to_string(i) + " (" +
                        info.name + ") " + why);
    };
    auto operand = [&](int32_t r) {
      const auto& dt = dtypes[static_cast<size_t>(r)];
      if (!dt) throw fail("reads register " + std::to_string(r) + " before it is written");
      return *dt;
    };
    const DType a = operand(in.a);
    std::optional<DType> result;
    if (in.op == Opcode::kSelect) {
      const DType b = operand(in.b), c = operand(in.c);
      if (a != DType::b8 && a != DType::i32)
        throw fail(std::string("needs a bool or int32 predicate, not ") + dtype_name(a));
      if (b != c) throw fail(std::string("of ") + dtype_name(b) + " and " + dtype_name(c));
      result = b;
    } else {
      if (!(info.accepts & category(a))) throw fail(std::string("does not take ") + dtype_name(a));
      for (int k = 1; k < info.arity; ++k) {
        const DType other = operand(k == 1 ? in.b : in.c);
        if (other != a)
          throw fail(std::string("of ") + dtype_name(a) + " and " + dtype_name(other));
      }
      result = conversion_target(in.op);
      if (!result) result = gives_bool(in.op) ? DType::b8 : a;
    }
    auto& dst = dtypes[static_cast<size_t>(in.dst)];
    if (dst && *dst != *result) {
      throw fail(std::string("writes ") + dtype_name(*result) + " into a register holding " +
                 dtype_name(*dst));
    }
    dst = result;
  }
  std::vector<DType> out;
  for (const auto& dt : dtypes) out.push_back(dt.value_or(out_dtype));
  return out;
}

ProgramRunner::ProgramRunner(const Program& program, std::vector<DType> input_dtypes,
                             std::vector<double> scalars)
    : program_(program),
      input_dtypes_(std::move(input_dtypes)),
      reg_dtypes_(program.register_dtypes(input_dtypes_)) {
  size_t counts[4] = {0, 0, 0, 0};
  for (DType dt : reg_dtypes_) ++counts[static_cast<int>(kind_of(dt))];
  fregs_.resize(counts[0] * kChunk);
  dregs_.resize(counts[1] * kChunk);
  iregs_.resize(counts[2] * kChunk);
  cregs_.resize(counts[3] * kChunk);
  size_t next[4] = {0, 0, 0, 0};
  for (DType dt : reg_dtypes_) {
    const int k = static_cast<int>(kind_of(dt));
    const size_t at = next[k]++ * kChunk;
    slots_.push_back(k == 0   ? static_cast<void*>(fregs_.data() + at)
                     : k == 1 ? static_cast<void*>(dregs_.data() + at)
                     : k == 2 ? static_cast<void*>(iregs_.data() + at)
                              : static_cast<void*>(cregs_.data() + at));
  }
  staging_.resize(2 * kChunk);  // a complex128 chunk
  const size_t first_scalar = input_dtypes_.size();
  for (size_t s = 0; s < scalars.size(); ++s) {
    const auto r = static_cast<int32_t>(first_scalar + s);
    std::vector<double> value(kChunk, scalars[s]);
    convert_register(DType::f64, value.data(), reg_dtypes_[static_cast<size_t>(r)], reg(r), kChunk);
  }
  acc_ = program.reduction == Reduction::kNone ? 0.0 : reduction_rule(program.reduction).identity;
  const DType out = reg_dtypes_[static_cast<size_t>(program.out_reg)];
  if (kind_of(out) == Kind::kComplex && program.reduction != Reduction::kNone)
    throw TypeError(std::string("the engine does not reduce ") + dtype_name(out) +
                    " values (its reductions give one real value)");
  if (kind_of(out) == Kind::kInt && program.reduction != Reduction::kNone)
    iacc_ = int_identity(program.reduction, out);
}

double ProgramRunner::reduced() const {
  const DType out = reg_dtypes_[static_cast<size_t>(program_.out_reg)];
  if (kind_of(out) != Kind::kInt) return acc_;
  return int_to_float<double>(out, wrap_int(out, iacc_));
}

namespace {

// `acc` folded with the chunk's values in eight lanes (they vectorise; in
// double, float32 sums match a pairwise float32 reduction to the last digit).
template <size_t R, class C>
double fold_chunk(const C* values, int64_t n, double acc) {
  constexpr const ReductionRule& rule = kReductions[R];
  double part[8];
  for (double& p : part) p = rule.identity;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] = rule.fold(part[j], static_cast<double>(values[i + j]));
  for (; i < n; ++i) part[0] = rule.fold(part[0], static_cast<double>(values[i]));
  const double left = rule.fold(rule.fold(part[0], part[1]), rule.fold(part[2], part[3]));
  const double right = rule.fold(rule.fold(part[4], part[5]), rule.fold(part[6], part[7]));
  return rule.fold(acc, rule.fold(left, right));
}

}  // namespace

template <class C>
void ProgramRunner::fold(const C* values, int64_t n) {
  with_reduction(program_.reduction,
                 [&](auto r) { acc_ = fold_chunk<decltype(r)::value>(values, n, acc_); });
}

void ProgramRunner::run_chunks(const std::vector<const void*>& inputs,
                               const std::vector<void*>& outs, int64_t count) {
  const size_t out_size = itemsize(program_.out_dtype);
  const DType out_reg_dtype = reg_dtypes_[static_cast<size_t>(program_.out_reg)];
  std::vector<int32_t> out_regs = {program_.out_reg};
  out_regs.insert(out_regs.end(), program_.more_out_regs.begin(), program_.more_out_regs.end());
  for (int64_t start = 0; start < count; start += kChunk) {
    const int64_t n = std::min(kChunk, count - start);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto* src =
          static_cast<const unsigned char*>(inputs[i]) + start * itemsize(input_dtypes_[i]);
      load(input_dtypes_[i], src, reg(static_cast<int32_t>(i)), n);
    }
    for (const Instr& in : program_.code) {
      const DType dst = reg_dtypes_[static_cast<size_t>(in.dst)];
      const DType a = reg_dtypes_[static_cast<size_t>(in.a)];
      // select's operand type is its branches'
      const DType operands = in.op == Opcode::kSelect ? dst : a;
      const bool is_unsigned = dtype_kind(operands) == DKind::kUnsigned;
      if (conversion_target(in.op)) {
        convert_register(a, reg(in.a), dst, reg(in.dst), n);
        continue;
      }
      switch (kind_of(operands)) {
        case Kind::kFloat:
          float_instr<float>(in.op, operands, reg(in.dst), reg(in.a), reg(in.b), reg(in.c), n);
          break;
        case Kind::kDouble:
          float_instr<double>(in.op, operands, reg(in.dst), reg(in.a), reg(in.b), reg(in.c), n);
          break;
        case Kind::kInt:
          if (is_unsigned)
            int_instr<uint64_t>(in.op, operands, reg(in.dst), reg(in.a), reg(in.b), reg(in.c), n);
          else
            int_instr<int64_t>(in.op, operands, reg(in.dst), reg(in.a), reg(in.b), reg(in.c), n);
          break;
        case Kind::kComplex:
          complex_instr(in.op, reg(in.dst), reg(in.a), reg(in.b), reg(in.c), n);
          if (dst == DType::c64) {
            auto* d = static_cast<Cplx*>(reg(in.dst));
            for (int64_t i = 0; i < n; ++i) d[i] = round_c64(d[i]);
          }
          break;
      }
      if (narrow_float(dst)) {
        auto* d = static_cast<float*>(reg(in.dst));
        for (int64_t i = 0; i < n; ++i) d[i] = rounded(dst, d[i]);
      } else if (kind_of(dst) == Kind::kInt && dst != DType::i64 && dst != DType::u64) {
        auto* d = static_cast<int64_t*>(reg(in.dst));
        for (int64_t i = 0; i < n; ++i) d[i] = wrap_int(dst, d[i]);
      }
    }
    if (program_.reduction != Reduction::kNone) {
      switch (kind_of(out_reg_dtype)) {
        case Kind::kFloat: fold(static_cast<const float*>(reg(program_.out_reg)), n); break;
        case Kind::kDouble: fold(static_cast<const double*>(reg(program_.out_reg)), n); break;
        case Kind::kInt: {
          // exact: reduction.hpp's IntFold (sums and products wrap, max and min compare as
          // the dtype's signedness)
          const auto* values = static_cast<const int64_t*>(reg(program_.out_reg));
          with_int_fold(program_.reduction, out_reg_dtype, [&](auto fold) {
            for (int64_t i = 0; i < n; ++i) iacc_ = fold(iacc_, values[i]);
          });
          break;
        }
        case Kind::kComplex: break;  // refused by the constructor
      }
      continue;
    }
    for (size_t o = 0; o < out_regs.size(); ++o) {
      void* dst = static_cast<unsigned char*>(outs[o]) + start * out_size;
      const DType reg_dtype = reg_dtypes_[static_cast<size_t>(out_regs[o])];
      if (reg_dtype == program_.out_dtype) {
        pack(reg_dtype, reg(out_regs[o]), dst, n);
      } else {  // stored as convert_element_type would give it
        convert_register(reg_dtype, reg(out_regs[o]), program_.out_dtype, staging_.data(), n);
        pack(program_.out_dtype, staging_.data(), dst, n);
      }
    }
  }
}

void ProgramRunner::run(const std::vector<const void*>& inputs, const std::vector<void*>& outs,
                        int64_t count) {
  if (outs.size() != program_.n_outputs()) {
    throw ValueError("elementwise program: " + std::to_string(outs.size()) +
                     " output buffers for " + std::to_string(program_.n_outputs()) + " outputs");
  }
  run_chunks(inputs, outs, count);
}

void ProgramRunner::run(const std::vector<const void*>& inputs, void* out, int64_t count) {
  if (program_.n_outputs() > 1)
    throw ValueError("elementwise program: one output buffer for several outputs");
  std::vector<void*> outs;
  if (program_.reduction == Reduction::kNone) outs.push_back(out);
  run_chunks(inputs, outs, count);
}

}  // namespace jask
