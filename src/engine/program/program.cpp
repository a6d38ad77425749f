#include "program/program.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/errors.hpp"

namespace jask {
namespace {

constexpr int64_t kChunk = 1024;  // elements per register: stays in L1/L2

const std::pair<const char*, Opcode> kOpcodes[] = {
    {"copy", Opcode::kCopy},
    {"neg", Opcode::kNeg},
    {"square", Opcode::kSquare},
    {"sqrt", Opcode::kSqrt},
    {"rsqrt", Opcode::kRsqrt},
    {"abs", Opcode::kAbs},
    {"sign", Opcode::kSign},
    {"exp", Opcode::kExp},
    {"log", Opcode::kLog},
    {"log1p", Opcode::kLog1p},
    {"expm1", Opcode::kExpm1},
    {"tanh", Opcode::kTanh},
    {"sigmoid", Opcode::kSigmoid},
    {"relu", Opcode::kRelu},
    {"softplus", Opcode::kSoftplus},
    {"gelu", Opcode::kGelu},
    {"reciprocal", Opcode::kReciprocal},
    {"not", Opcode::kNot},
    {"sin", Opcode::kSin},
    {"cos", Opcode::kCos},
    {"add", Opcode::kAdd},
    {"sub", Opcode::kSub},
    {"mul", Opcode::kMul},
    {"div", Opcode::kDiv},
    {"max", Opcode::kMax},
    {"min", Opcode::kMin},
    {"pow", Opcode::kPow},
    {"lt", Opcode::kLt},
    {"le", Opcode::kLe},
    {"gt", Opcode::kGt},
    {"ge", Opcode::kGe},
    {"eq", Opcode::kEq},
    {"ne", Opcode::kNe},
    {"and", Opcode::kAnd},
    {"or", Opcode::kOr},
    {"select", Opcode::kSelect},
};

bool is_wide(DType dt) { return dt == DType::f64 || dt == DType::i32; }

template <class C, class S, class Load>
void load_chunk(const void* src, C* dst, int64_t n, Load load) {
  auto* s = static_cast<const S*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<C>(load(s[i]));
}

template <class C>
void load(DType dt, const void* src, C* dst, int64_t n) {
  switch (dt) {
    case DType::f32: return load_chunk<C, float>(src, dst, n, [](float v) { return v; });
    case DType::f64: return load_chunk<C, double>(src, dst, n, [](double v) { return v; });
    case DType::f16: return load_chunk<C, uint16_t>(src, dst, n, f16_to_f32);
    case DType::bf16: return load_chunk<C, uint16_t>(src, dst, n, bf16_to_f32);
    case DType::i32: return load_chunk<C, int32_t>(src, dst, n, [](int32_t v) { return v; });
    case DType::b8: return load_chunk<C, uint8_t>(src, dst, n, [](uint8_t v) { return v != 0; });
  }
}

template <class C>
void store(DType dt, const C* src, void* dst_v, int64_t n) {
  switch (dt) {
    case DType::f32: {
      auto* d = static_cast<float*>(dst_v);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(src[i]);
      return;
    }
    case DType::f64: {
      auto* d = static_cast<double*>(dst_v);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<double>(src[i]);
      return;
    }
    case DType::f16: {
      auto* d = static_cast<uint16_t*>(dst_v);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(static_cast<float>(src[i]));
      return;
    }
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst_v);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(static_cast<float>(src[i]));
      return;
    }
    case DType::i32: {
      // float -> int32 truncates toward zero, as numpy's astype does
      auto* d = static_cast<int32_t*>(dst_v);
      for (int64_t i = 0; i < n; ++i) {
        double v = static_cast<double>(src[i]);
        d[i] = std::isfinite(v) ? static_cast<int32_t>(static_cast<int64_t>(v)) : 0;
      }
      return;
    }
    case DType::b8: {
      auto* d = static_cast<uint8_t*>(dst_v);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i] != C(0);
      return;
    }
  }
}

