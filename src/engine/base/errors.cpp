#include "base/errors.hpp"

#include <cstring>

namespace jask {

std::string errno_message(const std::string& what, const std::string& path, int err) {
  return what + "(" + path + "): " + std::strerror(err);
}

}  // namespace jask
