// Three-stage block pipeline: a reader thread prefetches task t+1 while the
// calling thread computes task t and a writer thread writes task t-1 behind.
// Stages of task t may use slot t % kPipelineSlots of their buffers.
#pragma once
#include <cstdint>
#include <functional>

#include "io/file.hpp"
#include "plan/planner.hpp"

namespace jask {

// Double-buffered blocks for one stream: task t uses slot t % kPipelineSlots.
struct StreamBuffers {
  explicit StreamBuffers(int64_t block_bytes) {
    for (auto& s : slot) s = AlignedBuffer(static_cast<size_t>(block_bytes));
  }
  std::byte* at(int64_t task) { return slot[task % kPipelineSlots].data(); }
  AlignedBuffer slot[kPipelineSlots];
};

struct PipelineStages {
  std::function<void(int64_t task)> read;
  std::function<void(int64_t task)> compute;
  std::function<void(int64_t task)> write;  // may be empty (reductions)
};

// Guarantees: read(t) starts after compute(t-2) ended; compute(t) starts
// after read(t) and write(t-2) ended; write(t) after compute(t). Exceptions
// from any stage stop the pipeline and are rethrown here.
void run_pipeline(int64_t n_tasks, const PipelineStages& stages);

// Tasks run by all pipelines so far: lets tests check how many blocks an op
// really streamed.
uint64_t pipeline_tasks_run();

// Seconds all pipelines so far spent in each stage, and in all (from the
// first read to the last write). A stage whose time is close to the span is
// what bounds an op; compute slower than usual while reads run means the
// reads take CPU from it.
struct StageSeconds {
  double read = 0, compute = 0, write = 0, span = 0;
};
StageSeconds pipeline_stage_seconds();

}  // namespace jask
