// update_ (copy_into) replaces an array's file whole: a new file built
// beside it and renamed over it. These tests check the contents, what readers
// holding the old file see, the bytes around the data, permissions, failure
// paths and the removal of replacement files left by dead processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.hpp"
#include "io/file.hpp"
#include "kernels/ops.hpp"
#include "storage/file_table.hpp"
#include "storage/journal.hpp"
#include "storage/transaction.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

namespace fs = std::filesystem;
using test::array_values;
using test::BudgetGuard;
using test::make_array;
using test::ScratchDir;
using test::TempDir;
using test::test_values;

const ArrayInfo kInfo{DType::f32, {37, 23}};
const int64_t kNumel = 37 * 23;

// A user-visible .npy file holding `values`, opened writable and registered.
int32_t open_npy_with(const std::string& path, const std::vector<double>& values,
                      bool writable = true) {
  StoredArray::create_file(path, kInfo)
      ->write_elems(test::encode(DType::f32, values).data(), 0, kNumel);
  return Registry::instance().add(test::open_npy(path, writable));
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::set<std::string> replacement_files_in(const std::string& dir) {
  std::set<std::string> found;
  for (const auto& name : names_in(dir)) {
    if (name.find(".jask-tmp-") != std::string::npos) found.insert(name);
  }
  return found;
}

ino_t inode_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("stat failed: " + path);
  return st.st_ino;
}

// The pid of a process that has exited and been reaped.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Runs `fn`, expecting exception E whose message contains `needle`.
template <class E, class Fn>
void expect_error_mentioning(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "'" << needle << "' not in: " << e.what();
  }
}

TEST(Update, ReplacesTheFileUnderTheSamePathAndLeavesNoTempFile) {
  ScratchDir scratch;
  BudgetGuard budget(4096);  // many blocks
  TempDir dir;
  const std::string path = dir.file("a.npy");
  int32_t dst = open_npy_with(path, test_values(kNumel, 1));
  const std::vector<char> header_before = test::read_file_bytes(path);
  const ino_t inode_before = inode_of(path);
  std::vector<double> values = test_values(kNumel, 2);

  copy_into(dst, make_array(DType::f32, kInfo.shape, values));

  EXPECT_EQ(array_values(dst), values);
  EXPECT_EQ(Registry::instance().get(dst)->path(), path);
  EXPECT_NE(inode_of(path), inode_before) << "renamed over, not written in place";
  std::vector<char> bytes = test::read_file_bytes(path);
  const uint64_t offset = Registry::instance().get(dst)->data_offset();
  ASSERT_EQ(bytes.size(), header_before.size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.begin() + offset, header_before.begin()));
  EXPECT_EQ(test::decode(DType::f32, bytes.data() + offset, kNumel), values);
  EXPECT_EQ(array_values(*test::open_npy(path, false)), values);
  EXPECT_EQ(replacement_files_in(dir.path()), std::set<std::string>{});
}

TEST(Update, ReadersOfTheOldFileKeepItAndTheArrayAndItsViewsSeeTheNewOne) {
  ScratchDir scratch;
  TempDir dir;
  std::vector<double> old_values = test_values(kNumel, 1), new_values = test_values(kNumel, 2);
  int32_t dst = open_npy_with(dir.file("a.npy"), old_values);
  ArrayRef before = Registry::instance().get(dst);
  ArrayRef view = StoredArray::reshaped(before, {23, 37});
  std::shared_ptr<const File> old_file = before->file();

  copy_into(dst, make_array(DType::f32, kInfo.shape, new_values));

  // The old file is unlinked but open: an op that started on it finishes on it.
  std::vector<unsigned char> old_bytes(kInfo.nbytes());
  old_file->read_at(old_bytes.data(), old_bytes.size(), before->data_offset(), IoPolicy{});
  EXPECT_EQ(test::decode(DType::f32, old_bytes.data(), kNumel), old_values);
  EXPECT_EQ(array_values(*before), new_values);
  EXPECT_EQ(array_values(*view), new_values);
}

// Updates the array `dst` (all zeros) to all 1, 2, ..., 20 while a thread
// reads it whole with `read` as fast as it can: no read may mix two versions.
void expect_whole_reads_during_updates(int32_t dst,
                                       const std::function<void(std::vector<float>&)>& read) {
  const int kUpdates = 20;
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, torn{0};
  std::thread reader([&] {
    std::vector<float> values(kNumel);
    while (!done) {
      read(values);
      for (float v : values) torn += v != values[0];
      ++reads;
    }
  });
  for (int k = 1; k <= kUpdates; ++k) copy_into(dst, fill_array(kInfo, k));
  done = true;
  reader.join();
  EXPECT_EQ(torn, 0);
  EXPECT_GT(reads, 0);
  EXPECT_EQ(array_values(dst), std::vector<double>(kNumel, kUpdates));
}

