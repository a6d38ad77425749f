// The storage formats by name: one registration line per format in
// registry.cpp. Opening a file names its format, or lets the registry
// detect it from the file's leading bytes and name.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "formats/format.hpp"

namespace jask {

// The format called `name`; a ValueError naming the known ones otherwise.
const Format& format_named(std::string_view name);

// The first format, in registration order, that recognises a file starting
// with `leading` (up to kDetectBytes) at `path`; nullptr if none does.
const Format* detect_format(std::string_view leading, std::string_view path);

// Every registered format's name, in registration order.
std::vector<std::string> format_names();

}  // namespace jask
