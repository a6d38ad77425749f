#include "base/dtype.hpp"

#include "base/errors.hpp"

namespace jask {

size_t itemsize(DType dt) {
  switch (dt) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::b8: return 1;
  }
  throw TypeError("unknown dtype code " + std::to_string(static_cast<int>(dt)));
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::b8: return "bool";
  }
  return "unknown";
}

std::string npy_descr(DType dt) {
  switch (dt) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    // numpy has no code for bfloat16; the name resolves once ml_dtypes (a jax
    // dependency) is imported.
    case DType::bf16: return "bfloat16";
    case DType::i32: return "<i4";
    case DType::b8: return "|b1";
  }
  return "";
}

std::optional<DType> dtype_from_descr(const std::string& descr) {
  if (descr == "<f4" || descr == "=f4") return DType::f32;
  if (descr == "<f8" || descr == "=f8") return DType::f64;
  if (descr == "<f2" || descr == "=f2") return DType::f16;
  if (descr == "bfloat16") return DType::bf16;
  if (descr == "<i4" || descr == "=i4") return DType::i32;
  if (descr == "|b1") return DType::b8;
  return std::nullopt;
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::b8}) {
    if (name == dtype_name(dt)) return dt;
  }
  return std::nullopt;
}

DType dtype_from_int(int64_t code) {
  if (code < 0 || code > static_cast<int64_t>(DType::b8)) {
    throw TypeError("unknown dtype code " + std::to_string(code));
  }
  return static_cast<DType>(code);
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