TEST(Update, ConcurrentReadersSeeEachReadWhollyOldOrWhollyNew) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  TempDir dir;
  int32_t dst = open_npy_with(dir.file("a.npy"), std::vector<double>(kNumel, 0.0));
  ArrayRef arr = Registry::instance().get(dst);
  expect_whole_reads_during_updates(
      dst, [&](std::vector<float>& values) { arr->read_elems(values.data(), 0, kNumel); });
}

TEST(Update, OfAReadOnlyArrayThrowsNamingThePathAndChangesNothing) {
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("ro.npy");
  int32_t dst = open_npy_with(path, test_values(kNumel, 1), /*writable=*/false);
  const std::vector<char> before = test::read_file_bytes(path);
  const std::set<std::string> names_before = names_in(dir.path());

  expect_error_mentioning<ReadOnlyError>(
      [&] { copy_into(dst, make_array(DType::f32, kInfo.shape, test_values(kNumel, 2))); }, path);

  EXPECT_EQ(test::read_file_bytes(path), before);
  EXPECT_EQ(names_in(dir.path()), names_before);
}

TEST(Update, AFailureWhileWritingLeavesTheOldFileAndNoTempFile) {
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.npy");
  std::vector<double> old_values = test_values(kNumel, 1);
  int32_t dst = open_npy_with(path, old_values);
  const std::vector<char> before = test::read_file_bytes(path);
  ArrayRef arr = Registry::instance().get(dst);
  std::vector<unsigned char> half = test::encode(DType::f32, test_values(kNumel / 2, 3));

  expect_error_mentioning<IoError>(
      [&] {
        arr->replace_data([&](const StoredArray& staged) {
          staged.write_elems(half.data(), 0, kNumel / 2);
          throw IoError("disk full (simulated)");
        });
      },
      "simulated");

  EXPECT_EQ(test::read_file_bytes(path), before);
  EXPECT_EQ(array_values(*arr), old_values);
  EXPECT_EQ(replacement_files_in(dir.path()), std::set<std::string>{});
}

TEST(Update, KeepsTheBytesBeforeAndAfterARawArray) {
  ScratchDir scratch;
  BudgetGuard budget(4096);  // the 10000-byte prefix is copied in several chunks
  TempDir dir;
  const std::string path = dir.file("raw.bin");
  const uint64_t prefix = 10000, suffix = 777;
  std::vector<char> bytes(prefix + kInfo.nbytes() + suffix);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>('a' + i % 23);
  test::write_file_bytes(path, bytes);
  int32_t dst = Registry::instance().add(test::open_raw(path, kInfo, prefix, /*writable=*/true));
  std::vector<double> values = test_values(kNumel, 4);

  copy_into(dst, make_array(DType::f32, kInfo.shape, values));

  std::vector<char> after = test::read_file_bytes(path);
  ASSERT_EQ(after.size(), bytes.size());
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + prefix, bytes.begin()));
  EXPECT_TRUE(std::equal(after.end() - suffix, after.end(), bytes.end() - suffix));
  EXPECT_EQ(test::decode(DType::f32, after.data() + prefix, kNumel), values);
  EXPECT_EQ(array_values(dst), values);
}

TEST(Update, KeepsPermissionBitsAndSymlinks) {
  ScratchDir scratch;
  TempDir dir;
  const std::string real = dir.file("real.npy"), link = dir.file("link.npy");
  StoredArray::create_file(real, kInfo);
  fs::permissions(real, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink("real.npy", link);
  int32_t dst = Registry::instance().add(test::open_npy(link, /*writable=*/true));
  std::vector<double> values = test_values(kNumel, 5);

  copy_into(dst, make_array(DType::f32, kInfo.shape, values));

  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::status(real).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(array_values(*test::open_npy(real, false)), values);
  EXPECT_EQ(Registry::instance().get(dst)->path(), link);
  EXPECT_EQ(replacement_files_in(dir.path()), std::set<std::string>{});
}

TEST(Update, InAFolderItCannotWriteToThrowsNamingTheTargetAndKeepsTheOldValues) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes to any folder";
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.npy");
  std::vector<double> old_values = test_values(kNumel, 1);
  int32_t dst = open_npy_with(path, old_values);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  expect_error_mentioning<IoError>(
      [&] { copy_into(dst, make_array(DType::f32, kInfo.shape, test_values(kNumel, 2))); }, path);
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_EQ(array_values(dst), old_values);
}

