#include "kernels/row_group.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
#include "kernels/batched_matmul.hpp"
#include "kernels/blas.hpp"
#include "kernels/ops.hpp"
#include "plan/planner.hpp"
#include "program/broadcast.hpp"
#include "program/program.hpp"

namespace jask {
namespace {

Registry& reg() { return Registry::instance(); }

enum class NodeKind : int64_t { kMap = 0, kGemm = 1, kGemmTN = 2, kSum = 3 };
enum class RefKind : int64_t { kHandle = 0, kScalar = 1, kNode = 2 };

struct GroupRef {
  RefKind kind;
  int64_t index;
};

// What a handle or a node holds.
struct GroupValue {
  enum Kind { kTall, kSmall, kScalar } kind;
  int64_t a = 0, b = 0;  // tall: a = elements per row; small: a x b
};

struct GroupNode {
  NodeKind kind;
  GroupValue value;                     // what it produces
  std::vector<GroupRef> tall;           // MAP: tall args; GEMM: X; GEMM_TN: X1, X2; SUM: X
  std::vector<GroupRef> scalars;        // MAP: scalar args
  GroupRef small{RefKind::kHandle, 0};  // GEMM: S
  bool trans_b = false;
  ProgramCode code;   // MAP, as sent
  Program program{};  // MAP: decoded; SUM: copy and sum
};

struct GroupOutput {
  int64_t node;
  std::vector<int64_t> shape;
};

struct Group {
  std::string name;  // "row_group/<label>", for messages
  DType dtype;
  int64_t rows;  // N
  std::vector<int32_t> handles;
  std::vector<ArrayRef> arrays;
  std::vector<GroupValue> inputs;  // per handle
  std::vector<double> scalars;
  std::vector<GroupNode> nodes;
  std::vector<GroupOutput> outputs;
  std::vector<bool> stored;  // per node: some non-scalar output holds its value

  int64_t width(const GroupRef& r) const {
    return r.kind == RefKind::kHandle ? inputs[r.index].a : nodes[r.index].value.a;
  }
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

std::string describe(const GroupValue& v) {
  switch (v.kind) {
    case GroupValue::kTall: return "a tall value of width " + std::to_string(v.a);
    case GroupValue::kSmall:
      return "a " + std::to_string(v.a) + "x" + std::to_string(v.b) + " matrix";
    case GroupValue::kScalar: return "a scalar";
  }
  return "?";
}

const char* node_name(NodeKind k) {
  switch (k) {
    case NodeKind::kMap: return "MAP";
    case NodeKind::kGemm: return "GEMM";
    case NodeKind::kGemmTN: return "GEMM_TN";
    case NodeKind::kSum: return "SUM";
  }
  return "?";
}

int64_t product(const std::vector<int64_t>& dims, size_t from = 0) {
  int64_t n = 1;
  for (size_t d = from; d < dims.size(); ++d) n *= dims[d];
  return n;
}

// The sum of every element of a tall value: its one register, copied and summed.
ProgramCode sum_code(DType dtype) {
  return ProgramCode{2,
                     dtype,
                     static_cast<int64_t>(Reduction::kSum),
                     {1},
                     {static_cast<int64_t>(Opcode::kCopy)},
                     {1},
                     {0},
                     {0},
                     {0}};
}
Program sum_program(DType dtype) { return Program::build(sum_code(dtype), 1, 0); }

// The typed call of the row_group kernel (fields listed in row_group.hpp).
struct RowGroupParams {
  std::string label;
  DType dtype = DType::f32;
  int64_t rows = 0;
  std::vector<int64_t> input_kind, input_a, input_b;
  std::vector<int64_t> node_kind, node_width, node_trans_b, node_refs;
  std::vector<int64_t> ref_kind, ref_index;
  std::vector<int64_t> node_n_regs, node_out_reg, node_instrs;
  std::vector<int64_t> op, dst, a, b, c;
  std::vector<int64_t> output_node, output_rank, output_dims;
};

const Schema<RowGroupParams> kRowGroupSchema{field("label", &RowGroupParams::label),
                                             field("dtype", &RowGroupParams::dtype),
                                             field("rows", &RowGroupParams::rows),
                                             field("input_kind", &RowGroupParams::input_kind),
                                             field("input_a", &RowGroupParams::input_a),
                                             field("input_b", &RowGroupParams::input_b),
                                             field("node_kind", &RowGroupParams::node_kind),
                                             field("node_width", &RowGroupParams::node_width),
                                             field("node_trans_b", &RowGroupParams::node_trans_b),
                                             field("node_refs", &RowGroupParams::node_refs),
                                             field("ref_kind", &RowGroupParams::ref_kind),
                                             field("ref_index", &RowGroupParams::ref_index),
                                             field("node_n_regs", &RowGroupParams::node_n_regs),
                                             field("node_out_reg", &RowGroupParams::node_out_reg),
                                             field("node_instrs", &RowGroupParams::node_instrs),
                                             field("op", &RowGroupParams::op),
                                             field("dst", &RowGroupParams::dst),
                                             field("a", &RowGroupParams::a),
                                             field("b", &RowGroupParams::b),
                                             field("c", &RowGroupParams::c),
                                             field("output_node", &RowGroupParams::output_node),
                                             field("output_rank", &RowGroupParams::output_rank),
                                             field("output_dims", &RowGroupParams::output_dims)};

// Builds and checks the Group a call's typed params describe.
class GroupBuilder {
 public:
  GroupBuilder(const KernelCall& call, const RowGroupParams& p) : call_(call), p_(p) {}

