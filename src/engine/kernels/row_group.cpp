#include "kernels/row_group.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
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
  std::vector<int64_t> program_params;  // MAP, as sent
  Program program{};                    // MAP: decoded; SUM: copy and sum
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
Program sum_program(DType dtype) {
  return Program{2, dtype, Reduction::kSum, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
}

// Reads and checks the params of one call (encoding in row_group.hpp).
class GroupParser {
 public:
  explicit GroupParser(const OpCall& call) : call_(call) {}

  Group parse() {
    g_.name = call_.kernel;
    if (call_.kernel.rfind("row_group/", 0) != 0)
      throw ValueError("unknown group kernel '" + call_.kernel + "'");
    if (!call_.buffers.empty()) throw bad("in-memory operands are not supported");
    parse_dtype();
    g_.rows = next("the row count");
    if (g_.rows < 0) throw bad("negative row count " + std::to_string(g_.rows));
    g_.handles = call_.handles;
    g_.scalars = call_.scalars;
    parse_inputs();
    const int64_t n_nodes = count("node count", 1);
    for (int64_t j = 0; j < n_nodes; ++j) g_.nodes.push_back(parse_node(j));
    parse_outputs();
    if (pos_ != p().size())
      throw bad(std::to_string(p().size() - pos_) + " params left after the outputs");
    return std::move(g_);
  }

 private:
  const std::vector<int64_t>& p() const { return call_.params; }

  ValueError bad(const std::string& why) const {
    return ValueError(g_.name + ": malformed params: " + why);
  }

  int64_t next(const std::string& what) {
    if (pos_ >= p().size()) throw bad("they end before " + what);
    return p()[pos_++];
  }

  // A count of items taking at least `min_size` params each.
  int64_t count(const std::string& what, int64_t min_size) {
    const int64_t n = next("the " + what);
    const int64_t left = static_cast<int64_t>(p().size() - pos_);
    if (n < 0 || n > left / min_size) {
      throw bad(what + " " + std::to_string(n) + ", but only " + std::to_string(left) +
                " params are left");
    }
    return n;
  }

  int64_t positive(const std::string& what) {
    const int64_t v = next(what);
    if (v < 1) throw bad(what + " is " + std::to_string(v) + "; it must be at least 1");
    return v;
  }

  void parse_dtype() {
    g_.dtype = dtype_from_int(next("the dtype"));
    if (g_.dtype != DType::f32 && g_.dtype != DType::f64) {
      throw TypeError(g_.name + ": row groups run on float32 or float64, not " +
                      dtype_name(g_.dtype));
    }
  }

  void parse_inputs() {
    const int64_t n_in = count("input count", 3);
    if (n_in != static_cast<int64_t>(call_.handles.size())) {
      throw bad(std::to_string(n_in) + " inputs declared for " +
                std::to_string(call_.handles.size()) + " handles");
    }
    for (int64_t i = 0; i < n_in; ++i) {
      const std::string what = "input " + std::to_string(i);
      const int64_t kind = next(what + "'s kind");
      ArrayRef arr = reg().get(call_.handles[i]);
      const ArrayInfo& info = arr->info();
      if (info.dtype != g_.dtype) {
        throw TypeError(g_.name + ": " + what + " is " + info.describe() + ", not " +
                        dtype_name(g_.dtype));
      }
      GroupValue v;
      if (kind == 0) {
        v = {GroupValue::kTall, positive(what + "'s width"), 0};
        next(what + "'s unused field");
        if (info.shape.empty() || info.shape[0] != g_.rows || product(info.shape, 1) != v.a) {
          throw ValueError(g_.name + ": " + what + " is " + info.describe() + ", not " +
                           std::to_string(g_.rows) + " rows of " + std::to_string(v.a) +
                           " elements");
        }
      } else if (kind == 1) {
        const int64_t rows = positive(what + "'s rows");
        v = {GroupValue::kSmall, rows, positive(what + "'s columns")};
        if (info.shape != std::vector<int64_t>{v.a, v.b}) {
          throw ValueError(g_.name + ": " + what + " is " + info.describe() + ", not a " +
                           std::to_string(v.a) + "x" + std::to_string(v.b) + " matrix");
        }
      } else {
        throw bad(what + " has unknown kind " + std::to_string(kind));
      }
      g_.arrays.push_back(std::move(arr));
      g_.inputs.push_back(v);
    }
  }

  // A ref read by node `j`, with what it holds.
  std::pair<GroupRef, GroupValue> ref(int64_t j, const std::string& what) {
    const int64_t kind = next(what);
    const int64_t index = next(what + "'s index");
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

  GroupNode parse_node(int64_t j) {
    const std::string at = "node " + std::to_string(j);
    const int64_t code = next(at + "'s code");
    if (code < 0 || code > 3) throw bad(at + " has unknown code " + std::to_string(code));
    GroupNode n;
    n.kind = static_cast<NodeKind>(code);
    switch (n.kind) {
      case NodeKind::kMap: parse_map(j, n); break;
      case NodeKind::kGemm: parse_gemm(j, n); break;
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
    return n;
  }

  void parse_map(int64_t j, GroupNode& n) {
    const std::string at = "node " + std::to_string(j) + " (MAP)";
    n.value = {GroupValue::kTall, positive(at + "'s width")};
    const int64_t n_args = count(at + "'s argument count", 2);
    for (int64_t i = 0; i < n_args; ++i) {
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
    const int64_t n_prog = count(at + "'s program length", 1);
    n.program_params.assign(p().begin() + static_cast<std::ptrdiff_t>(pos_),
                            p().begin() + static_cast<std::ptrdiff_t>(pos_ + n_prog));
    pos_ += static_cast<size_t>(n_prog);
    try {
      n.program = Program::decode(n.program_params, n.tall.size(), n.scalars.size());
    } catch (const ValueError& e) {
      throw bad(at + ": " + e.what());
    }
    if (n.program.reduction != Reduction::kNone || !n.program.more_out_regs.empty()) {
      throw bad(at + ": its program must have one output and no reduction");
    }
    if (n.program.out_dtype != g_.dtype) {
      throw bad(at + ": its program writes " + dtype_name(n.program.out_dtype) + ", the group is " +
                dtype_name(g_.dtype));
    }
  }

  void parse_gemm(int64_t j, GroupNode& n) {
    const std::string at = "node " + std::to_string(j) + " (GEMM)";
    n.tall = {tall_ref(j, n.kind, "X")};
    auto [s, v] = ref(j, "S");
    if (s.kind != RefKind::kHandle || v.kind != GroupValue::kSmall) {
      throw bad(at + ": S is " + describe(v) +
                (s.kind == RefKind::kNode ? " computed in the group" : "") + ", not a small input");
    }
    n.small = s;
    const int64_t trans = next(at + "'s trans_b");
    if (trans != 0 && trans != 1) throw bad(at + ": trans_b is " + std::to_string(trans));
    n.trans_b = trans == 1;
    n.value = {GroupValue::kTall, positive(at + "'s width")};
    const int64_t k = g_.width(n.tall[0]);
    const std::vector<int64_t> expected =
        n.trans_b ? std::vector<int64_t>{n.value.a, k} : std::vector<int64_t>{k, n.value.a};
    if (std::vector<int64_t>{v.a, v.b} != expected) {
      throw bad(at + ": X has width " + std::to_string(k) + " and the result width " +
                std::to_string(n.value.a) + ", so S must be " + shape_text(expected) +
                (n.trans_b ? " (trans_b)" : "") + ", not " + shape_text({v.a, v.b}));
    }
  }

  void parse_outputs() {
    const int64_t n_out = count("output count", 2);
    g_.stored.assign(g_.nodes.size(), false);
    for (int64_t o = 0; o < n_out; ++o) {
      const std::string what = "output " + std::to_string(o);
      const int64_t node = next(what + "'s node");
      if (node < 0 || node >= static_cast<int64_t>(g_.nodes.size())) {
        throw bad(what + " names node " + std::to_string(node) + " of " +
                  std::to_string(g_.nodes.size()));
      }
      const int64_t rank = count(what + "'s rank", 1);
      std::vector<int64_t> shape(static_cast<size_t>(rank));
      for (auto& d : shape) {
        d = next(what + "'s shape");
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
  }

  const OpCall& call_;
  Group g_;
  size_t pos_ = 0;
};

// Rows per block of the single pass: two slots for every stream (tall
// inputs read ahead, stored node values written behind), one block for
// values that live only inside the compute stage; small inputs and
// GEMM_TN accumulators stay whole. 0: not even one row fits.
int64_t plan_rows(const Group& g) {
  const int64_t isz = static_cast<int64_t>(itemsize(g.dtype));
  int64_t resident = 0, per_row = 0, streams = 0;
  for (const GroupValue& v : g.inputs) {
    if (v.kind == GroupValue::kTall) {
      per_row += kPipelineSlots * v.a * isz;
      ++streams;
    } else {
      resident += v.a * v.b * isz;
    }
  }
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    const GroupValue& v = g.nodes[j].value;
    if (v.kind == GroupValue::kTall && g.stored[j]) {
      per_row += kPipelineSlots * v.a * isz;
      ++streams;
    } else if (v.kind == GroupValue::kTall) {
      per_row += v.a * isz;
    } else if (v.kind == GroupValue::kSmall) {
      resident += v.a * v.b * isz;
    }
  }
  // A page of slack per slot lets each block land at its file offset's
  // alignment, so reads and writes go direct whatever the block's size.
  resident += streams * kPipelineSlots * static_cast<int64_t>(kIoAlignment);
  const int64_t available = memory_budget() - resident;
  const int64_t all = std::max<int64_t>(g.rows, 1);
  if (per_row == 0) return available >= 0 ? all : 0;
  if (available < per_row) return 0;
  return std::min(available / per_row, all);
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
GroupResult run_single_pass(const Group& g, int64_t block_rows) {
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
  GroupResult result;
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    if (arrays[o])
      result.handles.push_back(reg().add(arrays[o]));
    else
      result.scalars.push_back(pass.sum(static_cast<size_t>(g.outputs[o].node)));
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
GroupResult run_node_by_node(const Group& g) {
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
  const int64_t dtype = static_cast<int64_t>(g.dtype);
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    const GroupNode& n = g.nodes[j];
    switch (n.kind) {
      case NodeKind::kMap: {
        std::vector<int32_t> handles;
        for (const GroupRef& r : n.tall) handles.push_back(handle_of(r));
        std::vector<double> scalars;
        for (const GroupRef& r : n.scalars) scalars.push_back(g.scalars[r.index]);
        std::vector<int64_t> params{2, N, n.value.a,
                                    0};  // operand header: out shape (N, width), nothing in memory
        params.insert(params.end(), n.program_params.begin(), n.program_params.end());
        value[j] = temps.add(map_program(g.name, handles, {}, scalars, params));
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
        sum[j] = reduce_program(g.name, {handle_of(n.tall[0])}, {}, {},
                                {2, N, w, 0, 2, dtype, static_cast<int64_t>(Reduction::kSum), 1, 1,
                                 static_cast<int64_t>(Opcode::kCopy), 1, 0, 0, 0});
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
  GroupResult result;
  for (const GroupOutput& out : g.outputs) {
    if (g.nodes[out.node].value.kind == GroupValue::kScalar) {
      result.scalars.push_back(sum[out.node]);
    } else {
      result.handles.push_back(
          made.add(reg().add(StoredArray::reshaped(reg().get(value[out.node]), out.shape))));
    }
  }
  made.keep();
  return result;
}

}  // namespace

int64_t group_block_rows(const OpCall& call) { return plan_rows(GroupParser(call).parse()); }

GroupResult run_group_op(const OpCall& call) {
  const Group g = GroupParser(call).parse();
  const int64_t block_rows = plan_rows(g);
  if (block_rows == 0) return run_node_by_node(g);
  return g.dtype == DType::f64 ? run_single_pass<double>(g, block_rows)
                               : run_single_pass<float>(g, block_rows);
}

}  // namespace jask