TEST(Update, OfAScratchArrayStillDeletesItsFileWithTheLastReference) {
  ScratchDir scratch;
  int32_t dst = make_array(DType::f32, kInfo.shape, test_values(kNumel, 1));
  const std::string path = Registry::instance().get(dst)->path();
  copy_into(dst, make_array(DType::f32, kInfo.shape, test_values(kNumel, 2)));
  EXPECT_TRUE(Registry::instance().get(dst)->is_scratch());
  EXPECT_EQ(array_values(dst), test_values(kNumel, 2));
  ASSERT_TRUE(fs::exists(path));
  Registry::instance().release_floating(dst);
  EXPECT_FALSE(fs::exists(path));
}

TEST(Update, RemovesReplacementFilesOfDeadProcessesOnly) {
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.npy");
  int32_t dst = open_npy_with(path, test_values(kNumel, 1));
  const std::string dead = "a.npy.jask-tmp-" + std::to_string(dead_pid()) + "-0badf00d";
  const std::string live = "a.npy.jask-tmp-" + std::to_string(::getpid()) + "-0badf00d";
  const std::string other_array = "b.npy.jask-tmp-" + std::to_string(dead_pid()) + "-0badf00d";
  const std::string not_a_pid = "a.npy.jask-tmp-x1-0badf00d";
  for (const auto& name : {dead, live, other_array, not_a_pid})
    test::write_file_bytes(dir.file(name), {'x'});

  copy_into(dst, make_array(DType::f32, kInfo.shape, test_values(kNumel, 2)));

  EXPECT_EQ(replacement_files_in(dir.path()),
            (std::set<std::string>{live, other_array, not_a_pid}));
}

TEST(Update, OpeningWritableRemovesReplacementFilesOfDeadProcesses) {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  StoredArray::create_file(path, kInfo);
  const std::string dead = "a.npy.jask-tmp-" + std::to_string(dead_pid()) + "-0badf00d";
  test::write_file_bytes(dir.file(dead), {'x'});

  test::open_npy(path, /*writable=*/false);
  test::open_raw(path, kInfo, 128, /*writable=*/false);
  EXPECT_EQ(replacement_files_in(dir.path()), std::set<std::string>{dead})
      << "read-only opens leave it";
  test::open_npy(path, /*writable=*/true);
  EXPECT_EQ(replacement_files_in(dir.path()), std::set<std::string>{});

  test::write_file_bytes(dir.file(dead), {'x'});
  test::open_raw(path, kInfo, 128, /*writable=*/true);
  EXPECT_EQ(replacement_files_in(dir.path()), std::set<std::string>{});
}

// A raw container file: a prefix, array A, a gap, array B, a suffix, each
// byte outside A and B a known pattern.
struct TwoArrayFile {
  static constexpr uint64_t kPrefix = 5000, kGap = 3000, kSuffix = 777;
  static constexpr uint64_t kA = kPrefix, kB = kPrefix + 37 * 23 * 4 + kGap;
  std::string path;
  std::vector<char> bytes;

  explicit TwoArrayFile(const std::string& p) : path(p), bytes(kB + kInfo.nbytes() + kSuffix) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>('a' + i % 23);
    test::write_file_bytes(path, bytes);
  }
  int32_t open(uint64_t offset, bool writable = true) const {
    return Registry::instance().add(test::open_raw(path, kInfo, offset, writable));
  }
  // Checks the file on disk: A and B hold these values, every other byte is unchanged.
  void expect_holds(const std::vector<double>& a, const std::vector<double>& b) const {
    std::vector<char> now = test::read_file_bytes(path);
    ASSERT_EQ(now.size(), bytes.size());
    EXPECT_EQ(test::decode(DType::f32, now.data() + kA, kNumel), a);
    EXPECT_EQ(test::decode(DType::f32, now.data() + kB, kNumel), b);
    auto same = [&](uint64_t begin, uint64_t end) {
      return std::equal(now.begin() + begin, now.begin() + end, bytes.begin() + begin);
    };
    EXPECT_TRUE(same(0, kA)) << "prefix";
    EXPECT_TRUE(same(kA + kInfo.nbytes(), kB)) << "gap";
    EXPECT_TRUE(same(kB + kInfo.nbytes(), bytes.size())) << "suffix";
  }
  std::vector<double> values_at(uint64_t offset) const {
    return test::decode(DType::f32, bytes.data() + offset, kNumel);
  }
};