  Group build() {
    g_.name = "row_group/" + p_.label;
    if (!call_.operands.memory.empty()) throw bad("in-memory operands are not supported");
    g_.dtype = p_.dtype;
    if (g_.dtype != DType::f32 && g_.dtype != DType::f64) {
      throw TypeError(g_.name + ": row groups run on float32 or float64, not " +
                      dtype_name(g_.dtype));
    }
    g_.rows = p_.rows;
    if (g_.rows < 0) throw bad("negative row count " + std::to_string(g_.rows));
    g_.handles = call_.operands.handles;
    g_.scalars = call_.operands.scalars;
    build_inputs();
    const size_t n_nodes = p_.node_kind.size();
    same_length(n_nodes, {{"node_width", &p_.node_width},
                          {"node_trans_b", &p_.node_trans_b},
                          {"node_refs", &p_.node_refs},
                          {"node_n_regs", &p_.node_n_regs},
                          {"node_out_reg", &p_.node_out_reg},
                          {"node_instrs", &p_.node_instrs}});
    same_length(p_.ref_kind.size(), {{"ref_index", &p_.ref_index}});
    same_length(p_.op.size(), {{"dst", &p_.dst}, {"a", &p_.a}, {"b", &p_.b}, {"c", &p_.c}});
    for (size_t j = 0; j < n_nodes; ++j) g_.nodes.push_back(build_node(static_cast<int64_t>(j)));
    if (ref_ != p_.ref_kind.size()) throw bad("more refs than the nodes read");
    if (instr_ != p_.op.size()) throw bad("more instructions than the MAP nodes hold");
    build_outputs();
    return std::move(g_);
  }

 private:
  ValueError bad(const std::string& why) const {
    return ValueError(g_.name + ": malformed params: " + why);
  }

  // Fields parallel to one with `n` entries.
  void same_length(size_t n,
                   std::initializer_list<std::pair<const char*, const std::vector<int64_t>*>> fs) {
    for (const auto& [name, f] : fs) {
      if (f->size() != n) {
        reject_field(
            call_.kernel, name,
            "has " + std::to_string(f->size()) + " entries; it needs " + std::to_string(n));
      }
    }
  }

  int64_t positive(int64_t v, const std::string& what) const {
    if (v < 1) throw bad(what + " is " + std::to_string(v) + "; it must be at least 1");
    return v;
  }