template <class C, class F>
void unary(C* d, const C* a, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
}
template <class C, class F>
void binary(C* d, const C* a, const C* b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

template <class C>
void execute(const Instr& in, C* regs, int64_t n) {
  C* d = regs + in.dst * kChunk;
  const C* a = regs + in.a * kChunk;
  const C* b = regs + in.b * kChunk;
  const C* c = regs + in.c * kChunk;
  using std::abs, std::sqrt, std::exp, std::log, std::log1p, std::expm1, std::tanh, std::pow,
      std::sin, std::cos;
  const C zero(0), one(1);
  switch (in.op) {
    case Opcode::kCopy: return unary(d, a, n, [](C x) { return x; });
    case Opcode::kNeg: return unary(d, a, n, [](C x) { return -x; });
    case Opcode::kSquare: return unary(d, a, n, [](C x) { return x * x; });
    case Opcode::kSqrt: return unary(d, a, n, [](C x) { return sqrt(x); });
    case Opcode::kRsqrt: return unary(d, a, n, [one](C x) { return one / sqrt(x); });
    case Opcode::kAbs: return unary(d, a, n, [](C x) { return abs(x); });
    case Opcode::kSign:
      return unary(d, a, n, [zero, one](C x) { return x > zero ? one : x < zero ? -one : x; });
    case Opcode::kExp: return unary(d, a, n, [](C x) { return exp(x); });
    case Opcode::kLog: return unary(d, a, n, [](C x) { return log(x); });
    case Opcode::kLog1p: return unary(d, a, n, [](C x) { return log1p(x); });
    case Opcode::kExpm1: return unary(d, a, n, [](C x) { return expm1(x); });
    case Opcode::kTanh: return unary(d, a, n, [](C x) { return tanh(x); });
    case Opcode::kSigmoid: return unary(d, a, n, [one](C x) { return one / (one + exp(-x)); });
    case Opcode::kRelu: return unary(d, a, n, [zero](C x) { return x > zero ? x : zero; });
    case Opcode::kSoftplus:
      return unary(d, a, n, [zero](C x) { return log1p(exp(-abs(x))) + (x > zero ? x : zero); });
    case Opcode::kGelu:  // tanh approximation, jax.nn.gelu's default
      return unary(d, a, n, [](C x) {
        const C k = C(0.7978845608028654), c3 = C(0.044715);
        return C(0.5) * x * (C(1) + tanh(k * (x + c3 * x * x * x)));
      });
    case Opcode::kReciprocal: return unary(d, a, n, [one](C x) { return one / x; });
    case Opcode::kNot: return unary(d, a, n, [zero, one](C x) { return x == zero ? one : zero; });
    case Opcode::kSin: return unary(d, a, n, [](C x) { return sin(x); });
    case Opcode::kCos: return unary(d, a, n, [](C x) { return cos(x); });
    case Opcode::kAdd: return binary(d, a, b, n, [](C x, C y) { return x + y; });
    case Opcode::kSub: return binary(d, a, b, n, [](C x, C y) { return x - y; });
    case Opcode::kMul: return binary(d, a, b, n, [](C x, C y) { return x * y; });
    case Opcode::kDiv: return binary(d, a, b, n, [](C x, C y) { return x / y; });
    // NaN propagates, as in jnp.maximum / jnp.minimum
    case Opcode::kMax:
      return binary(d, a, b, n, [](C x, C y) { return (x != x || x > y) ? x : y; });
    case Opcode::kMin:
      return binary(d, a, b, n, [](C x, C y) { return (x != x || x < y) ? x : y; });
    case Opcode::kPow:
      return binary(d, a, b, n, [](C x, C y) { return y == C(2) ? x * x : pow(x, y); });
    case Opcode::kLt: return binary(d, a, b, n, [](C x, C y) { return C(x < y); });
    case Opcode::kLe: return binary(d, a, b, n, [](C x, C y) { return C(x <= y); });
    case Opcode::kGt: return binary(d, a, b, n, [](C x, C y) { return C(x > y); });
    case Opcode::kGe: return binary(d, a, b, n, [](C x, C y) { return C(x >= y); });
    case Opcode::kEq: return binary(d, a, b, n, [](C x, C y) { return C(x == y); });
    case Opcode::kNe: return binary(d, a, b, n, [](C x, C y) { return C(x != y); });
    case Opcode::kAnd:
      return binary(d, a, b, n, [](C x, C y) { return C(x != C(0) && y != C(0)); });
    case Opcode::kOr: return binary(d, a, b, n, [](C x, C y) { return C(x != C(0) || y != C(0)); });
    case Opcode::kSelect:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] != C(0) ? b[i] : c[i];
      return;
  }
}

}  // namespace

