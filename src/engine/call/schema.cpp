#include "call/schema.hpp"

#include "base/errors.hpp"

namespace jask {

const char* attr_type_name(const AttrValue& value) {
  switch (value.index()) {
    case 0: return "a bool";
    case 1: return "an int64";
    case 2: return "a float";
    case 3: return "a string";
    default: return "an int64 array";
  }
}

const char* field_type_name(FieldType type) {
  switch (type) {
    case FieldType::kBool: return "a bool";
    case FieldType::kInt: return "an int64";
    case FieldType::kFloat: return "a float";
    case FieldType::kString: return "a string";
    case FieldType::kInts: return "an int64 array";
    case FieldType::kDType: return "a dtype code";
  }
  return "?";
}

void reject_field(std::string_view kernel, std::string_view field, const std::string& why) {
  throw ValueError("kernel '" + std::string(kernel) + "': field '" + std::string(field) + "' " +
                   why);
}

namespace schema_detail {
namespace {

template <class T>
const T& expect(std::string_view kernel, std::string_view field, const AttrValue& v,
                FieldType type) {
  if (const T* value = std::get_if<T>(&v)) return *value;
  reject_field(kernel, field,
               std::string("must be ") + field_type_name(type) + ", got " + attr_type_name(v));
}

}  // namespace

bool Codec<bool>::decode(std::string_view kernel, std::string_view field, const AttrValue& v) {
  return expect<bool>(kernel, field, v, type);
}

int64_t Codec<int64_t>::decode(std::string_view kernel, std::string_view field,
                               const AttrValue& v) {
  return expect<int64_t>(kernel, field, v, type);
}

double Codec<double>::decode(std::string_view kernel, std::string_view field, const AttrValue& v) {
  return expect<double>(kernel, field, v, type);
}

std::string Codec<std::string>::decode(std::string_view kernel, std::string_view field,
                                       const AttrValue& v) {
  return expect<std::string>(kernel, field, v, type);
}

std::vector<int64_t> Codec<std::vector<int64_t>>::decode(std::string_view kernel,
                                                         std::string_view field,
                                                         const AttrValue& v) {
  return expect<std::vector<int64_t>>(kernel, field, v, type);
}

DType Codec<DType>::decode(std::string_view kernel, std::string_view field, const AttrValue& v) {
  const int64_t code = expect<int64_t>(kernel, field, v, type);
  try {
    return dtype_from_int(code);
  } catch (const TypeError& e) {
    throw TypeError("kernel '" + std::string(kernel) + "': field '" + std::string(field) +
                    "' is not a dtype: " + e.what());
  }
}

}  // namespace schema_detail
}  // namespace jask