  void build_inputs() {
    const size_t n_in = p_.input_kind.size();
    same_length(n_in, {{"input_a", &p_.input_a}, {"input_b", &p_.input_b}});
    if (n_in != g_.handles.size()) {
      throw bad(std::to_string(n_in) + " inputs declared for " + std::to_string(g_.handles.size()) +
                " handles");
    }
    for (size_t i = 0; i < n_in; ++i) {
      const std::string what = "input " + std::to_string(i);
      ArrayRef arr = reg().get(g_.handles[i]);
      const ArrayInfo& info = arr->info();
      if (info.dtype != g_.dtype) {
        throw TypeError(g_.name + ": " + what + " is " + info.describe() + ", not " +
                        dtype_name(g_.dtype));
      }
      GroupValue v;
      if (p_.input_kind[i] == 0) {
        v = {GroupValue::kTall, positive(p_.input_a[i], what + "'s width"), 0};
        if (info.shape.empty() || info.shape[0] != g_.rows || product(info.shape, 1) != v.a) {
          throw ValueError(g_.name + ": " + what + " is " + info.describe() + ", not " +
                           std::to_string(g_.rows) + " rows of " + std::to_string(v.a) +
                           " elements");
        }
      } else if (p_.input_kind[i] == 1) {
        v = {GroupValue::kSmall, positive(p_.input_a[i], what + "'s rows"),
             positive(p_.input_b[i], what + "'s columns")};
        if (info.shape != std::vector<int64_t>{v.a, v.b}) {
          throw ValueError(g_.name + ": " + what + " is " + info.describe() + ", not a " +
                           std::to_string(v.a) + "x" + std::to_string(v.b) + " matrix");
        }
      } else {
        throw bad(what + " has unknown kind " + std::to_string(p_.input_kind[i]));
      }
      g_.arrays.push_back(std::move(arr));
      g_.inputs.push_back(v);
    }
  }

  // The next ref, read by node `j`, with what it holds.
  std::pair<GroupRef, GroupValue> ref(int64_t j, const std::string& what) {
    if (ref_ >= p_.ref_kind.size()) throw bad("node " + std::to_string(j) + " reads past the refs");
    const int64_t kind = p_.ref_kind[ref_];
    const int64_t index = p_.ref_index[ref_];
    ++ref_;
    auto in_range = [&](size_t n) {
      if (index < 0 || index >= static_cast<int64_t>(n)) {
        throw bad("node " + std::to_string(j) + ": " + what + " refers to " +
                  (kind == 0   ? "handle "
                   : kind == 1 ? "scalar "
                               : "node ") +
                  std::to_string(index) + " of " + std::to_string(n) +
                  (kind == 2 ? " earlier nodes" : ""));
      }
    };
    switch (kind) {
      case 0: in_range(g_.inputs.size()); return {{RefKind::kHandle, index}, g_.inputs[index]};
      case 1:
        in_range(g_.scalars.size());
        return {{RefKind::kScalar, index}, {GroupValue::kScalar}};
      case 2:
        in_range(static_cast<size_t>(j));
        return {{RefKind::kNode, index}, g_.nodes[index].value};
      default:
        throw bad("node " + std::to_string(j) + ": " + what + " has unknown ref kind " +
                  std::to_string(kind));
    }
  }

  GroupRef tall_ref(int64_t j, NodeKind k, const std::string& what) {
    auto [r, v] = ref(j, what);
    if (v.kind != GroupValue::kTall) {
      throw bad("node " + std::to_string(j) + " (" + node_name(k) + "): " + what + " is " +
                describe(v) + ", not a tall value");
    }
    return r;
  }

  GroupNode build_node(int64_t j) {
    const std::string at = "node " + std::to_string(j);
    const int64_t code = p_.node_kind[j];
    if (code < 0 || code > 3) throw bad(at + " has unknown code " + std::to_string(code));
    const size_t first_ref = ref_;
    GroupNode n;
    n.kind = static_cast<NodeKind>(code);
    switch (n.kind) {
      case NodeKind::kMap: build_map(j, n); break;
      case NodeKind::kGemm: build_gemm(j, n); break;
      case NodeKind::kGemmTN: {
        n.tall = {tall_ref(j, n.kind, "X1"), tall_ref(j, n.kind, "X2")};
        n.value = {GroupValue::kSmall, g_.width(n.tall[0]), g_.width(n.tall[1])};
        break;
      }
      case NodeKind::kSum:
        n.tall = {tall_ref(j, n.kind, "its operand")};
        n.value = {GroupValue::kScalar};
        n.program = sum_program(g_.dtype);
        break;
    }
    if (static_cast<int64_t>(ref_ - first_ref) != p_.node_refs[j]) {
      throw bad(at + " (" + node_name(n.kind) + ") reads " + std::to_string(ref_ - first_ref) +
                " refs, node_refs says " + std::to_string(p_.node_refs[j]));
    }
    return n;
  }

