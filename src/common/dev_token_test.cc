#include "common/dev_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

namespace hangar::dev_token {
namespace {

namespace fs = std::filesystem;

class DevTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dev_token_test." + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "run");
    old_ = std::getenv("XDG_RUNTIME_DIR") ? std::getenv("XDG_RUNTIME_DIR") : "";
    setenv("XDG_RUNTIME_DIR", (dir_ / "run").c_str(), 1);
  }
  void TearDown() override {
    if (old_.empty())
      unsetenv("XDG_RUNTIME_DIR");
    else
      setenv("XDG_RUNTIME_DIR", old_.c_str(), 1);
    fs::remove_all(dir_);
  }
  static unsigned ModeOf(const fs::path& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 ? st.st_mode & 0777 : 01000;
  }
  fs::path dir_;
  std::string old_;
};

TEST_F(DevTokenTest, ATokenIs256RandomBits) {
  const std::string a = Make(), b = Make();
  EXPECT_TRUE(std::regex_match(a, std::regex("hgr_dev_[0-9a-f]{64}"))) << a;
  EXPECT_NE(a, b);
}

TEST_F(DevTokenTest, APrivateFileIsReadableByItsAccountOnly) {
  const fs::path f = dir_ / "dev-token";
  std::ofstream(f) << "old\n";
  fs::permissions(f, fs::perms(0644));
  ASSERT_TRUE(WritePrivateFile(f, "hgr_dev_x\n").ok());
  EXPECT_EQ(ModeOf(f), 0600u);
  EXPECT_EQ(*ReadPrivateFile(f), "hgr_dev_x");
  // One that others may read is not taken, and says how to fix it.
  fs::permissions(f, fs::perms(0640));
  auto shared = ReadPrivateFile(f);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("chmod 600"), std::string::npos)
      << shared.status().message();
}

TEST_F(DevTokenTest, ALinkPlantedWhereTheTokenGoesIsReplacedNotFollowed) {
  const fs::path target = dir_ / "elsewhere", link = dir_ / "dev-token";
  std::ofstream(target) << "untouched\n";
  fs::create_symlink(target, link);
  ASSERT_TRUE(WritePrivateFile(link, "hgr_dev_y\n").ok());
  EXPECT_FALSE(fs::is_symlink(link));
  std::ifstream in(target);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "untouched");
  // And a link is not read through either.
  fs::remove(link);
  fs::create_symlink(target, link);
  fs::permissions(target, fs::perms(0600));
  EXPECT_FALSE(ReadPrivateFile(link).ok());
}

TEST_F(DevTokenTest, TheCliFindsTheRecordByTheLoopbackPortItCalls) {
  ASSERT_TRUE(WriteRecord(18080, "hgr_dev_abc", getpid()).ok());
  const fs::path record = dir_ / "run/hangar/dev/18080.token";
  EXPECT_EQ(ModeOf(record), 0600u);
  EXPECT_EQ(ModeOf(dir_ / "run/hangar/dev"), 0700u);
  for (const char* url : {"http://127.0.0.1:18080", "127.0.0.1:18080", "https://localhost:18080/",
                          "http://[::1]:18080"}) {
    EXPECT_EQ(FindForServer(url).value_or(""), "hgr_dev_abc") << url;
  }
  // Never sent anywhere but loopback, and only to its own port.
  for (const char* url :
       {"http://10.0.0.1:18080", "http://127.0.0.1.evil.example:18080", "http://127.0.0.1:18081",
        "http://127.0.0.1", "http://localhost.example:18080"}) {
    EXPECT_FALSE(FindForServer(url)) << url;
  }
  RemoveRecord(18080, getpid() + 1);  // another run's: kept
  EXPECT_TRUE(fs::exists(record));
  RemoveRecord(18080, getpid());
  EXPECT_FALSE(fs::exists(record));
  EXPECT_FALSE(FindForServer("http://127.0.0.1:18080"));
}

TEST_F(DevTokenTest, ARecordOfARunThatEndedIsNotUsedAndIsPrunedByTheNext) {
  const pid_t ended = fork();
  if (ended == 0) _exit(0);
  waitpid(ended, nullptr, 0);
  ASSERT_TRUE(WriteRecord(18090, "hgr_dev_old", ended).ok());
  EXPECT_FALSE(FindForServer("http://127.0.0.1:18090"));
  ASSERT_TRUE(WriteRecord(18091, "hgr_dev_new", getpid()).ok());
  EXPECT_FALSE(fs::exists(dir_ / "run/hangar/dev/18090.token"));
  EXPECT_EQ(FindForServer("http://127.0.0.1:18091").value_or(""), "hgr_dev_new");
}

}  // namespace
}  // namespace hangar::dev_token
