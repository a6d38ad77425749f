// Row groups (row_group.hpp): one pass over row blocks of tall arrays, and
// the node-by-node fallback, against naive references in double. N = 1001
// rows and widths 37/13/5, so blocks end mid-array and rows are not page
// multiples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
#include "kernels/ops.hpp"
#include "kernels/row_group.hpp"
#include "program/program.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::array_shape;
using test::array_values;
using test::BudgetGuard;
using test::make_array;
using test::ScratchDir;
using test::test_values;

struct Ref {
  int64_t kind, index;
};
Ref scalar_ref(int64_t i) { return {1, i}; }

// Writes the typed call of the row_group kernel (row_group.hpp).
class GroupBuilder {
 public:
  GroupBuilder(DType dtype, int64_t rows) : dtype_(dtype), rows_(rows) {}

  Ref tall(int64_t width) { return input(0, width, 0); }
  Ref small(int64_t rows, int64_t cols) { return input(1, rows, cols); }

  // A MAP whose program has `n_args` operand registers and the instructions `code` adds.
  template <class Code>
  Ref map(int64_t width, const std::vector<Ref>& args, Code code) {
    test::ProgramBuilder b{.n_operands = static_cast<int32_t>(args.size()), .out_dtype = dtype_};
    code(b);
    const ProgramCode p = b.program();
    return node(0, width, 0, args, &p);
  }
  Ref gemm(Ref x, Ref s, bool trans_b, int64_t n) { return node(1, n, trans_b, {x, s}); }
  Ref gemm_tn(Ref x1, Ref x2) { return node(2, 0, 0, {x1, x2}); }
  Ref sum(Ref x) { return node(3, 0, 0, {x}); }
  Ref node(int64_t kind, int64_t width, int64_t trans_b, const std::vector<Ref>& refs,
           const ProgramCode* program = nullptr) {
    add("node_kind", kind);
    add("node_width", width);
    add("node_trans_b", trans_b);
    add("node_refs", static_cast<int64_t>(refs.size()));
    for (const Ref& r : refs) {
      add("ref_kind", r.kind);
      add("ref_index", r.index);
    }
    add("node_n_regs", program ? program->n_regs : 0);
    add("node_out_reg", program ? program->out_regs.at(0) : 0);
    add("node_instrs", program ? static_cast<int64_t>(program->op.size()) : 0);
    if (program) {
      for (const auto& [name, f] : {std::pair{"op", &program->op}, std::pair{"dst", &program->dst},
                                    std::pair{"a", &program->a}, std::pair{"b", &program->b},
                                    std::pair{"c", &program->c}}) {
        for (int64_t v : *f) add(name, v);
      }
    }
    return {2, nodes_++};
  }
  void output(Ref node, const std::vector<int64_t>& shape) {
    add("output_node", node.index);
    add("output_rank", static_cast<int64_t>(shape.size()));
    for (int64_t d : shape) add("output_dims", d);
  }

  Attrs params(const std::string& label = "test") const {
    Attrs a{{"label", label}, {"dtype", static_cast<int64_t>(dtype_)}, {"rows", rows_}};
    for (const char* name : {"input_kind",
                             "input_a",
                             "input_b",
                             "node_kind",
                             "node_width",
                             "node_trans_b",
                             "node_refs",
                             "ref_kind",
                             "ref_index",
                             "node_n_regs",
                             "node_out_reg",
                             "node_instrs",
                             "op",
                             "dst",
                             "a",
                             "b",
                             "c",
                             "output_node",
                             "output_rank",
                             "output_dims"}) {
      auto it = fields_.find(name);
      a[name] = it == fields_.end() ? std::vector<int64_t>{} : it->second;
    }
    return a;
  }

 private:
  void add(const std::string& field, int64_t value) { fields_[field].push_back(value); }
  Ref input(int64_t kind, int64_t a, int64_t b) {
    add("input_kind", kind);
    add("input_a", a);
    add("input_b", b);
    return {0, inputs_++};
  }
  DType dtype_;
  int64_t rows_;
  int64_t inputs_ = 0, nodes_ = 0;
  std::map<std::string, std::vector<int64_t>> fields_;
};

KernelCall group_call(const std::string& label, std::vector<int32_t> handles,
                      std::vector<double> scalars, const GroupBuilder& g) {
  return KernelCall{"row_group", {std::move(handles), std::move(scalars), {}}, g.params(label)};
}