  // The slice [instr_, instr_ + count) of an instruction field.
  std::vector<int64_t> instructions(const std::vector<int64_t>& f, size_t count) const {
    return {f.begin() + static_cast<std::ptrdiff_t>(instr_),
            f.begin() + static_cast<std::ptrdiff_t>(instr_ + count)};
  }

  void build_map(int64_t j, GroupNode& n) {
    const std::string at = "node " + std::to_string(j) + " (MAP)";
    n.value = {GroupValue::kTall, positive(p_.node_width[j], at + "'s width")};
    for (int64_t i = 0; i < p_.node_refs[j]; ++i) {
      const std::string what = "argument " + std::to_string(i);
      auto [r, v] = ref(j, what);
      if (v.kind == GroupValue::kTall) {
        if (!n.scalars.empty()) throw bad(at + ": tall " + what + " after a scalar argument");
        if (v.a != n.value.a)
          throw bad(at + ": " + what + " is " + describe(v) + ", the node's width is " +
                    std::to_string(n.value.a));
        n.tall.push_back(r);
      } else if (v.kind == GroupValue::kScalar && r.kind == RefKind::kScalar) {
        n.scalars.push_back(r);
      } else {
        // A sum is known only after the pass; a small matrix has no rows.
        throw bad(at + ": " + what + " is " + describe(v) +
                  (r.kind == RefKind::kNode ? " computed in the group" : "") +
                  "; arguments are tall values or scalar operands");
      }
    }
    const int64_t n_instrs = p_.node_instrs[j];
    if (n_instrs < 0 || instr_ + static_cast<size_t>(n_instrs) > p_.op.size()) {
      throw bad(at + ": its " + std::to_string(n_instrs) + " instructions run past the " +
                std::to_string(p_.op.size()) + " sent");
    }
    const auto count = static_cast<size_t>(n_instrs);
    n.code = ProgramCode{p_.node_n_regs[j],
                         g_.dtype,
                         0,
                         {p_.node_out_reg[j]},
                         instructions(p_.op, count),
                         instructions(p_.dst, count),
                         instructions(p_.a, count),
                         instructions(p_.b, count),
                         instructions(p_.c, count)};
    instr_ += count;
    try {
      n.program = Program::build(n.code, n.tall.size(), n.scalars.size());
    } catch (const ValueError& e) {
      throw bad(at + ": " + e.what());
    }
  }

  void build_gemm(int64_t j, GroupNode& n) {
    const std::string at = "node " + std::to_string(j) + " (GEMM)";
    n.tall = {tall_ref(j, n.kind, "X")};
    auto [s, v] = ref(j, "S");
    if (s.kind != RefKind::kHandle || v.kind != GroupValue::kSmall) {
      throw bad(at + ": S is " + describe(v) +
                (s.kind == RefKind::kNode ? " computed in the group" : "") + ", not a small input");
    }
    n.small = s;
    const int64_t trans = p_.node_trans_b[j];
    if (trans != 0 && trans != 1) throw bad(at + ": trans_b is " + std::to_string(trans));
    n.trans_b = trans == 1;
    n.value = {GroupValue::kTall, positive(p_.node_width[j], at + "'s width")};
    const int64_t k = g_.width(n.tall[0]);
    const std::vector<int64_t> expected =
        n.trans_b ? std::vector<int64_t>{n.value.a, k} : std::vector<int64_t>{k, n.value.a};
    if (std::vector<int64_t>{v.a, v.b} != expected) {
      throw bad(at + ": X has width " + std::to_string(k) + " and the result width " +
                std::to_string(n.value.a) + ", so S must be " + shape_text(expected) +
                (n.trans_b ? " (trans_b)" : "") + ", not " + shape_text({v.a, v.b}));
    }
  }

