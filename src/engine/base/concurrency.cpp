#include "base/concurrency.hpp"

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

}  // namespace jask
