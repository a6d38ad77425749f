#include "base/dtype.hpp"

#include <cmath>
#include <limits>

#include "base/errors.hpp"

namespace jask {

namespace {

// Built on first use: other files' static objects (kernel registrations, test fixtures) ask
// for itemsizes while the program starts, before this file's statics would exist.
const std::vector<DTypeInfo>& dtypes() {
  static const std::vector<DTypeInfo> table = {
      {DType::f32, "float32", "<f4", 4, DKind::kFloat},
      {DType::f64, "float64", "<f8", 8, DKind::kFloat},
      {DType::f16, "float16", "<f2", 2, DKind::kFloat},
      // numpy has no code for bfloat16 and the float8s; their names resolve once
      // ml_dtypes (a jax dependency) is imported.
      {DType::bf16, "bfloat16", "bfloat16", 2, DKind::kFloat},
      {DType::i32, "int32", "<i4", 4, DKind::kSigned},
      {DType::b8, "bool", "|b1", 1, DKind::kBool},
      {DType::i8, "int8", "|i1", 1, DKind::kSigned},
      {DType::i16, "int16", "<i2", 2, DKind::kSigned},
      {DType::i64, "int64", "<i8", 8, DKind::kSigned},
      {DType::u8, "uint8", "|u1", 1, DKind::kUnsigned},
      {DType::u16, "uint16", "<u2", 2, DKind::kUnsigned},
      {DType::u32, "uint32", "<u4", 4, DKind::kUnsigned},
      {DType::u64, "uint64", "<u8", 8, DKind::kUnsigned},
      {DType::c64, "complex64", "<c8", 8, DKind::kComplex},
      {DType::c128, "complex128", "<c16", 16, DKind::kComplex},
      {DType::f8_e4m3fn, "float8_e4m3fn", "float8_e4m3fn", 1, DKind::kFloat},
      {DType::f8_e5m2, "float8_e5m2", "float8_e5m2", 1, DKind::kFloat},
      {DType::f8_e4m3fnuz, "float8_e4m3fnuz", "float8_e4m3fnuz", 1, DKind::kFloat},
      {DType::f8_e5m2fnuz, "float8_e5m2fnuz", "float8_e5m2fnuz", 1, DKind::kFloat},
      {DType::f8_e4m3b11fnuz, "float8_e4m3b11fnuz", "float8_e4m3b11fnuz", 1, DKind::kFloat},
      {DType::f8_e4m3, "float8_e4m3", "float8_e4m3", 1, DKind::kFloat},
      {DType::f8_e3m4, "float8_e3m4", "float8_e3m4", 1, DKind::kFloat},
  };
  return table;
}

bool valid_code(int64_t code) { return code >= 0 && code < kNumDTypes; }

}  // namespace

const std::vector<DTypeInfo>& dtype_table() { return dtypes(); }

const DTypeInfo& dtype_info(DType dt) {
  const auto code = static_cast<int64_t>(dt);
  if (!valid_code(code)) throw TypeError("unknown dtype code " + std::to_string(code));
  return dtypes()[static_cast<size_t>(code)];
}

size_t itemsize(DType dt) { return dtype_info(dt).itemsize; }

const char* dtype_name(DType dt) {
  return valid_code(static_cast<int64_t>(dt)) ? dtype_info(dt).name : "unknown";
}

std::string npy_descr(DType dt) { return dtype_info(dt).descr; }

std::optional<DType> dtype_from_descr(const std::string& descr) {
  // '<' little-endian, '=' native (little on the machines Jask runs on), '|' no order
  // (one-byte types); numpy also reads '<i1' and '|i1' alike.
  for (const DTypeInfo& d : dtypes()) {
    const std::string ours = d.descr;
    if (descr == ours) return d.dtype;
    if (ours.size() >= 2 && (ours[0] == '<' || ours[0] == '|') && descr.size() == ours.size() &&
        (descr[0] == '<' || descr[0] == '=' || (descr[0] == '|' && d.itemsize == 1)) &&
        descr.compare(1, std::string::npos, ours, 1, std::string::npos) == 0)
      return d.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (const DTypeInfo& d : dtypes()) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

DType dtype_from_int(int64_t code) {
  if (!valid_code(code)) throw TypeError("unknown dtype code " + std::to_string(code));
  return static_cast<DType>(code);
}

std::string dtype_names() {
  std::string out;
  for (const DTypeInfo& d : dtypes()) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

namespace {

// An 8-bit float format: exponent and mantissa bits, bias, and which codes are special.
enum class F8Special { kIeee, kFn, kFnuz };
struct F8Format {
  int ebits, mbits, bias;
  F8Special special;
};

F8Format f8_format(DType dt) {
  switch (dt) {
    case DType::f8_e4m3fn: return {4, 3, 7, F8Special::kFn};
    case DType::f8_e5m2: return {5, 2, 15, F8Special::kIeee};
    case DType::f8_e4m3fnuz: return {4, 3, 8, F8Special::kFnuz};
    case DType::f8_e5m2fnuz: return {5, 2, 16, F8Special::kFnuz};
    case DType::f8_e4m3b11fnuz: return {4, 3, 11, F8Special::kFnuz};
    case DType::f8_e4m3: return {4, 3, 7, F8Special::kIeee};
    case DType::f8_e3m4: return {3, 4, 3, F8Special::kIeee};
    default: throw TypeError(std::string(dtype_name(dt)) + " is not a float8 dtype");
  }
}

// Each code's value, the largest finite positive code, and the NaN code.
struct F8Table {
  float value[256];
  int max_finite;
  uint8_t nan;
  bool has_inf, has_neg_zero;
};

F8Table make_f8_table(const F8Format& f) {
  F8Table t{};
  const int emask = (1 << f.ebits) - 1, mmask = (1 << f.mbits) - 1;
  for (int c = 0; c < 256; ++c) {
    const int s = c >> 7, e = (c >> f.mbits) & emask, m = c & mmask;
    double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.mbits)
                      : std::ldexp(1.0 + std::ldexp(m, -f.mbits), e - f.bias);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float out = static_cast<float>(s ? -v : v);
    if (f.special == F8Special::kIeee && e == emask)
      out = m == 0 ? (s ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity() : nan;
    if (f.special == F8Special::kFn && e == emask && m == mmask) out = nan;
    if (f.special == F8Special::kFnuz && c == 0x80) out = nan;
    t.value[c] = out;
  }
  switch (f.special) {
    case F8Special::kIeee:
      t.max_finite = (emask << f.mbits) - 1;
      t.nan = static_cast<uint8_t>((emask << f.mbits) | (1 << (f.mbits - 1)));
      t.has_inf = true;
      t.has_neg_zero = true;
      break;
    case F8Special::kFn:
      t.max_finite = 0x7e;
      t.nan = 0x7f;
      t.has_neg_zero = true;
      break;
    case F8Special::kFnuz:
      t.max_finite = 0x7f;
      t.nan = 0x80;
      break;
  }
  return t;
}

const F8Table& f8_table(DType dt) {
  static const std::vector<F8Table> tables = [] {
    std::vector<F8Table> out;
    for (int c = static_cast<int>(DType::f8_e4m3fn); c < kNumDTypes; ++c)
      out.push_back(make_f8_table(f8_format(static_cast<DType>(c))));
    return out;
  }();
  f8_format(dt);  // TypeError for a dtype that is not a float8
  return tables[static_cast<size_t>(static_cast<int>(dt) - static_cast<int>(DType::f8_e4m3fn))];
}

}  // namespace

float f8_to_f32(DType dt, uint8_t bits) { return f8_table(dt).value[bits]; }

uint8_t f32_to_f8(DType dt, double v) {
  const F8Table& t = f8_table(dt);
  if (std::isnan(v)) return t.nan;
  const bool neg = std::signbit(v);
  const double a = std::fabs(v);
  const int top = t.max_finite;
  int code;
  if (a >= t.value[top]) {
    const double half = (static_cast<double>(t.value[top]) - t.value[top - 1]) / 2;
    const double limit = static_cast<double>(t.value[top]) + half;
    if (a < limit || (a == limit && (top & 1) == 0)) {
      code = top;
    } else {
      if (!t.has_inf) return t.nan;
      code = top + 1;  // the exponent's all-ones code with a zero mantissa: inf
    }
  } else {
    int lo = 0, hi = top;  // value[lo] <= a < value[hi]
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      (t.value[mid] <= a ? lo : hi) = mid;
    }
    const double below = a - t.value[lo], above = t.value[hi] - a;
    code = below < above ? lo : above < below ? hi : (lo & 1) == 0 ? lo : hi;
  }
  if (!neg || (code == 0 && !t.has_neg_zero)) return static_cast<uint8_t>(code);
  return static_cast<uint8_t>(code | 0x80);
}

float round_to(DType dt, float v) {
  switch (dt) {
    case DType::f16: return f16_to_f32(f32_to_f16(v));
    case DType::bf16: return bf16_to_f32(f32_to_bf16(v));
    default:
      if (is_float8(dt)) return f8_to_f32(dt, f32_to_f8(dt, v));
      return v;
  }
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t absbits = bits & 0x7fffffffu;
  if (absbits > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absbits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absbits < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (absbits < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = absbits >> 23;
    uint32_t mant = (absbits & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // value / 2^-24, the half subnormal unit
    uint32_t result = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = ((absbits - 0x38000000u) >> 13);
  uint32_t rem = absbits & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

}  // namespace jask