  void build_outputs() {
    const size_t n_out = p_.output_node.size();
    same_length(n_out, {{"output_rank", &p_.output_rank}});
    g_.stored.assign(g_.nodes.size(), false);
    size_t dim = 0;
    for (size_t o = 0; o < n_out; ++o) {
      const std::string what = "output " + std::to_string(o);
      const int64_t node = p_.output_node[o];
      if (node < 0 || node >= static_cast<int64_t>(g_.nodes.size())) {
        throw bad(what + " names node " + std::to_string(node) + " of " +
                  std::to_string(g_.nodes.size()));
      }
      const int64_t rank = p_.output_rank[o];
      if (rank < 0 || dim + static_cast<size_t>(rank) > p_.output_dims.size()) {
        reject_field(call_.kernel, "output_dims", "has fewer extents than output_rank adds up to");
      }
      std::vector<int64_t> shape(p_.output_dims.begin() + static_cast<std::ptrdiff_t>(dim),
                                 p_.output_dims.begin() + static_cast<std::ptrdiff_t>(dim + rank));
      dim += static_cast<size_t>(rank);
      for (int64_t d : shape) {
        if (d < 0) throw bad(what + " has a negative extent");
      }
      const GroupValue& v = g_.nodes[node].value;
      bool fits = false;
      switch (v.kind) {
        case GroupValue::kTall:
          fits = rank >= 1 && shape[0] == g_.rows && product(shape, 1) == v.a;
          break;
        case GroupValue::kSmall: fits = rank >= 1 && product(shape) == v.a * v.b; break;
        case GroupValue::kScalar: fits = rank == 0; break;
      }
      if (!fits) {
        throw bad(
            what + " has shape " + shape_text(shape) + " for node " + std::to_string(node) + ", " +
            describe(v) +
            (v.kind == GroupValue::kTall ? " over " + std::to_string(g_.rows) + " rows" : ""));
      }
      if (v.kind != GroupValue::kScalar) g_.stored[node] = true;
      g_.outputs.push_back(GroupOutput{node, std::move(shape)});
    }
    if (dim != p_.output_dims.size()) {
      reject_field(call_.kernel, "output_dims", "has more extents than output_rank adds up to");
    }
  }