KernelResult run_group_op(const KernelCall& call) { return run_kernel(ResultKind::kGroup, call); }

// op(A) op(B) in double, row-major; op(X) = X^T when its flag is set.
std::vector<double> matmul(const std::vector<double>& A, bool ta, const std::vector<double>& B,
                           bool tb, int64_t m, int64_t k, int64_t n) {
  std::vector<double> C(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
      C[i * n + j] = s;
    }
  }
  return C;
}

// Close up to the rounding of the dtype, relative to the largest reference value.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, DType dt,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  const double tol = (dt == DType::f32 ? 1e-4 : 1e-12) * scale;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > tol) {
      ADD_FAILURE() << what << " (" << dtype_name(dt) << ") differs at " << i << ": " << got[i]
                    << " vs " << want[i];
      return;
    }
  }
}

// The W4 workload's forward and backward pass, gradient of sum((a@b@c - t)^2):
// e=a@b, f=e@c, g=f-t, loss=sum(g*g), l=2*g, m=l@c^T, n=e^T l, o=m@b^T, p=a^T m.
// Outputs o (N,37), n (13,5), loss, p (37,13), g (N,5,1).
struct W4 {
  static constexpr int64_t D = 37, H = 13, O = 5;
  int64_t N;
  DType dtype;
  std::vector<double> a, t, b, c;
  KernelCall call;

  // a_skip_rows > 0: `a` is a view starting that many rows into a larger
  // array, so its data offset is not page-aligned.
  W4(DType dt, int64_t rows, int64_t a_skip_rows = 0) : N(rows), dtype(dt) {
    a = test_values(N * D, 1, 1);
    t = test_values(N * O, 2, 1);
    b = test_values(D * H, 3, 1);
    c = test_values(H * O, 4, 1);
    int32_t ha;
    if (a_skip_rows == 0) {
      ha = make_array(dt, {N, D}, a);
    } else {
      std::vector<double> padded(static_cast<size_t>(a_skip_rows * D), 9.0);
      padded.insert(padded.end(), a.begin(), a.end());
      auto base = Registry::instance().get(make_array(dt, {N + a_skip_rows, D}, padded));
      ha = Registry::instance().add(StoredArray::viewed(base, a_skip_rows * D, {N, D}));
    }
    const int32_t ht = make_array(dt, {N, O, 1}, t), hb = make_array(dt, {D, H}, b),
                  hc = make_array(dt, {H, O}, c);

    GroupBuilder g(dt, N);
    Ref A = g.tall(D), T = g.tall(O), B = g.small(D, H), C = g.small(H, O);
    Ref e = g.gemm(A, B, false, H);
    Ref f = g.gemm(e, C, false, O);
    Ref diff = g.map(O, {f, T}, [](auto& p) { p.add(Opcode::kSub, 0, 1); });
    Ref sq = g.map(O, {diff}, [](auto& p) { p.add(Opcode::kSquare, 0); });
    Ref loss = g.sum(sq);
    Ref l = g.map(O, {diff, scalar_ref(0)}, [](auto& p) { p.add(Opcode::kMul, 0, 1); });
    Ref m = g.gemm(l, C, true, H);
    Ref n = g.gemm_tn(e, l);
    Ref o = g.gemm(m, B, true, D);
    Ref p = g.gemm_tn(A, m);
    g.output(o, {N, D});
    g.output(n, {H, O});
    g.output(loss, {});
    g.output(p, {D, H});
    g.output(diff, {N, O, 1});
    call = group_call("w4", {ha, ht, hb, hc}, {2.0}, g);
  }

  void check(const KernelResult& r) const {
    std::vector<double> e = matmul(a, false, b, false, N, D, H);
    std::vector<double> g = matmul(e, false, c, false, N, H, O);
    double loss = 0;
    std::vector<double> l(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] -= t[i];
      loss += g[i] * g[i];
      l[i] = 2 * g[i];
    }
    std::vector<double> m = matmul(l, false, c, true, N, O, H);
    ASSERT_EQ(r.handles.size(), 4u);
    ASSERT_EQ(r.values.size(), 1u);
    EXPECT_EQ(array_shape(r.handles[0]), (std::vector<int64_t>{N, D}));
    EXPECT_EQ(array_shape(r.handles[1]), (std::vector<int64_t>{H, O}));
    EXPECT_EQ(array_shape(r.handles[2]), (std::vector<int64_t>{D, H}));
    EXPECT_EQ(array_shape(r.handles[3]), (std::vector<int64_t>{N, O, 1}));
    expect_close(array_values(r.handles[0]), matmul(m, false, b, true, N, H, D), dtype,
                 "o = m @ b^T");
    expect_close(array_values(r.handles[1]), matmul(e, true, l, false, H, N, O), dtype,
                 "n = e^T l");
    expect_close({r.values[0]}, {loss}, dtype, "loss");
    expect_close(array_values(r.handles[2]), matmul(a, true, m, false, D, N, H), dtype,
                 "p = a^T m");
    expect_close(array_values(r.handles[3]), g, dtype, "g = f - t");
  }
};

