#include "base/concurrency.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace jask {

void run_concurrently(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  if (n == 1) return fn(0);
  std::exception_ptr error;
  std::mutex mu;
  auto guarded_call = [&](size_t i) {
    try {
      fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) threads.emplace_back(guarded_call, i);
  guarded_call(n - 1);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

namespace {
// Below this a copy stays on the calling thread: starting a thread costs tens
// of microseconds, a copy of this much about half a millisecond.
constexpr size_t kBytesPerCopyThread = 4 << 20;
}  // namespace

void copy_on_all_cores(void* dst, const void* src, size_t n) {
  if (n == 0) return;  // dst and src may be null then, which memcpy does not allow
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t parts = std::clamp<size_t>(n / kBytesPerCopyThread, 1, cores);
  // Cuts at multiples of 64 bytes, so no two threads write one cache line.
  const size_t step = (n / parts + 63) & ~size_t{63};
  run_concurrently(parts, [&](size_t k) {
    const size_t begin = std::min(n, k * step),
                 end = k + 1 == parts ? n : std::min(n, begin + step);
    std::memcpy(static_cast<std::byte*>(dst) + begin, static_cast<const std::byte*>(src) + begin,
                end - begin);
  });
}

}  // namespace jask
