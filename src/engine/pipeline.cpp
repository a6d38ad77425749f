#include "pipeline.hpp"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "planner.hpp"

namespace jask {
namespace {

std::atomic<uint64_t> g_tasks_run{0};

class PipelineState {
 public:
  // Blocks until pred() or an error; returns false on error.
  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return error_ != nullptr || pred(); });
    return error_ == nullptr;
  }
  void advance(int64_t& counter) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counter;
    }
    cv_.notify_all();
  }
  void fail(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = e;
    }
    cv_.notify_all();
  }
  std::exception_ptr error() const { return error_; }

  int64_t read = 0, computed = 0, written = 0;  // tasks finished per stage

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::exception_ptr error_;
};

template <class Body>
void guarded(PipelineState& st, Body body) {
  try {
    body();
  } catch (...) {
    st.fail(std::current_exception());
  }
}

}  // namespace

uint64_t pipeline_tasks_run() { return g_tasks_run.load(); }

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

void run_pipeline(int64_t n_tasks, const PipelineStages& stages) {
  if (n_tasks <= 0) return;
  g_tasks_run += static_cast<uint64_t>(n_tasks);
  if (n_tasks == 1) {  // nothing to overlap
    stages.read(0);
    stages.compute(0);
    if (stages.write) stages.write(0);
    return;
  }
  const int64_t lag = kPipelineSlots;
  PipelineState st;
  std::thread reader([&] {
    guarded(st, [&] {
      for (int64_t t = 0; t < n_tasks; ++t) {
        if (!st.wait([&] { return st.computed >= t - lag + 1; })) return;
        stages.read(t);
        st.advance(st.read);
      }
    });
  });
  std::thread writer;
  if (stages.write) {
    writer = std::thread([&] {
      guarded(st, [&] {
        for (int64_t t = 0; t < n_tasks; ++t) {
          if (!st.wait([&] { return st.computed > t; })) return;
          stages.write(t);
          st.advance(st.written);
        }
      });
    });
  }
  guarded(st, [&] {
    for (int64_t t = 0; t < n_tasks; ++t) {
      bool ok = st.wait([&] {
        return st.read > t && (!stages.write || st.written >= t - lag + 1);
      });
      if (!ok) return;
      stages.compute(t);
      st.advance(st.computed);
    }
  });
  reader.join();
  if (writer.joinable()) writer.join();
  if (st.error()) std::rethrow_exception(st.error());
}

}  // namespace jask