  const KernelCall& call_;
  const RowGroupParams& p_;
  Group g_;
  size_t ref_ = 0, instr_ = 0;
};

// Rows per block of the single pass: two slots for every stream (tall
// inputs read ahead, stored node values written behind), one block for
// values that live only inside the compute stage; small inputs and
// GEMM_TN accumulators stay whole. 0: not even one row fits.
int64_t plan_rows(const Group& g) {
  const int64_t isz = static_cast<int64_t>(itemsize(g.dtype));
  int64_t resident = 0, per_row = 0, streams = 0, locals = 0;
  for (const GroupValue& v : g.inputs) {
    if (v.kind == GroupValue::kTall) {
      per_row += kPipelineSlots * v.a * isz;
      ++streams;
    } else {
      resident += mapped_bytes(v.a * v.b * isz);
    }
  }
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    const GroupValue& v = g.nodes[j].value;
    if (v.kind == GroupValue::kTall && g.stored[j]) {
      per_row += kPipelineSlots * v.a * isz;
      ++streams;
    } else if (v.kind == GroupValue::kTall) {
      per_row += v.a * isz;
      ++locals;
    } else if (v.kind == GroupValue::kSmall) {
      resident += mapped_bytes(v.a * v.b * isz);
    }
  }
  // A page of slack per slot lets each block land at its file offset's
  // alignment, so reads and writes go direct whatever the block's size.
  resident += streams * kPipelineSlots * static_cast<int64_t>(kIoAlignment);
  const int64_t available = memory_budget() - resident;
  const int64_t all = std::max<int64_t>(g.rows, 1);
  if (per_row == 0) return available >= 0 ? all : 0;
  if (available < per_row) return 0;
  return std::min(units_within(available, per_row, streams * kPipelineSlots + locals), all);
}

// One pass over row blocks: the reader fills every tall input's block t+1
// while the nodes run on block t and the writer writes block t-1 of every
// stored value.
template <class T>
class SinglePass {
 public:
  // targets[j]: the arrays node j's value goes to (tall or GEMM_TN nodes).
  SinglePass(const Group& g, int64_t block_rows, const std::vector<std::vector<ArrayRef>>& targets)
      : g_(g), block_(block_rows), targets_(targets) {
    const size_t n_in = g.inputs.size(), n_nodes = g.nodes.size();
    readers_.resize(n_in);
    in_bufs_.resize(n_in);
    small_.resize(n_in);
    for (size_t i = 0; i < n_in; ++i) {
      const GroupValue& v = g.inputs[i];
      if (v.kind == GroupValue::kTall) {
        readers_[i] = make_reader(g.arrays[i], g.arrays[i]->info().shape, 0);
        in_bufs_[i] = std::make_unique<StreamBuffers>(bytes(block_ * v.a) +
                                                      static_cast<int64_t>(kIoAlignment));
      } else {
        small_[i] = AlignedBuffer(static_cast<size_t>(bytes(v.a * v.b)));
        g.arrays[i]->read_elems(small_[i].data(), 0, v.a * v.b);
      }
    }
    out_bufs_.resize(n_nodes);
    local_.resize(n_nodes);
    acc_.resize(n_nodes);
    runners_.resize(n_nodes);
    for (size_t j = 0; j < n_nodes; ++j) {
      const GroupNode& n = g.nodes[j];
      if (n.value.kind == GroupValue::kTall && g.stored[j]) {
        out_bufs_[j] = std::make_unique<StreamBuffers>(bytes(block_ * n.value.a) +
                                                       static_cast<int64_t>(kIoAlignment));
      } else if (n.value.kind == GroupValue::kTall) {
        local_[j] = AlignedBuffer(static_cast<size_t>(bytes(block_ * n.value.a)));
      } else if (n.value.kind == GroupValue::kSmall) {
        acc_[j] = AlignedBuffer(static_cast<size_t>(bytes(n.value.a * n.value.b)));
        std::memset(acc_[j].data(), 0, acc_[j].size());
      }
      if (n.kind == NodeKind::kMap) {
        std::vector<double> values;
        for (const GroupRef& r : n.scalars) values.push_back(g.scalars[r.index]);
        runners_[j] = std::make_unique<ProgramRunner>(
            n.program, std::vector<DType>(n.tall.size(), g.dtype), values);
      } else if (n.kind == NodeKind::kSum) {
        runners_[j] = std::make_unique<ProgramRunner>(n.program, std::vector<DType>{g.dtype},
                                                      std::vector<double>{});
      }
    }
  }

  void run() {
    const int64_t n_tasks = (g_.rows + block_ - 1) / block_;
    PipelineStages stages;
    stages.read = [this](int64_t t) { read(t); };
    stages.compute = [this](int64_t t) { compute(t); };
    if (std::any_of(out_bufs_.begin(), out_bufs_.end(),
                    [](const auto& b) { return b != nullptr; })) {
      stages.write = [this](int64_t t) { write(t); };
    }
    run_pipeline(n_tasks, stages);
    for (size_t j = 0; j < g_.nodes.size(); ++j) {
      if (g_.nodes[j].kind != NodeKind::kGemmTN) continue;
      for (const ArrayRef& a : targets_[j]) a->write_elems(acc_[j].data(), 0, a->info().numel());
    }
  }

  double sum(size_t node) const { return runners_[node]->reduced(); }

 private:
  static int64_t bytes(int64_t elems) { return elems * static_cast<int64_t>(sizeof(T)); }
  int64_t first_row(int64_t t) const { return t * block_; }
  int64_t block_rows(int64_t t) const { return std::min(block_, g_.rows - first_row(t)); }

  T* input_block(size_t i, int64_t t) {
    const int64_t first = first_row(t) * g_.inputs[i].a;
    return reinterpret_cast<T*>(in_bufs_[i]->at(t) + readers_[i]->alignment_shift(first));
  }

