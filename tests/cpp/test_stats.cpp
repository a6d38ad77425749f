// exec/stats.hpp: a call's bytes, blocks and stage times are exact differences
// of the process counters, nested scopes count to the outer op, the timeline
// records each block's stages only while enabled, and the counters stay right
// while other threads read them (run under TSAN: Makefile's TSAN_TESTS).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/memory_budget.hpp"
#include "exec/pipeline.hpp"
#include "exec/stats.hpp"
#include "io/file.hpp"
#include "storage/io_config.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

// Runs a pipeline of `n` blocks whose read stage reads and write stage writes `bytes` each
// (into and from buffers of their own: a read may overlap the write two blocks back).
void run_io_pipeline(const File& file, int64_t n, size_t bytes) {
  std::vector<std::byte> in(bytes), out(bytes);
  auto at = [bytes](int64_t t) { return static_cast<uint64_t>(t) * bytes; };
  PipelineStages stages{[&](int64_t t) { file.read_at(in.data(), bytes, at(t), io_policy()); },
                        [](int64_t) {},
                        [&](int64_t t) { file.write_at(out.data(), bytes, at(t), io_policy()); }};
  run_pipeline(n, stages);
}

OpTotals totals_of(const std::string& op) {
  auto all = op_totals();
  auto it = all.find(op);
  return it == all.end() ? OpTotals{} : it->second;
}

class Stats : public ::testing::Test {
 protected:
  void SetUp() override {
    File f(path_, OpenMode::kCreateTruncate);
    f.resize(kBlocks * kBytes);
  }

  static constexpr int64_t kBlocks = 7;
  static constexpr size_t kBytes = 1000;  // not aligned: edges go buffered
  test::TempDir dir_;
  std::string path_ = dir_.file("stats.bin");
};

TEST_F(Stats, CallsRecordExactBytesAndBlocks) {
  File f(path_, OpenMode::kReadWrite);
  const OpTotals before = totals_of("stats_test_io");
  {
    CallStats call("stats_test_io");
    run_io_pipeline(f, kBlocks, kBytes);
    // A call inside a call counts to the outer one.
    CallStats inner("stats_test_inner");
    run_io_pipeline(f, 2, kBytes);
  }
  const OpTotals after = totals_of("stats_test_io");
  EXPECT_EQ(after.calls - before.calls, 1u);
  EXPECT_EQ(after.blocks - before.blocks, static_cast<uint64_t>(kBlocks + 2));
  EXPECT_EQ(after.bytes_read - before.bytes_read, (kBlocks + 2) * kBytes);
  EXPECT_EQ(after.bytes_written - before.bytes_written, (kBlocks + 2) * kBytes);
  EXPECT_GT(after.wall_ns, before.wall_ns);
  EXPECT_GE(after.wall_ns - before.wall_ns, 0);
  EXPECT_EQ(totals_of("stats_test_inner").calls, 0u);
}

TEST_F(Stats, HeaderBytesAreLeftOut) {
  File f(path_, OpenMode::kReadWrite);
  std::vector<std::byte> buf(64);
  const OpTotals before = totals_of("stats_test_header");
  {
    CallStats call("stats_test_header");
    f.write_at(buf.data(), buf.size(), 0, header_io_policy());
    f.read_at(buf.data(), buf.size(), 0, header_io_policy());
    f.read_at(buf.data(), 10, 0, io_policy());
  }
  const OpTotals after = totals_of("stats_test_header");
  EXPECT_EQ(after.bytes_read - before.bytes_read, 10u);
  EXPECT_EQ(after.bytes_written - before.bytes_written, 0u);
}

TEST_F(Stats, TimelineRecordsEveryStageWhileEnabled) {
  File f(path_, OpenMode::kReadWrite);
  set_timeline(true);
  {
    CallStats call("stats_test_timeline");
    run_io_pipeline(f, kBlocks, kBytes);
  }
  set_timeline(false);
  const std::vector<StageEvent> events = timeline_events();
  int counts[3] = {0, 0, 0};
  uint64_t read = 0, written = 0;
  for (const StageEvent& e : events) {
    EXPECT_EQ(e.op, "stats_test_timeline");
    EXPECT_LE(e.start_ns, e.end_ns);
    ++counts[static_cast<int>(e.stage)];
    if (e.stage == Stage::kRead) read += e.bytes;
    if (e.stage == Stage::kWrite) written += e.bytes;
  }
  EXPECT_EQ(counts[0], kBlocks);
  EXPECT_EQ(counts[1], kBlocks);
  EXPECT_EQ(counts[2], kBlocks);
  EXPECT_EQ(read, kBlocks * kBytes);
  EXPECT_EQ(written, kBlocks * kBytes);
  EXPECT_EQ(timeline_dropped(), 0u);
  {
    CallStats call("stats_test_timeline");
    run_io_pipeline(f, 2, kBytes);
  }
  EXPECT_EQ(timeline_events().size(), events.size());  // off: nothing more recorded
}

