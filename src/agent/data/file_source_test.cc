// A file:// artifact source is read as the job's user, only under the cluster's file roots, and
// a file the user cannot read fails its staging with the sentence a missing one gets: no size,
// no digest, nothing staged. (The attack: name /etc/shadow with a wrong size, learn its size
// from the error; with a wrong digest, learn its digest; then stage it.)
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/data/stager.h"
#include "agent/data/test_dir.h"

namespace hangar::agent::data {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class FileSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/shared";
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
    ASSERT_TRUE(cache_.Init(1).ok());
  }
  std::string Write(const std::string& name, const std::string& content, mode_t mode) {
    const std::string p = root_ + "/" + name;
    std::ofstream(p) << content;
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p;
  }
  static std::string DigestOf(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    auto d = Sha256OfFile(fd, static_cast<int64_t>(std::filesystem::file_size(path)));
    ::close(fd);
    return *d;
  }
  pb::ArtifactStage Plan(const std::string& path, const std::string& digest, int64_t bytes) {
    pb::ArtifactStage s;
    s.set_digest(digest);
    s.set_source("file://" + path);
    s.set_bytes(bytes);
    s.set_chunk_bytes(1 << 20);
    s.add_file_roots(root_);
    return s;
  }
  bool NothingStaged() {
    return cache_.Objects().empty() && std::filesystem::is_empty(cache_.dir() + "/partial") &&
           std::filesystem::is_empty(cache_.dir() + "/objects");
  }
  TempDir dir_{0755};
  std::string root_;
  ObjectCache cache_{dir_.path() + "/cache", 0};
  SystemClock clock_;
  std::atomic<bool> stop_{false};
  Stager stager_{&cache_, [] { return "t"; }, &clock_};
  std::optional<TaskCredentials> alice_ = CredentialsFromIds(61001, 61001, {});
};

TEST_F(FileSourceTest, TheThreeTriesAttackLearnsNothingAndStagesNothing) {
  const std::string secret = Write("node.key", "-----BEGIN PRIVATE KEY----- root's", 0600);
  const std::string shadow = root_ + "/shadow";
  ASSERT_EQ(::symlink("/etc/shadow", shadow.c_str()), 0);
  const std::string missing = root_ + "/missing";
  const std::string zeros = "sha256:" + std::string(64, '0');
  for (const std::string& path : {secret, shadow, missing}) {
    // Try 1, a wrong size; try 2, the right size (if it were learnt) and a wrong digest.
    for (int64_t bytes :
         {int64_t{1}, static_cast<int64_t>(
                          std::filesystem::exists(path) ? std::filesystem::file_size(path) : 1)}) {
      StageOutcome out = stager_.Stage(Plan(path, zeros, bytes), alice_, &stop_);
      ASSERT_FALSE(out.ok) << path;
      EXPECT_EQ(out.message, "artifact " + zeros + ": file://" + path +
                                 ": not readable by uid 61001 (or does not exist)");
      EXPECT_THAT(out.message, Not(HasSubstr("bytes")));
      EXPECT_THAT(out.message, Not(HasSubstr("hashes to")));
      EXPECT_TRUE(NothingStaged()) << path;
    }
  }
  // Try 3, the right digest (had it been learnt): still nothing.
  StageOutcome third = stager_.Stage(
      Plan(secret, DigestOf(secret), static_cast<int64_t>(std::filesystem::file_size(secret))),
      alice_, &stop_);
  EXPECT_FALSE(third.ok);
  EXPECT_TRUE(NothingStaged());
}

TEST_F(FileSourceTest, AFileTheUserCanReadUnderARootStages) {
  const std::string open = Write("weights.bin", std::string(3'000'001, 'w'), 0644);
  StageOutcome out = stager_.Stage(Plan(open, DigestOf(open), 3'000'001), alice_, &stop_);
  ASSERT_TRUE(out.ok) << out.message;
  EXPECT_EQ(out.origin_bytes, 3'000'001);
  EXPECT_TRUE(cache_.Holds(DigestOf(open)));
  // Facts about a file the user can read are theirs to learn.
  const std::string other = Write("other.bin", "abc", 0644);
  StageOutcome sized = stager_.Stage(Plan(other, DigestOf(other), 4), alice_, &stop_);
  EXPECT_THAT(sized.message, HasSubstr("is 3 bytes, not the 4 the job's size says"));
}

TEST_F(FileSourceTest, OnlyUnderTheRootsTheControllerSent) {
  StageOutcome out =
      stager_.Stage(Plan("/etc/passwd", "sha256:" + std::string(64, '0'), 1), std::nullopt, &stop_);
  ASSERT_FALSE(out.ok);
  EXPECT_THAT(
      out.message,
      HasSubstr("file:///etc/passwd is not under a folder this cluster allows (data.file_roots: " +
                root_ + ")"));
  EXPECT_TRUE(NothingStaged());
}

}  // namespace
}  // namespace hangar::agent::data