std::vector<std::pair<std::string, int>> opcode_table() {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& [name, op] : kOpcodes) out.emplace_back(name, static_cast<int>(op));
  return out;
}

Opcode opcode_from_name(const std::string& name) {
  for (const auto& [n, op] : kOpcodes) {
    if (name == n) return op;
  }
  throw ValueError("unknown elementwise instruction '" + name + "'");
}

Program Program::build(const ProgramCode& code, size_t n_inputs, size_t n_scalars) {
  auto bad = [](const std::string& why) {
    return ValueError("malformed elementwise program: " + why);
  };
  const size_t n_instr = code.op.size();
  if (code.dst.size() != n_instr || code.a.size() != n_instr || code.b.size() != n_instr ||
      code.c.size() != n_instr) {
    throw bad("the instruction fields op, dst, a, b, c differ in length");
  }
  if (code.out_regs.empty()) throw bad("no output register");
  const int64_t fixed = static_cast<int64_t>(n_inputs + n_scalars);
  if (code.n_regs < fixed || code.n_regs > 4096) throw bad("register count");
  auto reg_ok = [&](int64_t r) { return r >= 0 && r < code.n_regs; };
  for (int64_t r : code.out_regs) {
    if (!reg_ok(r)) throw bad("output register");
  }
  Program prog;
  prog.n_regs = static_cast<int32_t>(code.n_regs);
  prog.out_dtype = code.out_dtype;
  prog.reduction = reduction_from_code(code.reduction, "malformed elementwise program", true);
  prog.out_reg = static_cast<int32_t>(code.out_regs[0]);
  const int64_t max_op = static_cast<int64_t>(Opcode::kSelect);
  for (size_t i = 0; i < n_instr; ++i) {
    if (code.op[i] < 0 || code.op[i] > max_op) {
      throw bad("unknown opcode " + std::to_string(code.op[i]));
    }
    if (!reg_ok(code.dst[i]) || code.dst[i] < fixed || !reg_ok(code.a[i]) || !reg_ok(code.b[i]) ||
        !reg_ok(code.c[i])) {
      throw bad("register out of range in instruction " + std::to_string(i));
    }
    prog.code.push_back(Instr{static_cast<Opcode>(code.op[i]), static_cast<int32_t>(code.dst[i]),
                              static_cast<int32_t>(code.a[i]), static_cast<int32_t>(code.b[i]),
                              static_cast<int32_t>(code.c[i])});
  }
  for (size_t i = 1; i < code.out_regs.size(); ++i) {
    prog.more_out_regs.push_back(static_cast<int32_t>(code.out_regs[i]));
  }
  if (!prog.more_out_regs.empty() && prog.reduction != Reduction::kNone) {
    throw bad("a program with several outputs cannot end in a reduction");
  }
  return prog;
}

