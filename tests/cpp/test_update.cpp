// update_ (copy_into) replaces an array's file whole: a new file built
// beside it and renamed over it. These tests check the contents, what readers
// holding the old file see, the bytes around the data, permissions, failure
// paths and the removal of replacement files left by dead processes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.hpp"
#include "io/file.hpp"
#include "kernels/ops.hpp"
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

TEST(Update, ConcurrentReadersSeeEachReadWhollyOldOrWhollyNew) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  TempDir dir;
  int32_t dst = open_npy_with(dir.file("a.npy"), std::vector<double>(kNumel, 0.0));
  ArrayRef arr = Registry::instance().get(dst);
  const int kUpdates = 20;
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, torn{0};
  std::thread reader([&] {
    std::vector<float> block(kNumel);
    while (!done) {
      arr->read_elems(block.data(), 0, kNumel);
      for (float v : block) {
        if (v != block[0]) ++torn;
      }
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

}  // namespace
}  // namespace jask
