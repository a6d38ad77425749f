// Recycled scratch files: an op that overwrites its whole output gets the
// file of a freed array (same inode, resized, new header), an op relying on
// zeros never does, and the pool never holds more bytes than live arrays.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "storage/array_store.hpp"
#include "storage/scratch_pool.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::ScratchDir;

ino_t inode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A scratch float32 array of n elements, every one written as `value`.
ArrayRef written_array(int64_t n, float value,
                       ScratchContents contents = ScratchContents::kOverwritten) {
  ArrayRef a = StoredArray::create_scratch(ArrayInfo{DType::f32, {n}}, "pool_test", contents);
  std::vector<float> values(static_cast<size_t>(n), value);
  a->write_elems(values.data(), 0, n);
  return a;
}

std::vector<float> values_of(const StoredArray& a) {
  std::vector<float> out(static_cast<size_t>(a.info().numel()));
  a.read_elems(out.data(), 0, a.info().numel());
  return out;
}

class ScratchPoolTest : public testing::Test {
 protected:
  ScratchPoolTest() { ScratchPool::instance().set_enabled(true); }
  ~ScratchPoolTest() override { ScratchPool::instance().set_enabled(true); }
  ScratchPool& pool = ScratchPool::instance();
  ScratchDir scratch;  // a new folder: configure() empties the pool
};

TEST_F(ScratchPoolTest, AnOverwritingOpGetsTheFileOfAFreedArray) {
  ArrayRef keep = written_array(5000, 1.0f);  // live bytes the pool may match
  ArrayRef old = written_array(5000, 2.0f);
  const std::string old_path = old->path();
  const ino_t old_inode = inode_of(old_path);
  old.reset();
  EXPECT_FALSE(exists(old_path));
  EXPECT_EQ(pool.stats().pooled_files, 1u);

  const uint64_t reused = pool.stats().reused_files;
  ArrayRef next = StoredArray::create_scratch(ArrayInfo{DType::f32, {50, 100}}, "next",
                                              ScratchContents::kOverwritten);
  EXPECT_EQ(inode_of(next->path()), old_inode);
  EXPECT_EQ(pool.stats().reused_files, reused + 1);
  EXPECT_EQ(pool.stats().pooled_files, 0u);
  // A valid .npy of the new shape: reopening it reads the new header.
  std::vector<float> values(5000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  next->write_elems(values.data(), 0, 5000);
  ArrayRef reopened = test::open_npy(next->path(), false);
  EXPECT_EQ(reopened->info().shape, (std::vector<int64_t>{50, 100}));
  EXPECT_EQ(values_of(*reopened), values);
}

TEST_F(ScratchPoolTest, AnOpRelyingOnZerosGetsANewFile) {
  ArrayRef keep = written_array(4096, 1.0f);
  ArrayRef old = written_array(4096, 7.0f);
  const ino_t old_inode = inode_of(old->path());
  old.reset();
  ArrayRef zeros = StoredArray::create_scratch(ArrayInfo{DType::f32, {4096}}, "zeros");
  EXPECT_NE(inode_of(zeros->path()), old_inode);
  EXPECT_EQ(values_of(*zeros), std::vector<float>(4096, 0.0f));
  EXPECT_EQ(pool.stats().pooled_files, 1u) << "the freed file waits for an overwriting op";
}

TEST_F(ScratchPoolTest, ThePoolHoldsNoMoreBytesThanLiveArrays) {
  ArrayRef only = written_array(3000, 1.0f);
  const std::string path = only->path();
  only.reset();  // nothing else is live: recycling it could only grow scratch
  EXPECT_EQ(pool.stats().pooled_files, 0u);
  EXPECT_FALSE(exists(path));

  ArrayRef small = written_array(1000, 1.0f);
  ArrayRef big = written_array(100000, 1.0f);
  big.reset();  // larger than what stays live
  EXPECT_EQ(pool.stats().pooled_files, 0u);

  ArrayRef other = written_array(1000, 1.0f);
  other.reset();  // pooled: `small` is as large
  ASSERT_EQ(pool.stats().pooled_files, 1u);
  small.reset();  // now nothing is live, so the pooled file goes too
  EXPECT_EQ(pool.stats().pooled_files, 0u);
  EXPECT_EQ(pool.stats().pooled_bytes, 0u);
}

TEST_F(ScratchPoolTest, FilesMoreThanTwiceTheSizeAreLeftForLargerOutputs) {
  ArrayRef keep = written_array(100000, 1.0f);
  ArrayRef big = written_array(20000, 1.0f);
  const ino_t big_inode = inode_of(big->path());
  big.reset();
  ArrayRef tiny = StoredArray::create_scratch(ArrayInfo{DType::f32, {1000}}, "tiny",
                                              ScratchContents::kOverwritten);
  EXPECT_NE(inode_of(tiny->path()), big_inode);
  ArrayRef close = StoredArray::create_scratch(ArrayInfo{DType::f32, {15000}}, "close",
                                               ScratchContents::kOverwritten);
  EXPECT_EQ(inode_of(close->path()), big_inode);
  struct stat st;
  ASSERT_EQ(::stat(close->path().c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), close->data_offset() + close->info().nbytes())
      << "shrunk to fit";
}

TEST_F(ScratchPoolTest, AWrittenFileIsPreferredToASparseOneOfTheSameSize) {
  ArrayRef keep = written_array(100000, 1.0f);
  ArrayRef sparse =
      StoredArray::create_scratch(ArrayInfo{DType::f32, {40000}}, "sparse");  // never written
  ArrayRef written = written_array(40000, 3.0f);
  const ino_t written_inode = inode_of(written->path());
  written.reset();
  sparse.reset();  // freed last, and the first a size-only choice would take
  ASSERT_EQ(pool.stats().pooled_files, 2u);
  ArrayRef next = StoredArray::create_scratch(ArrayInfo{DType::f32, {40000}}, "next",
                                              ScratchContents::kOverwritten);
  EXPECT_EQ(inode_of(next->path()), written_inode);
}

TEST_F(ScratchPoolTest, DisablingDeletesPooledFilesAndStopsRecycling) {
  ArrayRef keep = written_array(2048, 1.0f);
  ArrayRef old = written_array(2048, 1.0f);
  old.reset();
  ASSERT_EQ(pool.stats().pooled_files, 1u);
  pool.set_enabled(false);
  EXPECT_EQ(pool.stats().pooled_files, 0u);
  ArrayRef again = written_array(2048, 1.0f);
  const std::string path = again->path();
  again.reset();
  EXPECT_EQ(pool.stats().pooled_files, 0u);
  EXPECT_FALSE(exists(path));
}

TEST_F(ScratchPoolTest, MovingScratchElsewhereEmptiesThePool) {
  ArrayRef keep = written_array(2048, 1.0f);
  ArrayRef old = written_array(2048, 1.0f);
  old.reset();
  ASSERT_EQ(pool.stats().pooled_files, 1u);
  ScratchDir elsewhere;
  EXPECT_EQ(pool.stats().pooled_files, 0u);
}

}  // namespace
}  // namespace jask
