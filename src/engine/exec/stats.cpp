#include "exec/stats.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <new>

#include "io/file.hpp"
#include "storage/io_config.hpp"

namespace jask {
namespace {

// Summed over every pipeline; a call's share is the difference over its span.
std::atomic<int64_t> g_stage_ns[3];
std::atomic<uint64_t> g_blocks_read{0}, g_blocks_done{0}, g_blocks_planned{0};
std::atomic<bool> g_timeline{false};

// The process-wide counters a call's figures are differences of.
struct Counters {
  uint64_t read = 0, written = 0, blocks_read = 0, blocks_done = 0, blocks_planned = 0;
  int64_t stage_ns[3] = {0, 0, 0};
  int64_t clock_ns = 0;
};

// A block is planned before it is read and read before it is computed, and a
// snapshot keeps that order (done <= read <= planned): the later counter is
// loaded first, with acquire, so every earlier count that happened before it
// is seen by the loads after it (loaded the other way round, two blocks could
// be read and computed between the loads: 7 done of 5 read).
Counters counters_now() {
  constexpr auto relaxed = std::memory_order_relaxed;
  constexpr auto acquire = std::memory_order_acquire;
  Counters c;
  c.read = io_counters().read_bytes.load(relaxed);
  c.written = io_counters().written_bytes.load(relaxed);
  c.blocks_done = g_blocks_done.load(acquire);
  c.blocks_read = g_blocks_read.load(acquire);
  c.blocks_planned = g_blocks_planned.load(acquire);
  for (int s = 0; s < 3; ++s) c.stage_ns[s] = g_stage_ns[s].load(relaxed);
  c.clock_ns = stats_clock_ns();
  return c;
}

// What a program's last complete run did (its first run's calls: as compiled).
struct ProgramFigures {
  uint64_t calls = 0, bytes = 0;
  int64_t ns = 0;
  bool ran = false;  // a run of it ended (the compiled call count is only a first guess)
};

struct StatsState {
  std::mutex mu;
  std::condition_variable call_started;
  std::map<std::string, OpTotals, std::less<>> totals;
  // The running call (running false between calls).
  bool running = false;
  bool released = false;  // release_call_waiters() ran
  int waiting = 0;        // threads in wait_for_call
  uint64_t seq = 0;
  std::string op;
  int32_t program = 0;
  Counters at_start;
  std::deque<CallProgress> finished;
  // The program run under way (seq 0: none), its ended runs, and each program's figures.
  ProgramRunProgress run;
  int64_t run_id = 0;
  uint64_t run_seq = 0;
  std::deque<ProgramRunProgress> finished_runs;
  std::map<int32_t, ProgramFigures> programs;
  std::vector<StageEvent> events;
  uint64_t dropped = 0;
};

StatsState& state() {
  static StatsState s;
  return s;
}

// The items of a list kept in order of their seq whose seq is past `after`.
template <class Item>
std::vector<Item> numbered_after(const std::deque<Item>& items, uint64_t after) {
  std::vector<Item> out;
  for (const Item& item : items)
    if (item.seq > after) out.push_back(item);
  return out;
}

thread_local int t_depth = 0;  // CallStats scopes open on this thread

// fork() copies memory, not threads: a child would keep the parent's progress
// thread as a waiter of call_started that never wakes, and glibc's condition
// variable then blocks a later notify_all for good (a child's second or third
// call hung). Around a fork the lock is held, so the state is whole; the child
// gets a condition variable with no waiters, and a call of another parent
// thread no longer runs there.
void lock_for_fork() { state().mu.lock(); }
void unlock_after_fork() { state().mu.unlock(); }
void reset_in_forked_child() {
  StatsState& st = state();
  new (&st.call_started) std::condition_variable();  // the old one's waiters are gone
  st.waiting = 0;
  if (t_depth == 0) st.running = false;
  st.mu.unlock();
}
[[maybe_unused]] const int g_fork_handlers =
    pthread_atfork(lock_for_fork, unlock_after_fork, reset_in_forked_child);

CallProgress progress_of(const StatsState& st, const Counters& now) {
  const Counters& s = st.at_start;
  return CallProgress{st.seq,
                      st.op,
                      s.clock_ns,
                      0,
                      now.blocks_read - s.blocks_read,
                      now.blocks_done - s.blocks_done,
                      now.blocks_planned - s.blocks_planned,
                      (now.read - s.read) + (now.written - s.written),
                      st.program};
}

// Ends the program run under way (under st.mu): its figures are what the
// program's next run is expected to do.
void close_program_run(StatsState& st) {
  ProgramRunProgress& r = st.run;
  if (r.seq == 0) return;
  r.end_ns = std::max(r.last_call_end_ns, r.start_ns);
  r.call_running = false;
  if (!r.failed)
    st.programs[r.program] = ProgramFigures{r.calls_done, r.bytes, r.end_ns - r.start_ns, true};
  st.finished_runs.push_back(r);
  if (st.finished_runs.size() > kFinishedKept) st.finished_runs.pop_front();
  r = ProgramRunProgress{};
}

// A call of `program`'s run `run_id` starts (under st.mu): it continues the
// run under way, or ends it and, for a jitted program, starts another.
void note_program_call(StatsState& st, const std::string& op, int32_t program, int64_t run_id,
                       int64_t now_ns) {
  if (st.run.seq != 0 && (program != st.run.program || run_id != st.run_id)) {
    close_program_run(st);
  }
  if (program == 0) return;
  ProgramRunProgress& r = st.run;
  if (r.seq == 0) {
    const ProgramFigures& last = st.programs[program];
    r.seq = ++st.run_seq;
    r.program = program;
    r.start_ns = now_ns;
    r.expected_calls = last.calls;
    if (last.ran) {
      r.expected_bytes = last.bytes;
      r.expected_ns = last.ns;
    }
    st.run_id = run_id;
  }
  r.op = op;
  r.call_running = true;
}

// Peak windows over io/file.hpp's buffer peak: `carried` holds the peak since
// reset_blocks_peak() up to the last time a scope opened (which restarted
// io/file.hpp's peak), each scope its own likewise.
struct PeakScopes {
  std::mutex mu;
  int64_t carried = 0;
  uint64_t next = 0;
  std::map<uint64_t, int64_t> scopes;
};

PeakScopes& peak_scopes() {
  static PeakScopes p;
  return p;
}

}  // namespace

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kRead: return "read";
    case Stage::kCompute: return "compute";
    case Stage::kWrite: return "write";
  }
  return "?";
}