TEST(Update, OfOneArrayOfAFileKeepsTheOtherArraysLatestBytes) {
  ScratchDir scratch;
  BudgetGuard budget(4096);  // every range copied in several chunks
  TempDir dir;
  TwoArrayFile file(dir.file("two.bin"));
  const int32_t a = file.open(TwoArrayFile::kA), b = file.open(TwoArrayFile::kB);
  std::vector<double> a_now = file.values_at(TwoArrayFile::kA);
  std::vector<double> b_now = file.values_at(TwoArrayFile::kB);
  // Each in turn, then in alternation: an update of one must never restore
  // the other's bytes as they were when it was opened.
  const int order[] = {0, 0, 1, 1, 0, 1, 0, 1};
  for (int step = 0; step < 8; ++step) {
    std::vector<double> values = test_values(kNumel, 10 + step);
    copy_into(order[step] == 0 ? a : b, make_array(DType::f32, kInfo.shape, values));
    (order[step] == 0 ? a_now : b_now) = values;
    EXPECT_EQ(array_values(a), a_now) << "step " << step;
    EXPECT_EQ(array_values(b), b_now) << "step " << step;
    file.expect_holds(a_now, b_now);
    if (HasFailure()) return;
  }
  EXPECT_EQ(replacement_files_in(dir.path()), std::set<std::string>{});
}

TEST(Update, ReachesEveryViewOfEveryArrayOfTheFile) {
  ScratchDir scratch;
  TempDir dir;
  TwoArrayFile file(dir.file("two.bin"));
  const int32_t a = file.open(TwoArrayFile::kA), b = file.open(TwoArrayFile::kB);
  ArrayRef b_view = StoredArray::viewed(Registry::instance().get(b), 23, {36, 23});
  ArrayRef a_reshaped = StoredArray::reshaped(Registry::instance().get(a), {23, 37});
  const std::vector<double> b_values = file.values_at(TwoArrayFile::kB);

  const std::vector<double> a_values = test_values(kNumel, 7);
  copy_into(a, make_array(DType::f32, kInfo.shape, a_values));

  // The view of B reads B's bytes from the new file, unchanged.
  EXPECT_EQ(array_values(*b_view), std::vector<double>(b_values.begin() + 23, b_values.end()));
  EXPECT_EQ(b_view->file(), Registry::instance().get(a)->file()) << "one file for all";
  EXPECT_EQ(array_values(*a_reshaped), a_values);

  const std::vector<double> b_new = test_values(kNumel, 8);
  copy_into(b, make_array(DType::f32, kInfo.shape, b_new));
  EXPECT_EQ(array_values(*b_view), std::vector<double>(b_new.begin() + 23, b_new.end()));
  EXPECT_EQ(array_values(*a_reshaped), a_values);
  file.expect_holds(a_values, b_new);
}

TEST(Update, OfArraysOfOneFileFromTwoThreadsKeepsBoth) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  TempDir dir;
  TwoArrayFile file(dir.file("two.bin"));
  const int32_t a = file.open(TwoArrayFile::kA), b = file.open(TwoArrayFile::kB);
  const int kUpdates = 6;
  auto updates = [&](int32_t target, int salt) {
    for (int k = 1; k <= kUpdates; ++k) copy_into(target, fill_array(kInfo, salt + k));
  };
  std::thread other([&] { updates(b, 100); });
  updates(a, 0);
  other.join();
  file.expect_holds(std::vector<double>(kNumel, kUpdates),
                    std::vector<double>(kNumel, 100 + kUpdates));
}

TEST(Update, OfAnArrayOpenedReadOnlyBesideAWritableOneThrowsAndItSeesTheOthersUpdates) {
  ScratchDir scratch;
  TempDir dir;
  TwoArrayFile file(dir.file("two.bin"));
  const int32_t a = file.open(TwoArrayFile::kA, /*writable=*/false);
  const int32_t b = file.open(TwoArrayFile::kB, /*writable=*/true);
  EXPECT_FALSE(Registry::instance().get(a)->writable());
  EXPECT_TRUE(Registry::instance().get(b)->writable());
  expect_error_mentioning<ReadOnlyError>(
      [&] { copy_into(a, make_array(DType::f32, kInfo.shape, test_values(kNumel, 2))); },
      file.path);
  const std::vector<double> b_values = test_values(kNumel, 3);
  copy_into(b, make_array(DType::f32, kInfo.shape, b_values));
  EXPECT_EQ(array_values(a), file.values_at(TwoArrayFile::kA));
  file.expect_holds(file.values_at(TwoArrayFile::kA), b_values);
}

// Many small reads of one array inside one pinned call: a multi-block read.
TEST(Update, ACallPinsItsOperandsSoEveryBlockItReadsComesFromOneVersion) {
  ScratchDir scratch;
  TempDir dir;
  int32_t dst = open_npy_with(dir.file("a.npy"), std::vector<double>(kNumel, 0.0));
  ArrayRef arr = Registry::instance().get(dst);
  expect_whole_reads_during_updates(dst, [&](std::vector<float>& values) {
    ReadPins pins(files_of({arr}));
    for (int64_t first = 0; first < kNumel; first += 64)
      arr->read_elems(values.data() + first, first, std::min<int64_t>(64, kNumel - first));
  });
}