uint64_t tasks_of(const std::function<void()>& fn) {
  const uint64_t before = pipeline_tasks_run();
  fn();
  return pipeline_tasks_run() - before;
}

TEST(RowGroup, W4AtAGenerousBudgetIsOnePassOfOneBlock) {
  ScratchDir scratch;
  BudgetGuard budget(64 << 20);
  for (DType dt : {DType::f32, DType::f64}) {
    W4 w(dt, 1001);
    ASSERT_EQ(group_block_rows(w.call), 1001);
    const size_t live = Registry::instance().size();
    KernelResult r;
    EXPECT_EQ(tasks_of([&] { r = run_group_op(w.call); }), 1u) << dtype_name(dt);
    EXPECT_EQ(Registry::instance().size(), live + 4);  // only the outputs
    w.check(r);
  }
}

TEST(RowGroup, W4InSeveralBlocksReadsDirectAndMatches) {
  ScratchDir scratch;
  for (DType dt : {DType::f32, DType::f64}) {
    // `a` starts mid-page: its blocks land at their offsets' alignment.
    W4 w(dt, 1001, /*a_skip_rows=*/3);
    // The largest budget that gives blocks of at most 150 rows.
    int64_t rows = 0, bytes = 1 << 20;
    for (; bytes > kMinBudget; bytes = bytes * 7 / 8) {
      BudgetGuard budget(bytes);
      rows = group_block_rows(w.call);
      if (rows <= 150) break;
    }
    ASSERT_GT(rows, 1) << dtype_name(dt);
    BudgetGuard budget(bytes);
    const bool direct = Registry::instance().get(w.call.operands.handles[0])->file()->has_direct();
    const uint64_t direct_before = io_counters().direct_bytes;
    KernelResult r;
    EXPECT_EQ(tasks_of([&] { r = run_group_op(w.call); }),
              static_cast<uint64_t>((1001 + rows - 1) / rows));
    // Most of `a` read and of `o` written bypass the page cache.
    if (direct) {
      EXPECT_GT(io_counters().direct_bytes - direct_before, 2 * 1001 * W4::D * itemsize(dt) / 2)
          << dtype_name(dt);
    }
    w.check(r);
  }
}

TEST(RowGroup, W4RunsNodeByNodeWhenOneRowDoesNotFit) {
  ScratchDir scratch;
  BudgetGuard budget(16 << 10);
  for (DType dt : {DType::f32, DType::f64}) {
    W4 w(dt, 1001);
    ASSERT_EQ(group_block_rows(w.call), 0);
    const size_t live = Registry::instance().size();
    KernelResult r;
    EXPECT_GT(tasks_of([&] { r = run_group_op(w.call); }), 10u);
    EXPECT_EQ(Registry::instance().size(), live + 4);  // intermediates released
    w.check(r);
  }
}

// Runs `call` in one pass and node by node; both results, in that order.
std::vector<KernelResult> both_ways(const KernelCall& call) {
  std::vector<KernelResult> out;
  {
    BudgetGuard budget(64 << 20);
    EXPECT_GT(group_block_rows(call), 0);
    out.push_back(run_group_op(call));
  }
  {
    // Below the pages of alignment slack of three streams; the ops themselves fit.
    BudgetGuard budget(12 << 10);
    EXPECT_EQ(group_block_rows(call), 0);
    out.push_back(run_group_op(call));
  }
  return out;
}