int64_t stats_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

CallStats::CallStats(const std::string& op, int32_t program, int64_t run)
    : outer_(t_depth++ == 0), uncaught_(std::uncaught_exceptions()) {
  if (!outer_) return;
  StatsState& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.seq;
    st.running = true;
    st.op = op;
    st.program = program;
    st.at_start = counters_now();
    note_program_call(st, op, program, run, st.at_start.clock_ns);
  }
  st.call_started.notify_all();
}

CallStats::~CallStats() {
  --t_depth;
  if (!outer_) return;
  StatsState& st = state();
  const Counters now = counters_now();
  std::lock_guard<std::mutex> lock(st.mu);
  const Counters& s = st.at_start;
  OpTotals& t = st.totals[st.op];
  t.calls += 1;
  t.blocks += now.blocks_planned - s.blocks_planned;
  t.bytes_read += now.read - s.read;
  t.bytes_written += now.written - s.written;
  t.read_ns += now.stage_ns[0] - s.stage_ns[0];
  t.compute_ns += now.stage_ns[1] - s.stage_ns[1];
  t.write_ns += now.stage_ns[2] - s.stage_ns[2];
  t.wall_ns += now.clock_ns - s.clock_ns;
  CallProgress done = progress_of(st, now);
  done.end_ns = now.clock_ns;
  done.failed = std::uncaught_exceptions() > uncaught_;
  ProgramRunProgress& r = st.run;
  if (r.seq != 0 && r.call_running) {
    r.call_running = false;
    r.calls_done += 1;
    r.bytes += done.bytes;
    r.last_call_end_ns = now.clock_ns;
    r.failed = r.failed || done.failed;
    if (r.failed || (r.expected_calls != 0 && r.calls_done >= r.expected_calls))
      close_program_run(st);
  }
  st.finished.push_back(std::move(done));
  if (st.finished.size() > kFinishedKept) st.finished.pop_front();
  st.running = false;
}

std::optional<ProgramRunProgress> program_run() {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.run.seq == 0) return std::nullopt;
  ProgramRunProgress r = st.run;
  if (r.call_running && st.running) r.bytes += progress_of(st, counters_now()).bytes;
  return r;
}

std::vector<ProgramRunProgress> finished_program_runs(uint64_t after) {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return numbered_after(st.finished_runs, after);
}

bool end_program_run(uint64_t seq) {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.run.seq == 0 || st.run.seq != seq || st.run.call_running) return false;
  close_program_run(st);
  return true;
}