// A pipe's byte, for ordering two processes.
void signal_pipe(int fd) { ASSERT_EQ(::write(fd, "x", 1), 1); }
void await_pipe(int fd) {
  char c;
  ASSERT_EQ(::read(fd, &c, 1), 1);
}

TEST(Update, AWritableOpenOfAFileAnotherProcessWritesIsALockedErrorNamingItAndThePid) {
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.npy");
  StoredArray::create_file(path, kInfo);
  int opened[2], release[2];
  ASSERT_EQ(::pipe(opened), 0);
  ASSERT_EQ(::pipe(release), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ArrayRef held = test::open_npy(path, /*writable=*/true);
    signal_pipe(opened[1]);
    await_pipe(release[0]);
    ::_exit(0);
  }
  await_pipe(opened[0]);
  expect_error_mentioning<LockedError>([&] { test::open_npy(path, true); }, path);
  expect_error_mentioning<LockedError>([&] { test::open_npy(path, true); },
                                       "process " + std::to_string(child));
  EXPECT_EQ(array_values(*test::open_npy(path, false)), std::vector<double>(kNumel, 0.0));
  signal_pipe(release[1]);
  ::waitpid(child, nullptr, 0);
  int32_t mine = Registry::instance().add(test::open_npy(path, true));
  copy_into(mine, fill_array(kInfo, 3));
  EXPECT_EQ(array_values(mine), std::vector<double>(kNumel, 3));
}

TEST(Update, TheWriterLocksTheNewFileBeforeItsRenameAndFreesTheLockWithItsLastArray) {
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.npy");
  int32_t dst = open_npy_with(path, std::vector<double>(kNumel, 0.0));
  ArrayRef view = StoredArray::reshaped(Registry::instance().get(dst), {23, 37});
  copy_into(dst, fill_array(kInfo, 1));
  EXPECT_FALSE(File(path, OpenMode::kReadOnly).try_lock_exclusive()) << "the new file is locked";
  // Another open in this process shares the entry and its lock.
  int32_t again = Registry::instance().add(test::open_npy(path, true));
  EXPECT_EQ(array_values(again), std::vector<double>(kNumel, 1));
  Registry::instance().release_floating(dst);
  Registry::instance().release_floating(again);
  EXPECT_FALSE(File(path, OpenMode::kReadOnly).try_lock_exclusive()) << "a view is left";
  view.reset();
  EXPECT_TRUE(File(path, OpenMode::kReadOnly).try_lock_exclusive());
}

std::set<std::string> transaction_files_in(const std::string& dir) {
  std::set<std::string> found;
  for (const auto& name : names_in(dir)) {
    if (name.find(".jask-txn-") != std::string::npos) found.insert(name);
  }
  return found;
}

TEST(UpdateTree, ReplacesEveryArrayInSeveralFoldersAndLeavesNoTransactionFiles) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  TempDir dir;
  fs::create_directory(dir.file("sub"));
  const int32_t a = open_npy_with(dir.file("a.npy"), test_values(kNumel, 1));
  const int32_t b = open_npy_with(dir.file("sub/b.npy"), test_values(kNumel, 2));
  const int32_t s = make_array(DType::f32, kInfo.shape, test_values(kNumel, 3));
  copy_all_into({a, b, s}, {fill_array(kInfo, 4), fill_array(kInfo, 5), fill_array(kInfo, 6)},
                {"a", "b", "s"});
  EXPECT_EQ(array_values(a), std::vector<double>(kNumel, 4));
  EXPECT_EQ(array_values(b), std::vector<double>(kNumel, 5));
  EXPECT_EQ(array_values(s), std::vector<double>(kNumel, 6));
  EXPECT_EQ(array_values(*test::open_npy(dir.file("sub/b.npy"), false)),
            std::vector<double>(kNumel, 5));
  EXPECT_EQ(transaction_files_in(dir.path()), std::set<std::string>{});
  EXPECT_EQ(transaction_files_in(dir.file("sub")), std::set<std::string>{});
}

TEST(UpdateTree, OfOneFileTwiceOrOfAReadOnlyArrayThrowsNamingTheLeavesAndChangesNothing) {
  ScratchDir scratch;
  TempDir dir;
  const int32_t a = open_npy_with(dir.file("a.npy"), test_values(kNumel, 1));
  const int32_t view =
      Registry::instance().add(StoredArray::reshaped(Registry::instance().get(a), {23, 37}));
  const int32_t ro = open_npy_with(dir.file("ro.npy"), test_values(kNumel, 2), false);
  const int32_t x = fill_array(kInfo, 7);
  const int32_t xt =
      Registry::instance().add(StoredArray::reshaped(Registry::instance().get(x), {23, 37}));
  expect_error_mentioning<ValueError>(
      [&] {
        copy_all_into({a, view}, {x, xt}, {"w", "v"});
      },
      "w and v are arrays of one file");
  expect_error_mentioning<ReadOnlyError>(
      [&] {
        copy_all_into({a, ro}, {x, x}, {"w", "r"});
      },
      "r (" + dir.file("ro.npy"));
  EXPECT_EQ(array_values(a), test_values(kNumel, 1));
  EXPECT_EQ(transaction_files_in(dir.path()), std::set<std::string>{});
}

