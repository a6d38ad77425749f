#include "base/errors.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace jask {

std::string errno_message(const std::string& what, const std::string& path, int err) {
  return what + "(" + path + "): " + std::strerror(err);
}

void crash_if(std::string_view point) {
  const char* at = std::getenv("JASK_TEST_CRASH_AT");
  if (at != nullptr && point == at) ::kill(::getpid(), SIGKILL);
}

}  // namespace jask