TEST_F(Stats, ProgressIsReadWhileCallsRun) {
  File f(path_, OpenMode::kReadWrite);
  const uint64_t first = last_call_seq();
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (auto running = wait_for_call(0.01)) {
        EXPECT_LE(running->blocks_done, running->blocks_read);
        EXPECT_LE(running->blocks_read, running->blocks_planned);
        EXPECT_GT(running->seq, first);
      }
    }
  });
  for (int i = 0; i < 5; ++i) {
    CallStats call("stats_test_progress");
    run_io_pipeline(f, kBlocks, kBytes);
  }
  done = true;
  watcher.join();
  const std::vector<CallProgress> ended = finished_calls(first);
  ASSERT_EQ(ended.size(), 5u);
  for (const CallProgress& c : ended) {
    EXPECT_EQ(c.op, "stats_test_progress");
    EXPECT_EQ(c.blocks_read, static_cast<uint64_t>(kBlocks));
    EXPECT_EQ(c.blocks_done, static_cast<uint64_t>(kBlocks));
    EXPECT_EQ(c.blocks_planned, static_cast<uint64_t>(kBlocks));
    EXPECT_EQ(c.bytes, 2 * kBlocks * kBytes);
    EXPECT_GE(c.end_ns, c.start_ns);
  }
}

// fork() copies a waiting thread's wait but not the thread: the child's calls
// wake its own waiter every time and never wait for the parent's (before the
// engine's fork handlers, glibc's condition variable blocked a child's call
// for good). Before ReleasedWaitersReturnAtOnce: waits must still wait.
TEST_F(Stats, AForkedChildsCallsNeverWaitForItsParentsWaiter) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer ends a child of a multi-threaded fork that starts a thread
  // (die_after_fork), and this test needs both; the other builds run it.
  GTEST_SKIP() << "ThreadSanitizer does not support threads in a multi-threaded fork's child";
#endif
  std::atomic<bool> stop{false};
  std::thread parent_waiter([&] {
    while (!stop) wait_for_call(0.2);
  });
  while (call_waiters() < 1) std::this_thread::yield();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<bool> done{false};
    std::thread waiter([&] {
      while (!done) wait_for_call(0.2);
    });
    for (int i = 0; i < 20; ++i) {
      usleep(20000);
      while (call_waiters() < 1) std::this_thread::yield();  // the child's own waiter waits
      CallStats call("stats_test_fork");
    }
    done = true;
    waiter.join();
    _exit(0);
  }
  stop = true;
  parent_waiter.join();
  int status = 0;
  pid_t ended = 0;
  for (int i = 0; i < 6000 && ended == 0; ++i) {  // 60 s
    ended = waitpid(pid, &status, WNOHANG);
    if (ended == 0) usleep(10000);
  }
  if (ended == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the forked child's calls hung";
  }
  ASSERT_EQ(ended, pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(Stats, ReleasedWaitersReturnAtOnce) {
  // Released for good: later tests' waits use short timeouts only.
  std::thread waiter([] { EXPECT_FALSE(wait_for_call(60.0).has_value()); });
  release_call_waiters();
  waiter.join();
}

// A program run's calls count as one run: it ends at the count XLA compiled,
// the next run expects what this one did, and a call of another run or an
// eager call ends a run whose count is not known.
TEST_F(Stats, ProgramRunsGroupTheirCalls) {
  File f(path_, OpenMode::kReadWrite);
  const int32_t program = new_program_slot();
  const int32_t looping = new_program_slot();
  note_program_calls(program, 2);
  auto call = [&](int32_t slot, int64_t run) {
    CallStats stats("stats_test_run", slot, run);
    run_io_pipeline(f, 2, kBytes);
  };
  // Runs other tests in this process made (one may be under way: the first call ends it).
  uint64_t before = program_run().has_value() ? program_run()->seq : 0;
  for (const ProgramRunProgress& r : finished_program_runs(0)) before = std::max(before, r.seq);
  call(program, 11);
  ASSERT_TRUE(program_run().has_value());
  EXPECT_EQ(program_run()->calls_done, 1u);
  EXPECT_EQ(program_run()->expected_calls, 2u);
  call(program, 11);
  EXPECT_FALSE(program_run().has_value());  // its second call of two ended it
  call(program, 12);
  call(program, 12);
  call(looping, 13);
  call(looping, 13);
  call(looping, 13);
  ASSERT_TRUE(program_run().has_value());  // no count: it runs until something else does
  call(looping, 14);                       // another run of it
  EXPECT_FALSE(end_program_run(program_run()->seq + 1));
  EXPECT_TRUE(end_program_run(program_run()->seq));
  std::vector<ProgramRunProgress> runs = finished_program_runs(before);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].calls_done, 2u);
  EXPECT_EQ(runs[0].expected_bytes, 0u);
  EXPECT_EQ(runs[1].expected_bytes, runs[0].bytes);
  EXPECT_EQ(runs[1].bytes, runs[0].bytes);
  EXPECT_EQ(runs[0].bytes, 4u * 2 * kBytes);  // two calls of 2 blocks read and written
  EXPECT_EQ(runs[2].calls_done, 3u);
  EXPECT_EQ(runs[2].expected_calls, 0u);
  EXPECT_EQ(runs[3].expected_calls, 3u);
  EXPECT_EQ(runs[3].calls_done, 1u);
}

