// The typed call schema and the kernel registry: every field type decodes, a
// malformed call is rejected naming the kernel and the field, and dispatch is
// one lookup by result kind and name.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "call/schema.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::expect_error_mentioning;
using Ints = std::vector<int64_t>;

struct EveryType {
  bool flag = false;
  int64_t count = 0;
  double scale = 0;
  std::string label;
  Ints shape;
  DType dtype = DType::f32;
};
const Schema<EveryType> kEveryType{
    field("flag", &EveryType::flag),   field("count", &EveryType::count),
    field("scale", &EveryType::scale), field("label", &EveryType::label),
    field("shape", &EveryType::shape), field("dtype", &EveryType::dtype)};

Attrs every_type() {
  return {{"flag", true},           {"count", int64_t{-7}},
          {"scale", 2.5},           {"label", std::string("mul+add")},
          {"shape", Ints{3, 0, 5}}, {"dtype", int64_t{static_cast<int64_t>(DType::bf16)}}};
}

TEST(Schema, DecodesEveryFieldType) {
  const EveryType p = kEveryType.decode("every", every_type());
  EXPECT_TRUE(p.flag);
  EXPECT_EQ(p.count, -7);
  EXPECT_EQ(p.scale, 2.5);
  EXPECT_EQ(p.label, "mul+add");
  EXPECT_EQ(p.shape, (Ints{3, 0, 5}));
  EXPECT_EQ(p.dtype, DType::bf16);
  const std::vector<FieldInfo> fields = kEveryType.fields();
  ASSERT_EQ(fields.size(), 6u);
  EXPECT_EQ(fields[0].name, "flag");
  EXPECT_EQ(fields[4].type, FieldType::kInts);
  EXPECT_STREQ(field_type_name(fields[5].type), "a dtype code");
}

TEST(Schema, RejectsMissingMistypedAndUnknownFieldsNamingKernelAndField) {
  Attrs missing = every_type();
  missing.erase("shape");
  expect_error_mentioning<ValueError>(
      [&] { kEveryType.decode("every", missing); },
      {"kernel 'every'", "field 'shape'", "missing", "an int64 array"});
  Attrs mistyped = every_type();
  mistyped["count"] = Ints{1};
  expect_error_mentioning<ValueError>(
      [&] { kEveryType.decode("every", mistyped); },
      {"kernel 'every'", "field 'count'", "must be an int64", "got an int64 array"});
  mistyped = every_type();
  mistyped["flag"] = int64_t{1};  // no implicit int -> bool
  expect_error_mentioning<ValueError>([&] { kEveryType.decode("every", mistyped); },
                                      {"field 'flag'", "must be a bool", "got an int64"});
  mistyped = every_type();
  mistyped["label"] = 3.0;
  expect_error_mentioning<ValueError>([&] { kEveryType.decode("every", mistyped); },
                                      {"field 'label'", "must be a string", "got a float"});
  Attrs bad_dtype = every_type();
  bad_dtype["dtype"] = int64_t{99};
  expect_error_mentioning<TypeError>([&] { kEveryType.decode("every", bad_dtype); },
                                     {"kernel 'every'", "field 'dtype'", "99"});
  Attrs extra = every_type();
  extra["perm"] = Ints{1, 0};
  expect_error_mentioning<ValueError>([&] { kEveryType.decode("every", extra); },
                                      {"kernel 'every'", "field 'perm'", "not a parameter"});
}

struct Base {
  int64_t n = 0;
};
struct Derived : Base {
  std::string name;
};

TEST(Schema, InheritsTheFieldsOfABase) {
  const std::vector<FieldDecl<Base>> base{field("n", &Base::n)};
  const Schema<Derived> schema(inherit<Derived, Base>(base, {field("name", &Derived::name)}));
  const Derived d = schema.decode("derived", {{"n", int64_t{4}}, {"name", std::string("x")}});
  EXPECT_EQ(d.n, 4);
  EXPECT_EQ(d.name, "x");
}

