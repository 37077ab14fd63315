// recorder/disk_reserve.h: the space held back for the stop reason is a nameless file in the trace's directory,
// held until given back. (That giving it back lets the reason fit on a full disk: tests/reliability/test_disk_full.py.)
#include "recorder/disk_reserve.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace gmt::recorder {
namespace {

std::vector<std::string> entries_of(const std::string& directory) {
  std::vector<std::string> names;
  DIR* dir = opendir(directory.c_str());
  if (!dir) return names;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  return names;
}

int open_descriptors() { return static_cast<int>(entries_of("/proc/self/fd").size()); }

class DiskReserveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gmt-disk-reserve-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
  }
  void TearDown() override { rmdir(directory_.c_str()); }
  std::string directory_;
};

TEST_F(DiskReserveTest, HoldsANamelessFileBesideTheTraceUntilGivenBack) {
  const int before = open_descriptors();
  DiskReserve reserve;
  ASSERT_TRUE(reserve.hold_beside(directory_ + "/t.db"));
  EXPECT_TRUE(reserve.held());
  EXPECT_EQ(open_descriptors(), before + 1);
  EXPECT_TRUE(entries_of(directory_).empty());  // nothing a kill could leave behind
  EXPECT_TRUE(reserve.release());
  EXPECT_FALSE(reserve.held());
  EXPECT_EQ(open_descriptors(), before);
  EXPECT_FALSE(reserve.release());  // once only
}

TEST_F(DiskReserveTest, HoldsItsSizeOnDisk) {
  DiskReserve reserve;
  ASSERT_TRUE(reserve.hold_beside(directory_ + "/t.db"));
  // The descriptor is the newest one: find it through /proc and read its size and the blocks given to it.
  bool found = false;
  for (const std::string& name : entries_of("/proc/self/fd")) {
    struct stat st {};
    char target[512] = {};
    const std::string link = "/proc/self/fd/" + name;
    ssize_t length = readlink(link.c_str(), target, sizeof target - 1);
    if (length <= 0 || std::string(target).rfind(directory_ + "/", 0) != 0 || stat(link.c_str(), &st) != 0) continue;
    found = true;
    EXPECT_EQ(st.st_size, static_cast<off_t>(DiskReserve::kBytes));
    EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, DiskReserve::kBytes);  // allocated, not a sparse file
  }
  EXPECT_TRUE(found);
}

TEST_F(DiskReserveTest, NoDirectoryNoReserve) {
  DiskReserve reserve;
  EXPECT_FALSE(reserve.hold_beside(directory_ + "/missing/t.db"));
  EXPECT_FALSE(reserve.held());
}

}  // namespace
}  // namespace gmt::recorder
