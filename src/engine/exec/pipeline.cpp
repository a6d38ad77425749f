#include "exec/pipeline.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/stats.hpp"
#include "plan/planner.hpp"

namespace jask {
namespace {

std::atomic<uint64_t> g_tasks_run{0};

// Stage time in nanoseconds, summed over all pipelines.
std::atomic<int64_t> g_read_ns{0}, g_compute_ns{0}, g_write_ns{0}, g_span_ns{0};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Runs stage(t), adds its duration to `total` and reports it to exec/stats.hpp.
void timed(const std::function<void(int64_t)>& stage, int64_t t, std::atomic<int64_t>& total,
           Stage kind) {
  const uint64_t mark = stage_mark(kind);
  const int64_t start = now_ns();
  stage(t);
  const int64_t end = now_ns();
  total += end - start;
  note_stage(kind, start, end, mark);
}

// Adds the time from construction to destruction to the span total.
struct SpanTimer {
  int64_t start = now_ns();
  ~SpanTimer() { g_span_ns += now_ns() - start; }
};

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

StageSeconds pipeline_stage_seconds() {
  return StageSeconds{g_read_ns.load() * 1e-9, g_compute_ns.load() * 1e-9, g_write_ns.load() * 1e-9,
                      g_span_ns.load() * 1e-9};
}

void run_pipeline(int64_t n_tasks, const PipelineStages& stages) {
  if (n_tasks <= 0) return;
  g_tasks_run += static_cast<uint64_t>(n_tasks);
  note_blocks_planned(n_tasks);
  SpanTimer span;
  if (n_tasks == 1) {  // nothing to overlap
    timed(stages.read, 0, g_read_ns, Stage::kRead);
    timed(stages.compute, 0, g_compute_ns, Stage::kCompute);
    if (stages.write) timed(stages.write, 0, g_write_ns, Stage::kWrite);
    return;
  }
  const int64_t lag = kPipelineSlots;
  PipelineState st;
  std::thread reader([&] {
    guarded(st, [&] {
      for (int64_t t = 0; t < n_tasks; ++t) {
        if (!st.wait([&] { return st.computed >= t - lag + 1; })) return;
        timed(stages.read, t, g_read_ns, Stage::kRead);
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
          timed(stages.write, t, g_write_ns, Stage::kWrite);
          st.advance(st.written);
        }
      });
    });
  }
  guarded(st, [&] {
    for (int64_t t = 0; t < n_tasks; ++t) {
      bool ok =
          st.wait([&] { return st.read > t && (!stages.write || st.written >= t - lag + 1); });
      if (!ok) return;
      timed(stages.compute, t, g_compute_ns, Stage::kCompute);
      st.advance(st.computed);
    }
  });
  reader.join();
  if (writer.joinable()) writer.join();
  if (st.error()) std::rethrow_exception(st.error());
}

}  // namespace jask
