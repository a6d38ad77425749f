// Storage dtypes and the scalar conversions the kernels need. The table of
// dtypes (code, name, itemsize, .npy descr, kind) is defined here once; the
// Python layer reads it through the bindings (jask/_dtypes.py).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace jask {

// Codes are stable (they cross the Python boundary and checkpoints' indexes
// name dtypes, not codes); a new dtype is a new code at the end and a row of
// kDTypes in dtype.cpp.
enum class DType : int32_t {
  f32 = 0,
  f64 = 1,
  f16 = 2,
  bf16 = 3,
  i32 = 4,
  b8 = 5,
  i8 = 6,
  i16 = 7,
  i64 = 8,
  u8 = 9,
  u16 = 10,
  u32 = 11,
  u64 = 12,
  c64 = 13,
  c128 = 14,
  f8_e4m3fn = 15,
  f8_e5m2 = 16,
  f8_e4m3fnuz = 17,
  f8_e5m2fnuz = 18,
  f8_e4m3b11fnuz = 19,
  f8_e4m3 = 20,
  f8_e3m4 = 21,
};
constexpr int kNumDTypes = 22;

enum class DKind : int32_t { kFloat = 0, kSigned = 1, kUnsigned = 2, kBool = 3, kComplex = 4 };

struct DTypeInfo {
  DType dtype;
  const char* name;   // numpy/ml_dtypes name, e.g. "float32"
  const char* descr;  // .npy header descr, e.g. "<f4" (ml_dtypes' types: their name)
  size_t itemsize;
  DKind kind;
};
const DTypeInfo& dtype_info(DType dt);
const std::vector<DTypeInfo>& dtype_table();

size_t itemsize(DType dt);
const char* dtype_name(DType dt);  // numpy-style name, e.g. "float32"
std::string npy_descr(DType dt);   // .npy header descr, e.g. "<f4"
std::optional<DType> dtype_from_descr(const std::string& descr);
std::optional<DType> dtype_from_name(const std::string& name);
DType dtype_from_int(int64_t code);  // checked conversion for FFI attributes
std::string dtype_names();           // "float32, float64, ..." for messages

inline DKind dtype_kind(DType dt) { return dtype_info(dt).kind; }
inline bool is_integer(DType dt) {
  const DKind k = dtype_kind(dt);
  return k == DKind::kSigned || k == DKind::kUnsigned;
}
inline bool is_float8(DType dt) {
  return static_cast<int>(dt) >= static_cast<int>(DType::f8_e4m3fn);
}
// Bits of an integer dtype (bool: 1).
inline int int_bits(DType dt) { return dt == DType::b8 ? 1 : static_cast<int>(itemsize(dt)) * 8; }
// An int64 register value (any integer dtype's value, uint64 as its bits) wrapped to dt's
// width: sign-extended for signed dtypes, zero-extended for unsigned ones, 0/1 for bool.
inline int64_t wrap_int(DType dt, int64_t v) {
  switch (dt) {
    case DType::i8: return static_cast<int8_t>(v);
    case DType::i16: return static_cast<int16_t>(v);
    case DType::i32: return static_cast<int32_t>(v);
    case DType::u8: return static_cast<uint8_t>(v);
    case DType::u16: return static_cast<uint16_t>(v);
    case DType::u32: return static_cast<uint32_t>(v);
    case DType::b8: return v != 0;
    default: return v;
  }
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// The 8-bit float formats (ml_dtypes'): decoding by table, encoding rounded to
// nearest even (overflow gives inf where the format has it, NaN otherwise), as
// ml_dtypes and XLA convert.
float f8_to_f32(DType dt, uint8_t bits);
uint8_t f32_to_f8(DType dt, double v);

// A float register value rounded to a narrow float dtype (float16, bfloat16,
// float8s) and back; other dtypes: v.
float round_to(DType dt, float v);

}  // namespace jask