void note_program_calls(int32_t slot, uint64_t calls) {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  ProgramFigures& f = st.programs[slot];
  if (!f.ran) f.calls = calls;
}

int64_t blocks_peak() {
  PeakScopes& p = peak_scopes();
  std::lock_guard<std::mutex> lock(p.mu);
  return std::max(p.carried, peak_buffer_bytes());
}

void reset_blocks_peak() {
  PeakScopes& p = peak_scopes();
  std::lock_guard<std::mutex> lock(p.mu);
  for (auto& [id, peak] : p.scopes) peak = std::max(peak, peak_buffer_bytes());
  p.carried = 0;
  reset_peak_buffer_bytes();
}

uint64_t open_peak_scope() {
  PeakScopes& p = peak_scopes();
  std::lock_guard<std::mutex> lock(p.mu);
  // A buffer that comes and goes between reading the peak and restarting it
  // is missed by the windows open before: rare (scopes open between calls).
  const int64_t peak = peak_buffer_bytes();
  p.carried = std::max(p.carried, peak);
  for (auto& [id, scope_peak] : p.scopes) scope_peak = std::max(scope_peak, peak);
  reset_peak_buffer_bytes();
  const uint64_t id = ++p.next;
  p.scopes[id] = peak_buffer_bytes();
  return id;
}

int64_t peak_scope_bytes(uint64_t scope) {
  PeakScopes& p = peak_scopes();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.scopes.find(scope);
  if (it == p.scopes.end()) return 0;
  return std::max(it->second, peak_buffer_bytes());
}

void close_peak_scope(uint64_t scope) {
  PeakScopes& p = peak_scopes();
  std::lock_guard<std::mutex> lock(p.mu);
  p.scopes.erase(scope);
}

std::map<std::string, OpTotals> op_totals() {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return {st.totals.begin(), st.totals.end()};
}

void reset_op_totals() {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.totals.clear();
}

void note_blocks_planned(int64_t n) {
  g_blocks_planned.fetch_add(static_cast<uint64_t>(n), std::memory_order_release);
}

uint64_t stage_mark(Stage s) {
  if (!g_timeline.load(std::memory_order_relaxed)) return kNoMark;
  if (s == Stage::kRead) return io_counters().read_bytes.load(std::memory_order_relaxed);
  if (s == Stage::kWrite) return io_counters().written_bytes.load(std::memory_order_relaxed);
  return 0;
}

void note_stage(Stage s, int64_t start_ns, int64_t end_ns, uint64_t mark) {
  g_stage_ns[static_cast<int>(s)].fetch_add(end_ns - start_ns, std::memory_order_relaxed);
  // Release: a snapshot that sees this count sees the counts before it (counters_now).
  if (s == Stage::kRead) g_blocks_read.fetch_add(1, std::memory_order_release);
  if (s == Stage::kCompute) g_blocks_done.fetch_add(1, std::memory_order_release);
  if (!g_timeline.load(std::memory_order_relaxed)) return;
  // A stage that started before the timeline did has no mark: its bytes are unknown (0).
  const uint64_t now = stage_mark(s);
  const uint64_t moved = mark == kNoMark || now == kNoMark ? 0 : now - mark;
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (!g_timeline.load(std::memory_order_relaxed)) return;
  if (st.events.size() >= kTimelineLimit) {
    ++st.dropped;
    return;
  }
  st.events.push_back(StageEvent{s, st.running ? st.op : std::string(), start_ns, end_ns, moved});
}

std::optional<CallProgress> wait_for_call(double timeout_s) {
  StatsState& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  const auto timeout = std::chrono::duration<double>(timeout_s);
  ++st.waiting;
  st.call_started.wait_for(lock, timeout, [&] { return st.running || st.released; });
  --st.waiting;
  if (!st.running) return std::nullopt;
  return progress_of(st, counters_now());
}

void release_call_waiters() {
  StatsState& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.released = true;
  }
  st.call_started.notify_all();
}

int call_waiters() {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.waiting;
}

std::vector<CallProgress> finished_calls(uint64_t after) {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return numbered_after(st.finished, after);
}

uint64_t last_call_seq() {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.seq;
}

void set_timeline(bool enabled) {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (enabled) {
    st.events.clear();
    st.dropped = 0;
  }
  g_timeline = enabled;
}

std::vector<StageEvent> timeline_events() {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.events;
}

uint64_t timeline_dropped() {
  StatsState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.dropped;
}

}  // namespace jask
