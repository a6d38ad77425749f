#include "formats/registry.hpp"

#include <array>

#include "base/errors.hpp"
#include "formats/npy.hpp"
#include "formats/raw.hpp"

namespace jask {
namespace {

// The registration lines, one per format, in detection order.
constexpr std::array kFormats = {
    &npy_format,
    &raw_format,
};

}  // namespace

const Format& format_named(std::string_view name) {
  for (auto format : kFormats) {
    if (format().name() == name) return format();
  }
  std::string known;
  for (const std::string& n : format_names()) known += (known.empty() ? "'" : ", '") + n + "'";
  throw ValueError("unknown storage format '" + std::string(name) + "': expected one of " + known);
}

const Format* detect_format(std::string_view leading, std::string_view path) {
  for (auto format : kFormats) {
    if (format().detect(leading, path)) return &format();
  }
  return nullptr;
}

std::vector<std::string> format_names() {
  std::vector<std::string> names;
  for (auto format : kFormats) names.emplace_back(format().name());
  return names;
}

}  // namespace jask