TEST(RowGroup, FillAndScalarArgumentsInMaps) {
  ScratchDir scratch;
  for (DType dt : {DType::f32, DType::f64}) {
    const int64_t N = 1001, W = 7;
    std::vector<double> x = test_values(N * W, 5);
    GroupBuilder g(dt, N);
    Ref X = g.tall(W);
    // No tall args: a fill with scalar 0 (the program's result is its scalar register).
    Ref fill = g.map(W, {scalar_ref(0)}, [](auto&) {});
    Ref y = g.map(W, {X, fill, scalar_ref(1)},
                  [](auto& p) { p.add(Opcode::kMul, 2, p.add(Opcode::kAdd, 0, 1)); });
    g.output(fill, {N, W});
    g.output(y, {N, 1, W});
    g.output(g.sum(y), {});
    KernelCall call = group_call("fill", {make_array(dt, {N, W}, x)}, {1.5, -2.0}, g);
    std::vector<double> want(x.size());
    double total = 0;
    for (size_t i = 0; i < x.size(); ++i) total += (want[i] = (x[i] + 1.5) * -2.0);
    for (const KernelResult& r : both_ways(call)) {
      ASSERT_EQ(r.handles.size(), 2u);
      EXPECT_EQ(array_values(r.handles[0]), std::vector<double>(x.size(), 1.5)) << dtype_name(dt);
      EXPECT_EQ(array_values(r.handles[1]), want) << dtype_name(dt);
      EXPECT_EQ(r.values, std::vector<double>{total}) << dtype_name(dt);
    }
  }
}

TEST(RowGroup, GemmWithAndWithoutTransposedSmallMatrix) {
  ScratchDir scratch;
  for (DType dt : {DType::f32, DType::f64}) {
    const int64_t N = 1001, K = 6, M = 4;
    std::vector<double> x = test_values(N * K, 6), s = test_values(K * M, 7);
    std::vector<double> s_t(s.size());
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < M; ++j) s_t[j * K + i] = s[i * M + j];
    GroupBuilder g(dt, N);
    Ref X = g.tall(K), S = g.small(K, M), ST = g.small(M, K);
    g.output(g.gemm(X, S, false, M), {N, M});
    g.output(g.gemm(X, ST, true, M), {N, M});
    KernelCall call = group_call(
        "gemm", {make_array(dt, {N, K}, x), make_array(dt, {K, M}, s), make_array(dt, {M, K}, s_t)},
        {}, g);
    const std::vector<double> want =
        matmul(x, false, s, false, N, K, M);  // small whole numbers: exact
    for (const KernelResult& r : both_ways(call)) {
      ASSERT_EQ(r.handles.size(), 2u);
      EXPECT_TRUE(r.values.empty());
      EXPECT_EQ(array_values(r.handles[0]), want) << dtype_name(dt);
      EXPECT_EQ(array_values(r.handles[1]), want) << dtype_name(dt);
    }
  }
}

