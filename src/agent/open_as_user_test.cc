#include "agent/open_as_user.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "agent/data/test_dir.h"

namespace hangar::agent {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kAlice = 61001;
constexpr gid_t kTeam = 61010;

// A root of allowed folders, reachable by every account, as a shared filesystem would be.
class OpenAsUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/shared";
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
  }
  std::string Write(const std::string& name, const std::string& content, mode_t mode,
                    gid_t gid = 0) {
    const std::string p = root_ + "/" + name;
    std::ofstream(p) << content;
    EXPECT_EQ(::chown(p.c_str(), 0, gid), 0);
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p;
  }
  StatusOr<OpenedPath> Open(const std::string& path, std::optional<TaskCredentials> who) {
    return OpenAsUser(path, who, {root_}, OpenFor::kReading, "data.file_roots", "file://" + path);
  }
  static std::string Read(const OpenedPath& f) {
    char buf[256];
    const ssize_t n = ::pread(f.fd(), buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }
  data::TempDir dir_{0755};
  std::string root_;
  TaskCredentials alice_ = CredentialsFromIds(kAlice, kAlice, {});
};

TEST(PathUnderTest, AFolderHoldsItselfAndWhatIsBelowItOnly) {
  EXPECT_TRUE(PathUnder("/data", "/data"));
  EXPECT_TRUE(PathUnder("/data/x/y", "/data/"));
  EXPECT_FALSE(PathUnder("/database", "/data"));
  EXPECT_FALSE(PathUnder("/etc", "/data"));
  EXPECT_TRUE(PathUnder("/etc", "/"));
}

TEST_F(OpenAsUserTest, AFileTheUserCannotReadGetsTheSameSentenceAsOneThatDoesNotExist) {
  const std::string secret = Write("secret", "root only", 0600);
  const std::string link = root_ + "/shadow";
  ASSERT_EQ(::symlink("/etc/shadow", link.c_str()), 0);
  const std::string missing = root_ + "/missing";
  auto with_x = [](std::string message, const std::string& path) {
    for (size_t at; (at = message.find(path)) != std::string::npos;)
      message.replace(at, path.size(), "X");
    return message;
  };
  std::string first;
  for (const std::string& path : {secret, link, missing}) {
    auto f = Open(path, alice_);
    ASSERT_FALSE(f.ok()) << path;
    EXPECT_EQ(f.status().code(), StatusCode::kNotFound) << path;
    EXPECT_EQ(f.status().message(),
              "file://" + path + ": not readable by uid 61001 (or does not exist)");
    if (first.empty()) first = with_x(f.status().message(), path);
    EXPECT_EQ(with_x(f.status().message(), path), first) << "nothing tells these apart";
  }
  // The agent's own user (no run_as) reads it: only the user's rights are narrower.
  auto as_agent = Open(secret, std::nullopt);
  ASSERT_TRUE(as_agent.ok()) << as_agent.status().message();
  EXPECT_EQ(Read(*as_agent), "root only");
}

TEST_F(OpenAsUserTest, AFileTheUserCanReadOpensAndItsGroupsCount) {
  auto open = Open(Write("open", "for all", 0644), alice_);
  ASSERT_TRUE(open.ok()) << open.status().message();
  EXPECT_EQ(Read(*open), "for all");
  EXPECT_EQ(open->resolved(), root_ + "/open");
  const std::string team = Write("team", "for the team", 0640, kTeam);
  EXPECT_FALSE(Open(team, alice_).ok());
  auto member = Open(team, CredentialsFromIds(kAlice, kAlice, {kTeam}));
  ASSERT_TRUE(member.ok()) << member.status().message();
  EXPECT_EQ(Read(*member), "for the team");
}

TEST_F(OpenAsUserTest, EveryFolderOnTheWayIsCheckedAsTheUser) {
  const std::string closed = root_ + "/closed";
  ASSERT_EQ(::mkdir(closed.c_str(), 0700), 0);
  std::ofstream(closed + "/inside") << "world-readable file in a closed folder";
  ::chmod((closed + "/inside").c_str(), 0644);
  auto f = Open(closed + "/inside", alice_);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("not readable by uid 61001 (or does not exist)"));
}

TEST_F(OpenAsUserTest, ALinkLeadingOutOfTheRootsIsRefusedWhereItLeads) {
  const std::string link = root_ + "/passwd";
  ASSERT_EQ(::symlink("/etc/passwd", link.c_str()), 0);
  auto f = Open(link, alice_);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(f.status().message(),
              HasSubstr("file://" + link +
                        " resolves to /etc/passwd, which is not under a folder "
                        "this cluster allows (data.file_roots: " +
                        root_ + ")"));
  // A link that stays inside is followed.
  const std::string target = Write("real", "x", 0644);
  ASSERT_EQ(::symlink(target.c_str(), (root_ + "/alias").c_str()), 0);
  auto alias = Open(root_ + "/alias", alice_);
  ASSERT_TRUE(alias.ok()) << alias.status().message();
  EXPECT_EQ(alias->resolved(), target);
}

TEST_F(OpenAsUserTest, APathSpelledOutsideTheRootsIsNotTried) {
  for (const std::string& path : {std::string("/etc/passwd"), root_ + "/../../../etc/passwd"}) {
    auto f = Open(path, std::nullopt);
    ASSERT_FALSE(f.ok()) << path;
    EXPECT_EQ(f.status().code(), StatusCode::kPermissionDenied);
    EXPECT_THAT(f.status().message(), HasSubstr("is not under a folder this cluster allows"));
    EXPECT_THAT(f.status().message(),
                HasSubstr("ask an admin to add its folder to data.file_roots in cluster.yaml"));
  }
  auto none = OpenAsUser("/etc/passwd", std::nullopt, {}, OpenFor::kReading, "data.file_roots",
                         "file:///etc/passwd");
  EXPECT_THAT(none.status().message(), HasSubstr("none: cluster.yaml sets no data.file_roots"));
}

TEST_F(OpenAsUserTest, AFifoIsNotAFileAndDoesNotHang) {
  const std::string fifo = root_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  auto f = Open(fifo, alice_);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("is not a regular file"));
}

TEST_F(OpenAsUserTest, AFolderOpensForMounting) {
  const std::string folder = root_ + "/models";
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  auto f = OpenAsUser(folder, alice_, {root_}, OpenFor::kMounting, "containers.mounts_allowed",
                      "mount " + folder);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->resolved(), folder);
}

}  // namespace
}  // namespace hangar::agent