  T* node_block(size_t j, int64_t t) {
    if (!out_bufs_[j]) return reinterpret_cast<T*>(local_[j].data());
    // Where the block's file offset is in its page, so the write goes direct.
    const uint64_t offset = targets_[j][0]->byte_of(first_row(t) * g_.nodes[j].value.a);
    return reinterpret_cast<T*>(out_bufs_[j]->at(t) + offset % kIoAlignment);
  }

  T* block_of(const GroupRef& r, int64_t t) {
    return r.kind == RefKind::kHandle ? input_block(static_cast<size_t>(r.index), t)
                                      : node_block(static_cast<size_t>(r.index), t);
  }

  void read(int64_t t) {
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const int64_t w = g_.inputs[i].a;
      if (readers_[i]) readers_[i]->read(first_row(t) * w, block_rows(t) * w, input_block(i, t));
    }
  }

  void compute(int64_t t) {
    const int64_t rows = block_rows(t);
    for (size_t j = 0; j < g_.nodes.size(); ++j) {
      const GroupNode& n = g_.nodes[j];
      switch (n.kind) {
        case NodeKind::kMap: {
          std::vector<const void*> in;
          for (const GroupRef& r : n.tall) in.push_back(block_of(r, t));
          runners_[j]->run(in, node_block(j, t), rows * n.value.a);
          break;
        }
        case NodeKind::kGemm: {
          const int64_t k = g_.width(n.tall[0]), m = n.value.a;
          const T* s = reinterpret_cast<const T*>(small_[n.small.index].data());
          gemm(false, n.trans_b, rows, m, k, block_of(n.tall[0], t), k, s, n.trans_b ? k : m, T(0),
               node_block(j, t), m);
          break;
        }
        case NodeKind::kGemmTN: {
          const int64_t w1 = n.value.a, w2 = n.value.b;
          gemm(true, false, w1, w2, rows, block_of(n.tall[0], t), w1, block_of(n.tall[1], t), w2,
               T(1), reinterpret_cast<T*>(acc_[j].data()), w2);
          break;
        }
        case NodeKind::kSum:
          runners_[j]->run({block_of(n.tall[0], t)}, nullptr, rows * g_.width(n.tall[0]));
          break;
      }
    }
  }

  void write(int64_t t) {
    for (size_t j = 0; j < g_.nodes.size(); ++j) {
      if (!out_bufs_[j]) continue;
      const int64_t w = g_.nodes[j].value.a;
      for (const ArrayRef& a : targets_[j])
        a->write_elems(node_block(j, t), first_row(t) * w, block_rows(t) * w);
    }
  }

  const Group& g_;
  const int64_t block_;
  const std::vector<std::vector<ArrayRef>>& targets_;
  std::vector<std::unique_ptr<OperandReader>> readers_;   // per tall input
  std::vector<std::unique_ptr<StreamBuffers>> in_bufs_;   // per tall input
  std::vector<AlignedBuffer> small_;                      // per small input
  std::vector<std::unique_ptr<StreamBuffers>> out_bufs_;  // per stored tall node
  std::vector<AlignedBuffer> local_;                      // per other tall node
  std::vector<AlignedBuffer> acc_;                        // per GEMM_TN node
  std::vector<std::unique_ptr<ProgramRunner>> runners_;   // per MAP and SUM node
};

template <class T>
KernelResult run_single_pass(const Group& g, int64_t block_rows) {
  std::vector<ArrayRef> arrays(g.outputs.size());
  std::vector<std::vector<ArrayRef>> targets(g.nodes.size());
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const GroupOutput& out = g.outputs[o];
    if (g.nodes[out.node].value.kind == GroupValue::kScalar) continue;
    arrays[o] = StoredArray::create_scratch(ArrayInfo{g.dtype, out.shape}, "row_group",
                                            ScratchContents::kOverwritten);
    targets[out.node].push_back(arrays[o]);
  }
  SinglePass<T> pass(g, block_rows, targets);
  pass.run();
  KernelResult result;
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    if (arrays[o])
      result.handles.push_back(reg().add(arrays[o]));
    else
      result.values.push_back(pass.sum(static_cast<size_t>(g.outputs[o].node)));
  }
  return result;
}

