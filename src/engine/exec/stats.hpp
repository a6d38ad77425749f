// What a user sees of the engine while it runs: per-op totals (jask.stats()),
// the running call's progress (jask's progress bars) and, while enabled, every
// block's stage events (jask.stats(timeline=True)).
//
// Cost: engine calls take turns (base/memory_budget.hpp's BudgetTurn), so a
// call's bytes, blocks and stage times are differences of process-wide atomic
// counters taken when it starts and ends, merged into the per-op table under a
// mutex once per call. Per block the pipeline adds one relaxed atomic per
// stage; the timeline takes a mutex per event, and only while enabled.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace jask {

enum class Stage { kRead = 0, kCompute = 1, kWrite = 2 };
const char* stage_name(Stage stage);

// Totals of one op over its calls.
struct OpTotals {
  uint64_t calls = 0, blocks = 0, bytes_read = 0, bytes_written = 0;
  int64_t read_ns = 0, compute_ns = 0, write_ns = 0, wall_ns = 0;
};

// Records the engine call it spans as one call of `op`, into op_totals(). Made
// while holding the BudgetTurn. A scope inside another on the same thread (a
// call made inside a call) records nothing: its work counts to the outer op.
class CallStats {
 public:
  // `program`: the jitted program making the call (0: an eager call); `run`:
  // which run of it (XLA's run id), so a program run's calls count as one.
  explicit CallStats(const std::string& op, int32_t program = 0, int64_t run = 0);
  ~CallStats();
  CallStats(const CallStats&) = delete;
  CallStats& operator=(const CallStats&) = delete;

 private:
  bool outer_;
  int uncaught_;  // std::uncaught_exceptions() at the start: more at the end means it failed
};

// Every op's totals since the process started or reset_op_totals().
std::map<std::string, OpTotals> op_totals();
void reset_op_totals();

// Nanoseconds of the clock that stage events and calls are timed with.
int64_t stats_clock_ns();

// The pipeline's hooks: a pipeline of `n` blocks starts; stage `s` of one
// block ran from start_ns to end_ns. `mark` is stage_mark(s) taken when the
// stage started: the bytes moved so far in its direction while the timeline
// records, kNoMark otherwise.
inline constexpr uint64_t kNoMark = ~uint64_t{0};
void note_blocks_planned(int64_t n);
uint64_t stage_mark(Stage s);
void note_stage(Stage s, int64_t start_ns, int64_t end_ns, uint64_t mark);

// The running engine call, as a progress bar shows it.
struct CallProgress {
  uint64_t seq = 0;  // 1 for the process's first call, then one more per call
  std::string op;
  int64_t start_ns = 0, end_ns = 0;  // end_ns 0 while it runs
  uint64_t blocks_read = 0;          // blocks read (the pipeline reads ahead)
  uint64_t blocks_done = 0;          // blocks computed
  uint64_t blocks_planned = 0;       // blocks of its pipelines started so far
  uint64_t bytes = 0;                // read and written so far
  int32_t program = 0;               // the jitted program making it (0: eager)
  bool failed = false;               // it ended by an exception (its bar is not done)
};
// Waits (at most timeout_s) until a call runs; the running call, if one does.
std::optional<CallProgress> wait_for_call(double timeout_s);
// Makes every wait_for_call, now and later, return at once (a process
// ending stops its progress thread with it).
void release_call_waiters();
// The threads in wait_for_call now (for tests).
int call_waiters();
// The calls that ended after call `after`, oldest first; only the last
// kFinishedKept are kept.
inline constexpr size_t kFinishedKept = 64;
std::vector<CallProgress> finished_calls(uint64_t after);
// The seq of the last call started.
uint64_t last_call_seq();

// One run of a jitted program, as its one progress bar shows it: its engine
// calls, from the first one's start. A run is over when as many calls as the
// program's last run made (or, before any run, the calls XLA compiled:
// note_program_calls) have ended, when a call of another run or an eager call
// starts, or at end_program_run().
struct ProgramRunProgress {
  uint64_t seq = 0;  // 1 for the process's first program run, then one more per run
  int32_t program = 0;
  std::string op;                    // its latest call's op
  int64_t start_ns = 0, end_ns = 0;  // end_ns 0 while it runs
  int64_t last_call_end_ns = 0;      // when its latest call ended (0: none has)
  uint64_t calls_done = 0;           // its calls that ended
  bool call_running = false;         // one of its calls runs now
  uint64_t bytes = 0;                // read and written so far (the running call's too)
  // What the program's last complete run did: 0 where not known.
  uint64_t expected_calls = 0, expected_bytes = 0;
  int64_t expected_ns = 0;
  // One of its calls failed: the run ended there (XLA runs no more of it), and
  // its figures are not what the program's next run is expected to do.
  bool failed = false;
};
// The program run under way (a call of it may be running or not).
std::optional<ProgramRunProgress> program_run();
// The program runs that ended after run `after`, oldest first (the last kFinishedKept).
std::vector<ProgramRunProgress> finished_program_runs(uint64_t after);
// Ends program run `seq` if it is under way and none of its calls runs (the
// caller saw it idle); whether it did.
bool end_program_run(uint64_t seq);
// XLA compiled program `slot` with `calls` engine calls, none inside a loop or
// a branch: what its first run is expected to make.
void note_program_calls(int32_t slot, uint64_t calls);

// The most bytes of block buffers alive at once (io/file.hpp's buffers) since
// reset_blocks_peak(), and within each open peak scope: `with jask.stats()`
// opens one, so its peak is the peak inside the block, nested blocks each
// their own. Opening a scope folds io/file.hpp's peak into every open window
// and starts it again from the buffers alive now.
int64_t blocks_peak();
void reset_blocks_peak();
uint64_t open_peak_scope();
// The scope's peak so far; close_peak_scope() forgets it.
int64_t peak_scope_bytes(uint64_t scope);
void close_peak_scope(uint64_t scope);

// One stage of one block, as the timeline records it.
struct StageEvent {
  Stage stage;
  std::string op;
  int64_t start_ns, end_ns;
  uint64_t bytes;  // read by a read stage, written by a write stage; 0 for compute
};
// The timeline keeps at most this many events (later ones are counted, not kept).
inline constexpr size_t kTimelineLimit = 100000;
// Starts (from nothing) or stops recording stage events.
void set_timeline(bool enabled);
// The events recorded since set_timeline(true), and how many were dropped
// past kTimelineLimit.
std::vector<StageEvent> timeline_events();
uint64_t timeline_dropped();

}  // namespace jask
