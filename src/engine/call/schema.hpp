// A kernel's parameters, declared once: the names and types of the fields of
// its params struct. Both entry points decode a call's Attrs through the
// declaration, so a missing, mistyped or unknown field is rejected with an
// error naming the kernel and the field, whichever side made the call.
//
//   struct TransposeParams { std::vector<int64_t> perm; };
//   const Schema<TransposeParams> kSchema{field("perm", &TransposeParams::perm)};
//   TransposeParams p = kSchema.decode("transpose", call.attrs);
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.hpp"
#include "call/kernel_call.hpp"

namespace jask {

// The field types a schema can declare, and the C++ member types they decode into.
enum class FieldType {
  kBool,    // bool
  kInt,     // int64_t
  kFloat,   // double
  kString,  // std::string
  kInts,    // std::vector<int64_t>: shapes, axes, opcodes, register lists
  kDType,   // DType, sent as its int64 code
};
const char* field_type_name(FieldType type);

// What a schema declares about one field (for messages, tests and introspection).
struct FieldInfo {
  std::string name;
  FieldType type;
};

// Throws ValueError "<kernel>: <field> ..." for a call that does not match.
[[noreturn]] void reject_field(std::string_view kernel, std::string_view field,
                               const std::string& why);

namespace schema_detail {

template <class T>
struct Codec;
template <>
struct Codec<bool> {
  static constexpr FieldType type = FieldType::kBool;
  static bool decode(std::string_view kernel, std::string_view field, const AttrValue& v);
};
template <>
struct Codec<int64_t> {
  static constexpr FieldType type = FieldType::kInt;
  static int64_t decode(std::string_view kernel, std::string_view field, const AttrValue& v);
};
template <>
struct Codec<double> {
  static constexpr FieldType type = FieldType::kFloat;
  static double decode(std::string_view kernel, std::string_view field, const AttrValue& v);
};
template <>
struct Codec<std::string> {
  static constexpr FieldType type = FieldType::kString;
  static std::string decode(std::string_view kernel, std::string_view field, const AttrValue& v);
};
template <>
struct Codec<std::vector<int64_t>> {
  static constexpr FieldType type = FieldType::kInts;
  static std::vector<int64_t> decode(std::string_view kernel, std::string_view field,
                                     const AttrValue& v);
};
template <>
struct Codec<DType> {
  static constexpr FieldType type = FieldType::kDType;
  static DType decode(std::string_view kernel, std::string_view field, const AttrValue& v);
};

}  // namespace schema_detail

// One declared field of params struct P.
template <class P>
struct FieldDecl {
  FieldInfo info;
  std::function<void(std::string_view kernel, const AttrValue& value, P& params)> set;
};

// The field `name` of type T, stored in `member` (a member of P or of a base of P).
template <class P, class T>
FieldDecl<P> field(std::string name, T P::*member) {
  using C = schema_detail::Codec<T>;
  FieldInfo info{name, C::type};
  return FieldDecl<P>{std::move(info), [name = std::move(name), member](std::string_view kernel,
                                                                        const AttrValue& v, P& p) {
                        p.*member = C::decode(kernel, name, v);
                      }};
}

// Every field of P, in declaration order; P is default-constructible.
template <class P>
class Schema {
 public:
  Schema(std::initializer_list<FieldDecl<P>> fields) : fields_(fields) {}
  Schema(std::vector<FieldDecl<P>> fields) : fields_(std::move(fields)) {}

  // Every declared field must be present with its type, and nothing else.
  P decode(std::string_view kernel, const Attrs& attrs) const {
    P params{};
    for (const FieldDecl<P>& f : fields_) {
      auto it = attrs.find(f.info.name);
      if (it == attrs.end()) {
        reject_field(kernel, f.info.name,
                     std::string("is missing (") + field_type_name(f.info.type) + ")");
      }
      f.set(kernel, it->second, params);
    }
    if (attrs.size() != fields_.size()) reject_unknown(kernel, attrs);
    return params;
  }

  std::vector<FieldInfo> fields() const {
    std::vector<FieldInfo> out;
    for (const FieldDecl<P>& f : fields_) out.push_back(f.info);
    return out;
  }

 private:
  [[noreturn]] void reject_unknown(std::string_view kernel, const Attrs& attrs) const {
    for (const auto& [name, value] : attrs) {
      bool declared = false;
      for (const FieldDecl<P>& f : fields_) declared = declared || f.info.name == name;
      if (!declared) reject_field(kernel, name, "is not a parameter of this kernel");
    }
    reject_field(kernel, "?", "unexpected parameters");  // unreachable: sizes differ
  }

  std::vector<FieldDecl<P>> fields_;
};

// The fields of a base B, declared once, as fields of a derived params struct P.
template <class P, class B>
std::vector<FieldDecl<P>> inherit(const std::vector<FieldDecl<B>>& base,
                                  std::vector<FieldDecl<P>> own) {
  std::vector<FieldDecl<P>> out;
  for (const FieldDecl<B>& f : base) {
    out.push_back(
        FieldDecl<P>{f.info, [set = f.set](std::string_view kernel, const AttrValue& v, P& p) {
                       set(kernel, v, static_cast<B&>(p));
                     }});
  }
  for (FieldDecl<P>& f : own) out.push_back(std::move(f));
  return out;
}

// A kernel without parameters.
struct NoParams {};

}  // namespace jask
