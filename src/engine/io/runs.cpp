#include "io/runs.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "base/errors.hpp"

namespace jask {
namespace {

// The runs in file order, each run that continues the one before it both in
// the file and in memory merged into it.
template <class Run>
std::vector<Run> coalesced(std::span<const Run> runs) {
  std::vector<Run> sorted;
  sorted.reserve(runs.size());
  for (const Run& r : runs)
    if (r.bytes > 0) sorted.push_back(r);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Run& a, const Run& b) { return a.offset < b.offset; });
  std::vector<Run> out;
  for (const Run& r : sorted) {
    if (!out.empty()) {
      Run& last = out.back();
      const bool follows_in_file = last.offset + last.bytes == r.offset;
      if constexpr (requires { r.dst; }) {
        if (follows_in_file && last.dst + last.bytes == r.dst) {
          last.bytes += r.bytes;
          continue;
        }
      } else {
        if (follows_in_file && last.src + last.bytes == r.src) {
          last.bytes += r.bytes;
          continue;
        }
      }
    }
    out.push_back(r);
  }
  return out;
}

// Runs io(request) for every request on up to `in_flight` threads (the
// calling thread is one of them), each taking the next request not yet
// taken. After an error no new request starts; the first error is rethrown
// once every thread has ended.
template <class Run, class Io>
void run_all(const std::vector<Run>& requests, int in_flight, Io io) {
  const size_t n = requests.size();
  if (n == 0) return;
  const size_t threads = std::clamp<size_t>(static_cast<size_t>(std::max(in_flight, 1)), 1, n);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mu;
  auto work = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next++;
      if (i >= n) return;
      try {
        io(requests[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // out of threads: the ones running (and this one) share the requests
    }
  }
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

void read_runs(const File& file, std::span<const ReadRun> runs, const IoPolicy& io, int in_flight) {
  run_all(coalesced(runs), in_flight,
          [&](const ReadRun& r) { file.read_at(r.dst, r.bytes, r.offset, io); });
}

void write_runs(const File& file, std::span<const WriteRun> runs, const IoPolicy& io,
                int in_flight) {
  const std::vector<WriteRun> requests = coalesced(runs);
  for (size_t i = 1; i < requests.size(); ++i) {
    const WriteRun &a = requests[i - 1], &b = requests[i];
    if (a.offset + a.bytes > b.offset) {
      throw ValueError("write_runs(" + file.path() + "): the runs of " + std::to_string(a.bytes) +
                       " bytes at " + std::to_string(a.offset) + " and of " +
                       std::to_string(b.bytes) + " bytes at " + std::to_string(b.offset) +
                       " overlap; the order of their writes would decide the bytes");
    }
  }
  run_all(requests, in_flight,
          [&](const WriteRun& r) { file.write_at(r.src, r.bytes, r.offset, io); });
}

}  // namespace jask
