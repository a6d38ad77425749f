// Scratch space: one locked folder per process, private files that vanish
// with their last reference, and reclaiming folders of dead processes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "storage/array_store.hpp"
#include "storage/scratch.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::TempDir;
using test::fs::exists;
using test::fs::path;

Scratch& scratch() { return Scratch::instance(); }

ArrayInfo small_info() { return ArrayInfo{DType::f32, {3, 5}}; }

// A folder like one a process leaves behind: <name>/.lock plus a file, and,
// when `marked`, the marker Jask writes into the folders it makes.
std::string make_process_folder(const TempDir& root, const std::string& name, bool marked = true) {
  std::string dir = root.file(name);
  test::fs::create_directory(dir);
  test::write_file_bytes(dir + "/.lock", {});
  test::write_file_bytes(dir + "/left-over.npy", {'x'});
  if (marked) {
    const std::string id = name.substr(name.find('-') + 1);
    const std::string text = scratch_marker_text(id);
    test::write_file_bytes(dir + "/" + kScratchMarkerName,
                           std::vector<char>(text.begin(), text.end()));
  }
  return dir;
}

TEST(Scratch, ConfigureCreatesALockedPerProcessFolderUnderTheRoot) {
  TempDir root;
  scratch().configure(root.path(), false);
  ASSERT_TRUE(scratch().configured());
  path dir = scratch().process_dir();
  EXPECT_EQ(dir.parent_path(), path(root.path()));
  EXPECT_EQ(dir.filename().string().rfind("proc-" + std::to_string(::getpid()) + "-", 0), 0u)
      << dir;
  EXPECT_TRUE(exists(dir / ".lock"));
  EXPECT_TRUE(exists(dir / kScratchMarkerName));
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // The lock is held: another open file description cannot take it.
  int fd = ::open((dir / ".lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ::close(fd);
}

TEST(Scratch, ConfiguringTheSameRootAgainKeepsTheFolder) {
  TempDir root;
  scratch().configure(root.path(), false);
  std::string first = scratch().process_dir();
  scratch().configure(root.path(), false);
  EXPECT_EQ(scratch().process_dir(), first);
}

TEST(Scratch, NewFilePathsAreUniqueAndInsideTheProcessFolder) {
  TempDir root;
  scratch().configure(root.path(), false);
  path dir = scratch().process_dir();
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    std::string p = scratch().new_file_path(i % 2 ? "add" : "matmul");
    EXPECT_EQ(path(p).parent_path(), dir) << p;
    EXPECT_TRUE(seen.insert(p).second) << "duplicate " << p;
  }
}

TEST(Scratch, ScratchArrayFilesArePrivate) {
  TempDir root;
  scratch().configure(root.path(), false);
  auto arr = StoredArray::create_scratch(small_info(), "t");
  EXPECT_TRUE(arr->is_scratch());
  struct stat st;
  ASSERT_EQ(::stat(arr->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Scratch, ScratchFileIsDeletedWithItsLastReference) {
  TempDir root;
  scratch().configure(root.path(), false);
  auto arr = StoredArray::create_scratch(small_info(), "t");
  std::string p = arr->path();
  auto second = arr;
  arr.reset();
  EXPECT_TRUE(exists(p));
  second.reset();
  EXPECT_FALSE(exists(p));
}

TEST(Scratch, ReshapedViewKeepsTheScratchFileAlive) {
  TempDir root;
  scratch().configure(root.path(), false);
  auto base = StoredArray::create_scratch(small_info(), "t");
  std::string p = base->path();
  auto view = StoredArray::reshaped(base, {15});
  EXPECT_EQ(view->path(), p);
  EXPECT_TRUE(view->is_scratch());
  base.reset();
  EXPECT_TRUE(exists(p));
  view.reset();
  EXPECT_FALSE(exists(p));
}

TEST(Scratch, ReleasingAFloatingHandleDeletesItsScratchFile) {
  TempDir root;
  scratch().configure(root.path(), false);
  int32_t h = Registry::instance().add(StoredArray::create_scratch(small_info(), "t"));
  std::string p = Registry::instance().get(h)->path();
  EXPECT_TRUE(exists(p));
  Registry::instance().release_floating(h);
  EXPECT_FALSE(exists(p));
}

TEST(Scratch, AFailedRunFreesItsFloatingArraysOnly) {
  TempDir root;
  scratch().configure(root.path(), false);
  Registry& reg = Registry::instance();
  auto made_in = [&](int64_t run) {
    int32_t h = reg.add(StoredArray::create_scratch(small_info(), "t"));
    reg.made_in_run(h, run);
    return h;
  };
  const int32_t owned = made_in(41), floating = made_in(41), other_run = made_in(42);
  reg.acquire(owned);  // a program output Python took
  const std::string floating_path = reg.get(floating)->path();
  reg.fail_run(41);
  EXPECT_THROW(reg.get(floating), ValueError);
  EXPECT_FALSE(exists(floating_path));
  EXPECT_NO_THROW(reg.get(owned));
  EXPECT_NO_THROW(reg.get(other_run));
  // A call of the failed run that finishes after the failure: its array goes at once.
  const int32_t late = made_in(41);
  EXPECT_THROW(reg.get(late), ValueError);
  reg.release(owned);
  reg.release_floating(other_run);
}

TEST(Scratch, FileCreatedAtAUserPathIsKept) {
  TempDir root;
  std::string p = root.file("kept.npy");
  StoredArray::create_file(p, small_info()).reset();
  EXPECT_TRUE(exists(p));
}

TEST(Scratch, ShutdownRemovesTheProcessFolder) {
  TempDir root;
  scratch().configure(root.path(), false);
  std::string dir = scratch().process_dir();
  ASSERT_TRUE(exists(dir));
  scratch().shutdown();
  EXPECT_FALSE(exists(dir));
  EXPECT_FALSE(scratch().configured());
  EXPECT_THROW(scratch().new_file_path("x"), ValueError);
}

TEST(Scratch, ShutdownAlsoRemovesFoldersOfEarlierRoots) {
  TempDir first_root, second_root;
  scratch().configure(first_root.path(), false);
  std::string first = scratch().process_dir();
  scratch().configure(second_root.path(), false);
  // Arrays may still live in the first folder, so it stays until shutdown.
  EXPECT_TRUE(exists(first));
  scratch().shutdown();
  EXPECT_FALSE(exists(first));
}

TEST(Scratch, ConfigureReclaimsAFolderWhoseLockNobodyHolds) {
  TempDir root;
  std::string dead = make_process_folder(root, "proc-999999-deadbeef");
  scratch().configure(root.path(), false);
  EXPECT_FALSE(exists(dead));
  EXPECT_EQ(scratch().reclaimed_folders(), 1);
}

TEST(Scratch, ConfigureReclaimsTheFolderOfAProcessThatDiedWithoutShutdown) {
  TempDir root, child_root;
  // The parent points elsewhere first: configuring the child's root later
  // must then create a new folder and reclaim.
  scratch().configure(root.path(), false);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      Scratch::instance().configure(child_root.path(), false);
      ::_exit(0);
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed to configure scratch";
  std::vector<path> left;
  for (const auto& e : test::fs::directory_iterator(child_root.path())) left.push_back(e.path());
  ASSERT_EQ(left.size(), 1u) << "the dead child should leave exactly one folder";

  scratch().configure(child_root.path(), false);
  EXPECT_FALSE(exists(left[0]));
  EXPECT_EQ(scratch().reclaimed_folders(), 1);
  EXPECT_TRUE(exists(scratch().process_dir()));
}

TEST(Scratch, ConfigureKeepsAFolderWhoseLockIsHeld) {
  TempDir root;
  std::string live = make_process_folder(root, "proc-1-livelive");
  int fd = ::open((live + "/.lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  scratch().configure(root.path(), false);
  EXPECT_TRUE(exists(live + "/left-over.npy"));
  EXPECT_EQ(scratch().reclaimed_folders(), 0);
  ::close(fd);
}

TEST(Scratch, ConfigureLeavesFoldersWithoutTheProcessPrefixAlone) {
  TempDir root;
  std::string other = make_process_folder(root, "user-data");
  scratch().configure(root.path(), false);
  EXPECT_TRUE(exists(other + "/left-over.npy"));
  EXPECT_EQ(scratch().reclaimed_folders(), 0);
}

TEST(Scratch, ConfigureKeepsTheFoldersOfEarlierRootsOfThisProcess) {
  TempDir root, other_root;
  scratch().configure(root.path(), false);
  std::string first = scratch().process_dir();
  scratch().configure(other_root.path(), false);
  // Coming back to the first root must not mistake our own retired folder,
  // still locked by us, for a dead process's.
  scratch().configure(root.path(), false);
  EXPECT_TRUE(exists(first));
  EXPECT_EQ(scratch().reclaimed_folders(), 0);
}

TEST(Scratch, ConfigureLeavesUnmarkedFoldersNamedLikeJasksAlone) {
  TempDir root;
  // A user's own folders, named like Jask's, locked or not, live or dead pid.
  std::string with_lock = make_process_folder(root, "proc-results", false);
  std::string dead_staging = make_process_folder(root, ".staging-999999-userdata", false);
  std::string wrong_marker = make_process_folder(root, "proc-999999-aaaaaaaa", false);
  const std::string text = scratch_marker_text("999999-bbbbbbbb");  // another folder's marker
  test::write_file_bytes(wrong_marker + "/" + kScratchMarkerName,
                         std::vector<char>(text.begin(), text.end()));
  scratch().configure(root.path(), false);
  for (const std::string& dir : {with_lock, dead_staging, wrong_marker}) {
    EXPECT_TRUE(exists(dir + "/left-over.npy")) << dir;
  }
  EXPECT_EQ(scratch().reclaimed_folders(), 0);
}

TEST(Scratch, ConfigureNeverFollowsASymlinkNamedLikeAFolderOfJasks) {
  TempDir root, elsewhere;
  // The target looks exactly like an abandoned folder of Jask's.
  std::string target = make_process_folder(elsewhere, "proc-999999-cccccccc");
  test::fs::create_directory_symlink(target, root.file("proc-999999-cccccccc"));
  scratch().configure(root.path(), false);
  EXPECT_TRUE(exists(target + "/left-over.npy"));
  EXPECT_TRUE(test::fs::is_symlink(root.file("proc-999999-cccccccc")));
  EXPECT_EQ(scratch().reclaimed_folders(), 0);
}

TEST(Scratch, ReclaimingRemovesASymlinkInsideAFolderButNotItsTarget) {
  TempDir root, elsewhere;
  std::string dead = make_process_folder(root, "proc-999999-dddddddd");
  std::string precious = elsewhere.file("precious");
  test::fs::create_directory(precious);
  test::write_file_bytes(precious + "/data", {'y'});
  test::fs::create_directory_symlink(precious, dead + "/link");
  scratch().configure(root.path(), false);
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(precious + "/data"));
  EXPECT_EQ(scratch().reclaimed_folders(), 1);
}

TEST(Scratch, ConfigureReclaimsAMarkedStagingFolderOfADeadProcess) {
  TempDir root;
  std::string dead = make_process_folder(root, ".staging-999999-eeeeeeee");
  scratch().configure(root.path(), false);
  EXPECT_FALSE(exists(dead));
  EXPECT_EQ(scratch().reclaimed_folders(), 1);
}

TEST(Scratch, AnEmptyRootIsAValueError) {
  EXPECT_THROW(scratch().configure("", false), ValueError);
}

TEST(Scratch, ANewRootIsPrivateWhateverTheUmask) {
  TempDir base;
  const mode_t saved = ::umask(0);
  const std::string root = base.file("a/b");
  try {
    scratch().configure(root, false);
  } catch (...) {
    ::umask(saved);
    throw;
  }
  ::umask(saved);
  for (const std::string& dir : {base.file("a"), root, scratch().process_dir()}) {
    struct stat st;
    ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << dir;
  }
  scratch().shutdown();
}

bool shm_is_tmpfs() { return test::fs::is_directory("/dev/shm") && is_ram_backed("/dev/shm"); }

TEST(Scratch, RefusesATmpfsRootUnlessAllowed) {
  if (!shm_is_tmpfs()) GTEST_SKIP() << "/dev/shm is missing or not tmpfs";
  TempDir disk_root, shm_root("/dev/shm");
  scratch().configure(disk_root.path(), false);
  std::string before = scratch().process_dir();
  try {
    scratch().configure(shm_root.path(), false);
    ADD_FAILURE() << "a tmpfs scratch root was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(shm_root.path()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allow_tmpfs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(scratch().process_dir(), before) << "a refused configure must keep the old folder";

  scratch().configure(shm_root.path(), true);
  EXPECT_EQ(path(scratch().process_dir()).parent_path(), path(shm_root.path()));
  scratch().shutdown();
}

TEST(Scratch, IsRamBackedTellsDiskFromMemory) {
  std::string disk = test::disk_temp_base();
  ASSERT_FALSE(disk.empty()) << "no writable folder on disk";
  EXPECT_FALSE(is_ram_backed(disk));
  if (shm_is_tmpfs()) {
    EXPECT_TRUE(is_ram_backed("/dev/shm"));
  }
  EXPECT_THROW(is_ram_backed("/no/such/folder/anywhere"), IoError);
}

}  // namespace
}  // namespace jask
