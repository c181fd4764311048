// A container's mount source is opened as the task's user, checked where its links lead, and
// mounted by what was checked: a link out of the allowed folders is refused, and a folder swapped
// for a link after the check changes nothing.
#include "agent/container/mount_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/data/test_dir.h"

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class MountSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    allowed_ = dir_.path() + "/data";
    pins_ = dir_.path() + "/pins";
    outside_ = dir_.path() + "/outside";
    for (const auto& d : {allowed_, pins_, outside_}) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
    std::ofstream(outside_ + "/secret") << "outside";
  }
  void TearDown() override { UnpinMounts(pins_); }
  StatusOr<std::string> Pin(const std::string& host, const std::string& at) {
    return PinMountSource(host, alice_, {allowed_}, pins_ + "/" + at, "mount " + host + ":/x");
  }
  data::TempDir dir_{0755};
  std::string allowed_, pins_, outside_;
  std::optional<TaskCredentials> alice_ = CredentialsFromIds(61001, 61001, {});
};

TEST_F(MountSourceTest, ALinkOutOfTheAllowedFoldersIsRefused) {
  const std::string link = allowed_ + "/escape";
  ASSERT_EQ(::symlink(outside_.c_str(), link.c_str()), 0);
  auto pinned = Pin(link, "0");
  ASSERT_FALSE(pinned.ok());
  EXPECT_EQ(pinned.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(pinned.status().message(),
              HasSubstr("mount " + link + ":/x resolves to " + outside_ +
                        ", which is not under a folder this cluster allows "
                        "(containers.mounts_allowed: " +
                        allowed_ + ")"));
  const std::string etc = allowed_ + "/etc";
  ASSERT_EQ(::symlink("/etc", etc.c_str()), 0);
  EXPECT_FALSE(Pin(etc, "1").ok());
  EXPECT_FALSE(fs::exists(pins_ + "/0"));
  EXPECT_FALSE(Pin("/etc", "2").ok()) << "spelled outside";
}

TEST_F(MountSourceTest, WhatIsMountedIsWhatWasCheckedEvenIfTheFolderIsSwappedForALink) {
  const std::string run = allowed_ + "/run7";
  ASSERT_EQ(::mkdir(run.c_str(), 0755), 0);
  std::ofstream(run + "/file") << "checked";
  auto pinned = Pin(run, "0");
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  // The user swaps their folder for a link to somewhere else, after the check.
  ASSERT_EQ(::rename(run.c_str(), (run + ".old").c_str()), 0);
  ASSERT_EQ(::symlink(outside_.c_str(), run.c_str()), 0);
  EXPECT_EQ(ReadFile(*pinned + "/file"), "checked");
  EXPECT_FALSE(fs::exists(*pinned + "/secret"));
  UnpinMounts(pins_);
  EXPECT_FALSE(fs::exists(pins_));
  EXPECT_EQ(ReadFile(run + ".old/file"), "checked") << "unpinning leaves the source alone";
}

TEST_F(MountSourceTest, ASourceTheUserCannotReachIsRefusedLikeAMissingOne) {
  const std::string closed = allowed_ + "/root-only";
  ASSERT_EQ(::mkdir(closed.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((closed + "/inner").c_str(), 0755), 0);
  auto hidden = Pin(closed + "/inner", "0");
  auto missing = Pin(allowed_ + "/missing", "1");
  ASSERT_FALSE(hidden.ok());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(hidden.status().message(),
              HasSubstr("inner:/x: not reachable by uid 61001 (or does not exist)"));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("missing:/x: not reachable by uid 61001 (or does not exist)"));
  // A single file may be mounted too.
  std::ofstream(allowed_ + "/config.yaml") << "k: v";
  auto file = Pin(allowed_ + "/config.yaml", "2");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(ReadFile(*file), "k: v");
}

}  // namespace
}  // namespace hangar::agent