// A child killed at `point` of an update_tree_ of a.npy and sub/b.npy to 4 and 5.
void update_tree_killed_at(const TempDir& dir, const char* point) {
  pid_t child = ::fork();
  if (child == 0) {
    ::setenv("JASK_TEST_CRASH_AT", point, 1);
    const int32_t a = Registry::instance().add(test::open_npy(dir.file("a.npy"), true));
    const int32_t b = Registry::instance().add(test::open_npy(dir.file("sub/b.npy"), true));
    copy_all_into({a, b}, {fill_array(kInfo, 4), fill_array(kInfo, 5)}, {"a", "b"});
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

TEST(UpdateTree, ACrashAfterTheCommitIsReadByReadOnlyOpensAndRolledForwardByWritableOnes) {
  for (const char* point : {"update_tree_committed", "update_tree_renamed_one"}) {
    ScratchDir scratch;
    TempDir dir;
    fs::create_directory(dir.file("sub"));
    open_npy_with(dir.file("a.npy"), test_values(kNumel, 1));
    open_npy_with(dir.file("sub/b.npy"), test_values(kNumel, 2));
    Registry::instance().clear();
    update_tree_killed_at(dir, point);
    const std::set<std::string> top = transaction_files_in(dir.path());
    const std::set<std::string> sub = transaction_files_in(dir.file("sub"));
    EXPECT_NE(sub, std::set<std::string>{}) << point;
    {
      // Read-only opens read the committed values and rename nothing.
      RecoveryNotes notes;
      EXPECT_EQ(array_values(*test::open_npy(dir.file("sub/b.npy"), false)),
                std::vector<double>(kNumel, 5))
          << point;
      EXPECT_EQ(array_values(*test::open_npy(dir.file("a.npy"), false)),
                std::vector<double>(kNumel, 4))
          << point;
      EXPECT_EQ(transaction_files_in(dir.path()), top) << point;
      EXPECT_EQ(transaction_files_in(dir.file("sub")), sub) << point;
      EXPECT_FALSE(notes.take().empty());
    }
    // A writable open finishes its own folder; the record beside a.npy goes with the last.
    test::open_npy(dir.file("sub/b.npy"), true);
    EXPECT_EQ(transaction_files_in(dir.file("sub")), std::set<std::string>{}) << point;
    EXPECT_EQ(array_values(*test::open_npy(dir.file("a.npy"), false)),
              std::vector<double>(kNumel, 4))
        << point;
    test::open_npy(dir.file("a.npy"), true);
    EXPECT_EQ(transaction_files_in(dir.path()), std::set<std::string>{}) << point;
    EXPECT_EQ(array_values(*test::open_npy(dir.file("sub/b.npy"), false)),
              std::vector<double>(kNumel, 5));
  }
}

// A transaction id of `pid`, as replace_all makes them.
std::string txn_id(pid_t pid, const char* hex = "000000000badf00d") {
  return std::to_string(pid) + "-" + hex;
}

TEST(UpdateTree, AnUncommittedStepOfADeadProcessIsUndoneAtTheNextWritableOpen) {
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.npy");
  open_npy_with(path, test_values(kNumel, 1));
  Registry::instance().clear();
  const std::string id = txn_id(dead_pid());
  const std::string txn = path + ".jask-txn-" + id;
  test::write_file_bytes(txn, std::vector<char>(100, 'x'));
  const std::string journal = txn + ".journal";  // never written: not committed
  test::write_file_bytes(journal + ".part", std::vector<char>(10, 'x'));
  const std::string pointer = encode_transaction_pointer(transaction_host(), journal);
  test::write_file_bytes(txn + ".ptr", std::vector<char>(pointer.begin(), pointer.end()));
  // A live writer's pointer (locked) is left alone.
  const std::string live = path + ".jask-txn-" + txn_id(::getpid(), "00000000000011fe");
  test::write_file_bytes(live + ".ptr", std::vector<char>(pointer.begin(), pointer.end()));
  File holder(live + ".ptr", OpenMode::kReadOnly);
  ASSERT_TRUE(holder.try_lock_exclusive());
  const std::set<std::string> left = transaction_files_in(dir.path());
  EXPECT_EQ(array_values(*test::open_npy(path, false)), test_values(kNumel, 1));
  EXPECT_EQ(transaction_files_in(dir.path()), left);  // read-only: nothing removed
  EXPECT_EQ(array_values(*test::open_npy(path, true)), test_values(kNumel, 1));
  EXPECT_EQ(transaction_files_in(dir.path()),
            std::set<std::string>{fs::path(live).filename().string() + ".ptr"});
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(UpdateTree, AnEmptyUnlockedPointerIsRemovedByAWritableOpenWhateverItsPid) {
  ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.npy");
  open_npy_with(path, test_values(kNumel, 1));
  Registry::instance().clear();
  // Its writer died between creating it and locking it; its pid may name another process now.
  const std::string pointer = path + ".jask-txn-" + txn_id(::getpid()) + ".ptr";
  test::write_file_bytes(pointer, {});
  EXPECT_EQ(array_values(*test::open_npy(path, false)), test_values(kNumel, 1));
  EXPECT_TRUE(exists(pointer));
  EXPECT_EQ(array_values(*test::open_npy(path, true)), test_values(kNumel, 1));
  EXPECT_FALSE(exists(pointer));
}

// A planted pointer of a dead pid, naming `record` with `contents`.
void plant(const std::string& target, const std::string& id, const std::string& record,
           const std::string& contents) {
  const std::string pointer = encode_transaction_pointer(transaction_host(), record);
  test::write_file_bytes(target + ".jask-txn-" + id + ".ptr",
                         std::vector<char>(pointer.begin(), pointer.end()));
  if (!contents.empty())
    test::write_file_bytes(record, std::vector<char>(contents.begin(), contents.end()));
}

std::map<std::string, std::vector<char>> files_in(const std::string& dir) {
  std::map<std::string, std::vector<char>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_symlink())
      out[name] = {'@'};
    else if (e.is_regular_file())
      out[name] = test::read_file_bytes(e.path().string());
  }
  return out;
}

TEST(UpdateTree, PlantedRecordsAreNeverActedOnAndAreReported) {
  ScratchDir scratch;
  TempDir dir;
  fs::create_directory(dir.file("in"));
  fs::create_directory(dir.file("out"));
  const std::string target = dir.file("in/a.npy");
  open_npy_with(target, test_values(kNumel, 1));
  open_npy_with(dir.file("out/victim.npy"), test_values(kNumel, 2));
  open_npy_with(dir.file("in/other.npy"), test_values(kNumel, 3));
  Registry::instance().clear();
  const std::string id = txn_id(dead_pid());
  const std::string out_temp = dir.file("out/victim.npy.jask-txn-" + id);
  test::write_file_bytes(out_temp, test::read_file_bytes(dir.file("in/other.npy")));
  auto record = [&](std::vector<std::pair<std::string, std::string>> pairs) {
    return encode_transaction_record(
        TransactionRecord{id, transaction_host(), static_cast<int>(dead_pid()), std::move(pairs)});
  };
  const std::string in_temp = target + ".jask-txn-" + id;
  test::write_file_bytes(in_temp, test::read_file_bytes(dir.file("in/other.npy")));
  struct Case {
    std::string name, record, contents;
  };
  const std::vector<Case> cases = {
      // A record outside the folder, renaming a file there.
      {"outside", dir.file("out/victim.npy.jask-txn-" + id + ".journal"),
       record({{out_temp, dir.file("out/victim.npy")}})},
      // A record in the folder renaming another file over the input.
      {"over the input", target + ".jask-txn-" + id + ".journal",
       record({{dir.file("in/other.npy"), target}})},
      // A record with a path that climbs out.
      {"dot-dot", target + ".jask-txn-" + id + ".journal",
       record(
           {{dir.file("in/../out/victim.npy.jask-txn-") + id, dir.file("in/../out/victim.npy")}})},
      // A version 1 record (no checksum) of the old form.
      {"version 1", target + ".jask-txn-" + id + ".journal",
       "jask-txn 1\n" + std::to_string(in_temp.size()) + ":" + in_temp +
           std::to_string(target.size()) + ":" + target + "\n"},
      // A checksum that fails.
      {"bad checksum", target + ".jask-txn-" + id + ".journal",
       record({{in_temp, target}}).substr(0, 20) + "X" + record({{in_temp, target}}).substr(21)},
      // A record not named as Jask names it.
      {"misnamed", dir.file("in/notes.txt"), record({{in_temp, target}})},
      // Another host's writer is not presumed dead.
      {"other host", target + ".jask-txn-" + id + ".journal",
       encode_transaction_record(
           TransactionRecord{id, "elsewhere", static_cast<int>(dead_pid()), {{in_temp, target}}})},
  };
  for (const Case& c : cases) {
    if (c.name == "other host") {
      const std::string pointer = encode_transaction_pointer("elsewhere", c.record);
      test::write_file_bytes(target + ".jask-txn-" + id + ".ptr",
                             std::vector<char>(pointer.begin(), pointer.end()));
      test::write_file_bytes(c.record, std::vector<char>(c.contents.begin(), c.contents.end()));
    } else {
      plant(target, id, c.record, c.contents);
    }
    const auto in_before = files_in(dir.file("in"));
    const auto out_before = files_in(dir.file("out"));
    RecoveryNotes notes;
    // Another host's committed step is read as committed (its writer may be renaming), but
    // not finished from here.
    EXPECT_EQ(array_values(*test::open_npy(target, false)),
              test_values(kNumel, c.name == "other host" ? 3 : 1))
        << c.name;
    EXPECT_EQ(array_values(*test::open_npy(target, true)), test_values(kNumel, 1)) << c.name;
    Registry::instance().clear();
    EXPECT_EQ(files_in(dir.file("in")), in_before) << c.name;
    EXPECT_EQ(files_in(dir.file("out")), out_before) << c.name;
    const std::vector<std::string> said = notes.take();
    EXPECT_FALSE(said.empty()) << c.name;
    fs::remove(target + ".jask-txn-" + id + ".ptr");
    fs::remove(c.record);
  }
}

TEST(UpdateTree, APointerToAMissingRecordRemovesNoPartOutsideTheFolder) {
  ScratchDir scratch;
  TempDir dir;
  fs::create_directory(dir.file("in"));
  fs::create_directory(dir.file("out"));
  const std::string target = dir.file("in/a.npy");
  open_npy_with(target, test_values(kNumel, 1));
  Registry::instance().clear();
  const std::string id = txn_id(dead_pid());
  const std::string record = dir.file("out/precious.jask-txn-" + id + ".journal");
  test::write_file_bytes(record + ".part", std::vector<char>(10, 'p'));
  plant(target, id, record, "");
  {
    RecoveryNotes notes;
    test::open_npy(target, true);
  }
  EXPECT_TRUE(exists(record + ".part"));
  EXPECT_FALSE(exists(target + ".jask-txn-" + id + ".ptr"));  // its own pointer: undone
}

TEST(UpdateTree, SymlinkedOrFifoPointersRecordsAndTempsNeitherBlockNorAreFollowed) {
  ScratchDir scratch;
  TempDir dir;
  const std::string target = dir.file("a.npy");
  open_npy_with(target, test_values(kNumel, 1));
  open_npy_with(dir.file("new.npy"), test_values(kNumel, 9));
  Registry::instance().clear();
  const std::string id = txn_id(dead_pid());
  const std::string temp = target + ".jask-txn-" + id;
  const std::string record = temp + ".journal";
  const std::string good = encode_transaction_record(
      TransactionRecord{id, transaction_host(), static_cast<int>(dead_pid()), {{temp, target}}});
  const std::string pointer = encode_transaction_pointer(transaction_host(), record);
  test::write_file_bytes(dir.file("ptr.real"), std::vector<char>(pointer.begin(), pointer.end()));
  test::write_file_bytes(dir.file("rec.real"), std::vector<char>(good.begin(), good.end()));
  for (int kind = 0; kind < 4; ++kind) {
    // 0: pointer a FIFO; 1: pointer a symlink; 2: record a symlink; 3: temp a symlink.
    if (kind == 0) {
      ASSERT_EQ(::mkfifo((temp + ".ptr").c_str(), 0600), 0);
    }
    if (kind == 1) fs::create_symlink(dir.file("ptr.real"), temp + ".ptr");
    if (kind >= 2)
      test::write_file_bytes(temp + ".ptr", std::vector<char>(pointer.begin(), pointer.end()));
    if (kind == 2) fs::create_symlink(dir.file("rec.real"), record);
    if (kind == 3) {
      test::write_file_bytes(record, std::vector<char>(good.begin(), good.end()));
      fs::create_symlink(dir.file("new.npy"), temp);
    }
    const auto before = files_in(dir.path());
    RecoveryNotes notes;
    EXPECT_EQ(array_values(*test::open_npy(target, false)), test_values(kNumel, 1)) << kind;
    EXPECT_EQ(array_values(*test::open_npy(target, true)), test_values(kNumel, 1)) << kind;
    Registry::instance().clear();
    EXPECT_EQ(files_in(dir.path()), before) << kind;
    EXPECT_FALSE(notes.take().empty()) << kind;
    for (const std::string& p : {temp + ".ptr", record, temp}) fs::remove(p);
  }
}

}  // namespace
}  // namespace jask