// A kernel registered by this test: the sum of its scalars times `scale`.
struct ScaleParams {
  double scale = 0;
};
const Schema<ScaleParams> kScaleSchema{field("scale", &ScaleParams::scale)};
double run_test_scale(const KernelCall& call, const ScaleParams& p) {
  double total = 0;
  for (double s : call.operands.scalars) total += s;
  return total * p.scale;
}
const KernelRegistration kTestScale{"test_scale", kScaleSchema, run_test_scale};

TEST(Registry, DispatchesByKindAndNameThroughTheSchema) {
  KernelCall call;
  call.kernel = "test_scale";
  call.operands.scalars = {1.0, 2.0};
  call.attrs = {{"scale", 0.5}};
  EXPECT_EQ(run_kernel(ResultKind::kScalar, call).values, std::vector<double>{1.5});
  call.attrs = {{"scale", int64_t{2}}};
  expect_error_mentioning<ValueError>([&] { run_kernel(ResultKind::kScalar, call); },
                                      {"kernel 'test_scale'", "field 'scale'", "a float"});
}

TEST(Registry, RejectsUnknownKernelsAndWrongResultKinds) {
  KernelCall call;
  call.kernel = "frobnicate";
  expect_error_mentioning<ValueError>([&] { run_kernel(ResultKind::kArray, call); },
                                      {"unknown array kernel 'frobnicate'"});
  call.kernel = "test_scale";
  expect_error_mentioning<ValueError>([&] { run_kernel(ResultKind::kArray, call); },
                                      {"unknown array kernel 'test_scale'", "scalar results"});
}

TEST(Registry, RefusesASecondRegistrationOfOneKernel) {
  EXPECT_THROW(KernelRegistration("test_scale", kScaleSchema, run_test_scale), std::logic_error);
  // Another result kind under the same name is another kernel.
  auto in_memory = [](const KernelCall&, const ScaleParams&) {};
  EXPECT_NO_THROW(KernelRegistration("test_scale", kScaleSchema, in_memory));
}

TEST(Registry, HoldsEveryEngineKernel) {
  std::set<std::pair<std::string, std::string>> registered;
  for (const KernelEntry* e : KernelRegistry::instance().entries()) {
    registered.emplace(result_kind_name(e->kind), e->name);
  }
  const std::set<std::pair<std::string, std::string>> expected = {{"array", "fill"},
                                                                  {"array", "from_in_memory"},
                                                                  {"array", "put_rows"},
                                                                  {"array", "transpose"},
                                                                  {"array", "reshape"},
                                                                  {"array", "matmul"},
                                                                  {"array", "reduce_axes"},
                                                                  {"in-memory", "reduce_axes"},
                                                                  {"in-memory", "to_in_memory"},
                                                                  {"in-memory", "rows"},
                                                                  {"array", "map"},
                                                                  {"arrays", "map_multi"},
                                                                  {"scalar", "map_reduce"},
                                                                  {"array", "slice"},
                                                                  {"in-memory", "slice"},
                                                                  {"array", "place"},
                                                                  {"array", "dynamic_slice"},
                                                                  {"in-memory", "dynamic_slice"},
                                                                  {"array", "take"},
                                                                  {"in-memory", "take"},
                                                                  {"array", "scatter_add_rows"},
                                                                  {"group", "row_group"},
                                                                  {"array", "cumulative"},
                                                                  {"array", "arg_reduce"},
                                                                  {"in-memory", "arg_reduce"},
                                                                  {"array", "argsort_rows"},
                                                                  {"array", "take_along_rows"},
                                                                  {"array", "put_along_rows"}};
  for (const auto& kernel : expected) {
    EXPECT_TRUE(registered.count(kernel)) << kernel.first << " " << kernel.second;
  }
}

}  // namespace
}  // namespace jask