TEST(RowGroup, NoRowsGiveEmptyArraysZeroAccumulatorsAndAZeroSum) {
  ScratchDir scratch;
  GroupBuilder g(DType::f32, 0);
  Ref X = g.tall(3);
  Ref y = g.map(3, {X}, [](auto& p) { p.add(Opcode::kNeg, 0); });
  g.output(y, {0, 3});
  g.output(g.gemm_tn(X, y), {3, 3});
  g.output(g.sum(y), {});
  KernelCall call = group_call("empty", {make_array(DType::f32, {0, 3}, {})}, {}, g);
  for (const KernelResult& r : both_ways(call)) {
    ASSERT_EQ(r.handles.size(), 2u);
    EXPECT_EQ(array_shape(r.handles[0]), (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(array_values(r.handles[1]), std::vector<double>(9, 0.0));
    EXPECT_EQ(r.values, std::vector<double>{0.0});
  }
}

// Runs `call`, expecting E whose message names the group and contains `needle`.
template <class E = ValueError>
void expect_rejected(const KernelCall& call, const std::string& needle) {
  try {
    run_group_op(call);
    ADD_FAILURE() << "no exception for: " << needle;
  } catch (const E& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(call.kernel), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in: " << msg;
  }
}

TEST(RowGroup, MalformedParamsAreValueErrorsNamingTheGroup) {
  ScratchDir scratch;
  const int64_t N = 11;
  const int32_t x = make_array(DType::f32, {N, 4}, test_values(N * 4));
  const int32_t s = make_array(DType::f32, {4, 3}, test_values(12));
  // x (N, 4) tall, s (4, 3) small; `body` adds nodes and outputs.
  auto call_with = [&](const std::function<void(GroupBuilder&, Ref, Ref)>& body,
                       int64_t width = 4) {
    GroupBuilder g(DType::f32, N);
    Ref X = g.tall(width), S = g.small(4, 3);
    body(g, X, S);
    return group_call("bad", {x, s}, {1.0}, g);
  };
  auto copy = [](auto& p) { p.add(Opcode::kCopy, 0); };
  KernelCall good = call_with([&](GroupBuilder& g, Ref X, Ref S) {
    g.output(g.gemm(X, S, false, 3), {N, 3});
  });
  EXPECT_EQ(run_group_op(good).handles.size(), 1u);

  // Calls that do not match the schema, or whose parallel fields disagree.
  KernelCall cut = good;
  cut.attrs.erase("output_dims");
  expect_rejected(cut, "field 'output_dims' is missing");
  KernelCall short_dims = good;
  short_dims.attrs["output_dims"] = std::vector<int64_t>{N};
  expect_rejected(short_dims, "fewer extents than output_rank");
  KernelCall extra = good;
  extra.attrs["ref_kind"] = std::vector<int64_t>{0, 0, 0};
  expect_rejected(extra, "field 'ref_index' has 2 entries; it needs 3");
  KernelCall mistyped = good;
  mistyped.attrs["rows"] = std::vector<int64_t>{N};
  expect_rejected(mistyped, "field 'rows' must be an int64, got an int64 array");
  KernelCall fewer = good;
  fewer.operands.handles.pop_back();
  expect_rejected(fewer, "2 inputs declared for 1 handles");
  expect_rejected(call_with(
                      [&](GroupBuilder& g, Ref, Ref) {
                        g.output(g.map(4, {}, copy), {N, 4});
                      },
                      5),
                  "not 11 rows of 5 elements");
  expect_rejected(call_with([&](GroupBuilder& g, Ref X, Ref S) {
                    g.gemm(Ref{2, 1}, S, false, 3);
                    g.output(g.map(4, {X}, copy), {N, 4});
                  }),
                  "refers to node 1 of 0 earlier nodes");
  expect_rejected(call_with([&](GroupBuilder& g, Ref X, Ref S) {
                    g.output(g.map(4, {g.gemm(X, S, false, 3)}, copy), {N, 4});
                  }),
                  "width 3, the node's width is 4");
  expect_rejected(call_with([&](GroupBuilder& g, Ref X, Ref S) {
                    g.output(g.gemm(X, S, true, 3), {N, 3});
                  }),
                  "S must be (3, 4) (trans_b), not (4, 3)");
  expect_rejected(call_with([&](GroupBuilder& g, Ref X, Ref S) {
                    g.output(g.gemm(X, S, false, 3), {N, 4});
                  }),
                  "output 0 has shape (11, 4)");
  expect_rejected(
      call_with([&](GroupBuilder& g, Ref X, Ref) {
        Ref total = g.sum(X);
        g.output(g.map(4, {X, total}, [](auto& p) { p.add(Opcode::kMul, 0, 1); }), {N, 4});
      }),
      "a scalar computed in the group");
  expect_rejected(call_with([&](GroupBuilder& g, Ref X, Ref) {
                    g.output(g.gemm_tn(X, Ref{0, 1}), {4, 3});
                  }),
                  "X2 is a 4x3 matrix, not a tall value");
  expect_rejected(call_with([&](GroupBuilder& g, Ref, Ref) { g.node(7, 0, 0, {}); }),
                  "node 0 has unknown code 7");
  expect_rejected(call_with([&](GroupBuilder& g, Ref X, Ref) {
                    g.output(g.map(4, {X}, [](auto& p) { p.add(Opcode::kCopy, 5); }), {N, 4});
                  }),
                  "register out of range");
  expect_rejected(call_with([&](GroupBuilder& g, Ref X, Ref) { g.output(g.sum(X), {1}); }),
                  "output 0 has shape (1,)");
  KernelCall unknown = good;
  unknown.kernel = "row_group/bad";
  EXPECT_THROW(run_group_op(unknown), ValueError);

  const int32_t x64 = make_array(DType::f64, {N, 4}, test_values(N * 4));
  KernelCall mixed = good;
  mixed.operands.handles[0] = x64;
  expect_rejected<TypeError>(mixed, "input 0 is float64[11,4], not float32");
}

}  // namespace
}  // namespace jask