// A call that ends by an exception is marked failed (its progress bar is not
// shown done), and so is its program's run, which ends there: XLA runs no
// more of the program, and the failed run's figures are not what the next
// run of it is expected to do. A call inside a failing call that itself
// ends normally is not the failed one.
TEST_F(Stats, AFailedCallEndsItsProgramRunAndNeitherCountsAsDone) {
  File f(path_, OpenMode::kReadWrite);
  const int32_t program = new_program_slot();
  note_program_calls(program, 3);
  uint64_t before = program_run().has_value() ? program_run()->seq : 0;
  for (const ProgramRunProgress& r : finished_program_runs(0)) before = std::max(before, r.seq);
  const uint64_t calls_before = last_call_seq();
  auto call = [&](int64_t run, bool fail) {
    CallStats stats("stats_test_failed", program, run);
    run_io_pipeline(f, 2, kBytes);
    if (fail) throw std::runtime_error("stats_test_failed");
  };
  call(21, false);
  EXPECT_THROW(call(21, true), std::runtime_error);
  EXPECT_FALSE(program_run().has_value());  // ended at its failed call, one short of three
  call(22, false);
  call(22, false);
  call(22, false);  // its third call of three ends it
  try {
    throw std::runtime_error("already unwinding");
  } catch (const std::runtime_error&) {
    CallStats inside("stats_test_failed");  // made while handling an exception: not failed
  }
  const std::vector<CallProgress> calls = finished_calls(calls_before);
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_FALSE(calls[0].failed);
  EXPECT_TRUE(calls[1].failed);
  for (size_t i = 2; i < calls.size(); ++i) EXPECT_FALSE(calls[i].failed) << i;
  const std::vector<ProgramRunProgress> runs = finished_program_runs(before);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[0].failed);
  EXPECT_EQ(runs[0].calls_done, 2u);
  EXPECT_FALSE(runs[1].failed);
  EXPECT_EQ(runs[1].expected_calls, 3u);  // the compiled count: the failed run taught nothing
  EXPECT_EQ(runs[1].expected_bytes, 0u);
  EXPECT_EQ(runs[1].bytes, 3u * 2 * 2 * kBytes);
}

// Peak scopes: each sees the peak of the buffers while it is open, nested
// ones included; the peak since reset_blocks_peak() keeps every buffer.
TEST_F(Stats, PeakScopesSeeThePeakWhileOpen) {
  reset_blocks_peak();
  const int64_t base = buffer_bytes();
  { AlignedBuffer big(1 << 20); }
  const uint64_t outer = open_peak_scope();
  EXPECT_EQ(peak_scope_bytes(outer), base);
  { AlignedBuffer small(1 << 12); }
  const uint64_t inner = open_peak_scope();
  { AlignedBuffer smaller(1 << 12); }
  EXPECT_EQ(peak_scope_bytes(inner), base + (1 << 12));
  EXPECT_EQ(peak_scope_bytes(outer), base + (1 << 12));
  close_peak_scope(inner);
  EXPECT_EQ(peak_scope_bytes(inner), 0);
  close_peak_scope(outer);
  EXPECT_EQ(blocks_peak(), base + (1 << 20));
  reset_blocks_peak();
  EXPECT_EQ(blocks_peak(), base);
}

}  // namespace
}  // namespace jask
