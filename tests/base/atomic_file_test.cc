// Crash-safe writes: the target is always either the old file or the complete new one, also
// when the writer is killed with SIGKILL at a random point of a write.
#include "base/atomic_file.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace gearbox {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(GEARBOX_TEST_TMP) / ("atomic_file_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

size_t count_entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, WritesAndReplaces) {
  fs::path dir = fresh_dir("replace");
  std::string target = (dir / "out.bin").string();
  ASSERT_TRUE(write_file_atomically(target, "first").ok());
  EXPECT_EQ(read_all(target), "first");
  ASSERT_TRUE(write_file_atomically(target, "second, longer").ok());
  EXPECT_EQ(read_all(target), "second, longer");
  EXPECT_EQ(count_entries(dir), 1u) << "a temporary file was left behind";
}

TEST(AtomicFile, UncommittedWriteLeavesTheOldFile) {
  fs::path dir = fresh_dir("abandon");
  std::string target = (dir / "out.bin").string();
  ASSERT_TRUE(write_file_atomically(target, "old").ok());
  {
    AtomicFile f;
    ASSERT_TRUE(f.open(target).ok());
    ASSERT_TRUE(f.write("new but never committed").ok());
  }
  EXPECT_EQ(read_all(target), "old");
  EXPECT_EQ(count_entries(dir), 1u);
}

TEST(AtomicFile, MissingFolderIsFileWriteFailed) {
  fs::path dir = fresh_dir("missing");
  std::string target = (dir / "no_such_folder" / "out.bin").string();
  Status s = write_file_atomically(target, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::FILE_WRITE_FAILED);
  EXPECT_NE(s.message().find("no_such_folder"), std::string::npos) << s.to_string();
}

// A child process rewrites the target in a loop, alternating two large contents; it is killed
// with SIGKILL at a random moment. Whatever moment that is, the target must be exactly one of
// the two contents (a plain truncate-and-write fails this within a few rounds).
TEST(AtomicFile, SurvivesKillNineAtRandomPoints) {
  fs::path dir = fresh_dir("kill");
  std::string target = (dir / "model.gbm").string();
  const std::string a(2 << 20, 'A');
  const std::string b(3 << 20, 'B');
  ASSERT_TRUE(write_file_atomically(target, a).ok());
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int i = 0;; ++i) {
        if (!write_file_atomically(target, (i % 2) ? a : b).ok()) _exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(1000 + rng() % 50000));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the writer exited by itself (status " << wstatus << ")";
    std::string got = read_all(target);
    ASSERT_TRUE(got == a || got == b) << "round " << round << ": target holds " << got.size()
                                      << " bytes, neither the old nor the new file";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gearbox
