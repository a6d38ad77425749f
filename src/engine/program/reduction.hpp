// The reductions: each one's identity and fold, written once. A full
// reduction at the end of an elementwise program (ProgramRunner) and a
// reduction over axes (AxisReducer) both fold through this table, in double.
// A new reduction is one enum value and one row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "base/errors.hpp"

namespace jask {

enum class Reduction : int32_t { kNone = 0, kSum = 1, kMax = 2, kMin = 3, kProd = 4 };

struct ReductionRule {
  Reduction kind;
  const char* name;
  double identity;
  // Associative (up to rounding): blocks and lanes are folded in any grouping.
  double (*fold)(double acc, double v);
};

// NaN wins in max and min, as in jnp.max / jnp.min.
inline constexpr ReductionRule kReductions[] = {
    {Reduction::kSum, "sum", 0.0, [](double acc, double v) { return acc + v; }},
    {Reduction::kMax, "max", -std::numeric_limits<double>::infinity(),
     [](double acc, double v) { return acc != acc            ? acc
                                       : (v != v || v > acc) ? v
                                                             : acc; }},
    {Reduction::kMin, "min", std::numeric_limits<double>::infinity(),
     [](double acc, double v) { return acc != acc            ? acc
                                       : (v != v || v < acc) ? v
                                                             : acc; }},
    {Reduction::kProd, "prod", 1.0, [](double acc, double v) { return acc * v; }},
};

// The reduction with code `code` (kNone only if `allow_none`); ValueError naming `what`.
inline Reduction reduction_from_code(int64_t code, const std::string& what, bool allow_none) {
  if (allow_none && code == static_cast<int64_t>(Reduction::kNone)) return Reduction::kNone;
  for (const ReductionRule& r : kReductions) {
    if (code == static_cast<int64_t>(r.kind)) return r.kind;
  }
  throw ValueError(what + ": unknown reduction " + std::to_string(code));
}

inline const ReductionRule& reduction_rule(Reduction kind) {
  for (const ReductionRule& r : kReductions) {
    if (r.kind == kind) return r;
  }
  throw ValueError("no rule for reduction " + std::to_string(static_cast<int>(kind)));
}

// Calls f(rule) with the rule of `kind` as a compile-time constant (an
// integral_constant indexing kReductions), so that the fold inlines into a
// hot loop: `with_reduction(kind, [&](auto i) { constexpr auto& r = kReductions[i]; ... })`.
template <class F>
void with_reduction(Reduction kind, F&& f) {
  const bool found = [&]<size_t... I>(std::index_sequence<I...>) {
    return (
        (kind == kReductions[I].kind ? (f(std::integral_constant<size_t, I>{}), true) : false) ||
        ...);
  }
  (std::make_index_sequence<std::size(kReductions)>{});
  if (!found) throw ValueError("unknown reduction " + std::to_string(static_cast<int>(kind)));
}

}  // namespace jask
