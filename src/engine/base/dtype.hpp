// Storage dtypes and the scalar conversions the kernels need.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace jask {

enum class DType : int32_t { f32 = 0, f64 = 1, f16 = 2, bf16 = 3, i32 = 4, b8 = 5 };

size_t itemsize(DType dt);
const char* dtype_name(DType dt);  // numpy-style name, e.g. "float32"
std::string npy_descr(DType dt);   // .npy header descr, e.g. "<f4"
std::optional<DType> dtype_from_descr(const std::string& descr);
std::optional<DType> dtype_from_name(const std::string& name);
DType dtype_from_int(int64_t code);  // checked conversion for FFI attributes

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

}  // namespace jask