ProgramRunner::ProgramRunner(const Program& program, std::vector<DType> input_dtypes,
                             std::vector<double> scalars)
    : program_(program), input_dtypes_(std::move(input_dtypes)), scalars_(std::move(scalars)) {
  wide_ = is_wide(program.out_dtype) ||
          std::any_of(input_dtypes_.begin(), input_dtypes_.end(), is_wide);
  const size_t n = static_cast<size_t>(program.n_regs) * kChunk;
  if (wide_)
    dregs_.resize(n);
  else
    fregs_.resize(n);
  const size_t first_scalar = input_dtypes_.size();
  for (size_t s = 0; s < scalars_.size(); ++s) {
    for (int64_t i = 0; i < kChunk; ++i) {
      if (wide_)
        dregs_[(first_scalar + s) * kChunk + i] = scalars_[s];
      else
        fregs_[(first_scalar + s) * kChunk + i] = static_cast<float>(scalars_[s]);
    }
  }
  acc_ = program.reduction == Reduction::kNone ? 0.0 : reduction_rule(program.reduction).identity;
}

namespace {

// `acc` folded with the chunk's values in eight lanes (they vectorise; in
// double, float32 sums match a pairwise float32 reduction to the last digit).
template <size_t R, class C>
double fold_chunk(const C* values, int64_t n, double acc) {
  constexpr const ReductionRule& rule = kReductions[R];
  double part[8];
  for (double& p : part) p = rule.identity;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] = rule.fold(part[j], static_cast<double>(values[i + j]));
  for (; i < n; ++i) part[0] = rule.fold(part[0], static_cast<double>(values[i]));
  const double left = rule.fold(rule.fold(part[0], part[1]), rule.fold(part[2], part[3]));
  const double right = rule.fold(rule.fold(part[4], part[5]), rule.fold(part[6], part[7]));
  return rule.fold(acc, rule.fold(left, right));
}

}  // namespace

template <class C>
void ProgramRunner::run_typed(const std::vector<const void*>& inputs,
                              const std::vector<void*>& outs, int64_t count) {
  C* regs = wide_ ? reinterpret_cast<C*>(dregs_.data()) : reinterpret_cast<C*>(fregs_.data());
  const size_t out_size = itemsize(program_.out_dtype);
  for (int64_t start = 0; start < count; start += kChunk) {
    const int64_t n = std::min(kChunk, count - start);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto* src =
          static_cast<const unsigned char*>(inputs[i]) + start * itemsize(input_dtypes_[i]);
      load<C>(input_dtypes_[i], src, regs + i * kChunk, n);
    }
    for (const Instr& in : program_.code) execute<C>(in, regs, n);
    const C* result = regs + program_.out_reg * kChunk;
    if (program_.reduction != Reduction::kNone) {
      with_reduction(program_.reduction,
                     [&](auto r) { acc_ = fold_chunk<decltype(r)::value>(result, n, acc_); });
      continue;
    }
    store<C>(program_.out_dtype, result, static_cast<unsigned char*>(outs[0]) + start * out_size,
             n);
    for (size_t o = 0; o < program_.more_out_regs.size(); ++o) {
      store<C>(program_.out_dtype, regs + program_.more_out_regs[o] * kChunk,
               static_cast<unsigned char*>(outs[o + 1]) + start * out_size, n);
    }
  }
  any_ = true;
}

void ProgramRunner::run(const std::vector<const void*>& inputs, const std::vector<void*>& outs,
                        int64_t count) {
  if (outs.size() != program_.n_outputs()) {
    throw ValueError("elementwise program: " + std::to_string(outs.size()) +
                     " output buffers for " + std::to_string(program_.n_outputs()) + " outputs");
  }
  if (wide_)
    run_typed<double>(inputs, outs, count);
  else
    run_typed<float>(inputs, outs, count);
}

void ProgramRunner::run(const std::vector<const void*>& inputs, void* out, int64_t count) {
  if (program_.n_outputs() > 1)
    throw ValueError("elementwise program: one output buffer for several outputs");
  std::vector<void*> outs;
  if (program_.reduction == Reduction::kNone) outs.push_back(out);
  if (wide_)
    run_typed<double>(inputs, outs, count);
  else
    run_typed<float>(inputs, outs, count);
}

}  // namespace jask