// Handles made during a call: released when it ends unless kept (also on errors).
class TempHandles {
 public:
  TempHandles() = default;
  TempHandles(const TempHandles&) = delete;
  TempHandles& operator=(const TempHandles&) = delete;
  ~TempHandles() {
    for (int32_t h : handles_) reg().release_floating(h);
  }
  int32_t add(int32_t h) {
    handles_.push_back(h);
    return h;
  }
  void keep() { handles_.clear(); }

 private:
  std::vector<int32_t> handles_;
};

// The same nodes as whole-array ops, each streaming within the budget on its
// own; tall values become (N, width) arrays on disk.
KernelResult run_node_by_node(const Group& g) {
  TempHandles temps;
  const int64_t N = g.rows;
  std::vector<int32_t> input(g.handles);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const GroupValue& v = g.inputs[i];
    const std::vector<int64_t> matrix{N, v.a};
    if (v.kind == GroupValue::kTall && g.arrays[i]->info().shape != matrix) {
      input[i] = temps.add(reg().add(StoredArray::reshaped(g.arrays[i], matrix)));
    }
  }
  // A node's value is freed after the last node that reads it, unless it is an output.
  std::vector<size_t> last_use(g.nodes.size(), 0);
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    for (const GroupRef& r : g.nodes[j].tall) {
      if (r.kind == RefKind::kNode) last_use[r.index] = j;
    }
  }
  std::vector<int32_t> value(g.nodes.size(), 0);
  std::vector<double> sum(g.nodes.size(), 0.0);
  auto handle_of = [&](const GroupRef& r) {
    return r.kind == RefKind::kHandle ? input[r.index] : value[r.index];
  };
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    const GroupNode& n = g.nodes[j];
    switch (n.kind) {
      case NodeKind::kMap: {
        std::vector<int32_t> handles;
        for (const GroupRef& r : n.tall) handles.push_back(handle_of(r));
        std::vector<double> scalars;
        for (const GroupRef& r : n.scalars) scalars.push_back(g.scalars[r.index]);
        value[j] = temps.add(
            map_program(ProgramCall{g.name, handles, {}, scalars, {N, n.value.a}, n.code}));
        break;
      }
      case NodeKind::kGemm:
        value[j] =
            temps.add(matmul_arrays(handle_of(n.tall[0]), input[n.small.index], false, n.trans_b));
        break;
      case NodeKind::kGemmTN:
        value[j] =
            temps.add(matmul_arrays(handle_of(n.tall[0]), handle_of(n.tall[1]), true, false));
        break;
      case NodeKind::kSum: {
        const int64_t w = g.width(n.tall[0]);
        sum[j] = reduce_program(
            ProgramCall{g.name, {handle_of(n.tall[0])}, {}, {}, {N, w}, sum_code(g.dtype)});
        break;
      }
    }
    for (const GroupRef& r : n.tall) {
      if (r.kind == RefKind::kNode && last_use[r.index] == j && !g.stored[r.index]) {
        reg().release_floating(value[r.index]);
      }
    }
  }
  TempHandles made;
  KernelResult result;
  for (const GroupOutput& out : g.outputs) {
    if (g.nodes[out.node].value.kind == GroupValue::kScalar) {
      result.values.push_back(sum[out.node]);
    } else {
      result.handles.push_back(
          made.add(reg().add(StoredArray::reshaped(reg().get(value[out.node]), out.shape))));
    }
  }
  made.keep();
  return result;
}

Group build_group(const KernelCall& call) {
  return GroupBuilder(call, kRowGroupSchema.decode(call.kernel, call.attrs)).build();
}

KernelResult run_row_group(const KernelCall& call, const RowGroupParams& p) {
  const Group g = GroupBuilder(call, p).build();
  const int64_t block_rows = plan_rows(g);
  if (block_rows == 0) return run_node_by_node(g);
  return g.dtype == DType::f64 ? run_single_pass<double>(g, block_rows)
                               : run_single_pass<float>(g, block_rows);
}
const KernelRegistration kRowGroup{"row_group", kRowGroupSchema, run_row_group};

}  // namespace

int64_t group_block_rows(const KernelCall& call) { return plan_rows(build_group(call)); }

}  // namespace jask
