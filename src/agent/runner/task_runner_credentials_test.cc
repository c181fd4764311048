// Tasks run as their user (issue 16): the credential switch in the task's process, what the
// runner gives that user (output files, a fresh workdir), and what an agent that is not root may
// do. The switches need root; they are skipped otherwise. No account is created: the uids have
// no passwd entry, which the kernel does not need.
#include <grp.h>
#include <sys/stat.h>

#include "agent/runner/task_credentials.h"
#include "agent/runner/task_runner.h"
#include "agent/runner/task_runner_fixture.h"

namespace hangar::agent {
namespace {

using namespace runner_testing;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uid_t kUid = 61001;
constexpr gid_t kGid = 61002;

struct Owner {
  uid_t uid;
  gid_t gid;
  mode_t mode;
};

Owner OwnerOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return {st.st_uid, st.st_gid, static_cast<mode_t>(st.st_mode & 07777)};
}

class TaskCredentialsTest : public TaskRunnerTest {
 protected:
  void SetUp() override {
    TaskRunnerTest::SetUp();
    // The task's user must be able to walk to its workdir, as on a node (/var/lib/hangar).
    ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
  }
  static bool Root() { return geteuid() == 0; }
};

TEST_F(TaskCredentialsTest, RunsTheTaskAsItsUserWithItsGroupsAndNoCapabilities) {
  if (!Root()) GTEST_SKIP() << "switching users needs root";
  // Something of the agent's that the task's user must not read.
  const fs::path secret = dir_ / "agent-secret";
  std::ofstream(secret) << "the agent's\n";
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);

  TaskRunner& runner = NewRunner({"", false});
  TaskLaunch launch =
      Shell("61.0.0",
            "grep -E '^(Uid|Gid|Groups|CapEff):' /proc/self/status; id -u; id -g; id -G; "
            "echo \"HOME=$HOME USER=${USER-unset}\"; touch mine; cat " +
                secret.string());
  launch.run_as = CredentialsFromIds(kUid, kGid, {61010, 61011});
  ASSERT_TRUE(runner.Launch(launch).ok());
  TaskExit exit = WaitForExit(runner, "61.0.0");
  EXPECT_EQ(exit.exit_code, 1);  // cat's: the task may not read the agent's file

  const std::string out = ReadFile(launch.stdout_path);
  EXPECT_THAT(out, HasSubstr("Uid:\t61001\t61001\t61001\t61001\n"));  // real, effective, saved, fs
  EXPECT_THAT(out, HasSubstr("Gid:\t61002\t61002\t61002\t61002\n"));
  EXPECT_THAT(out, HasSubstr("Groups:\t61010 61011"));
  EXPECT_THAT(out, HasSubstr("CapEff:\t0000000000000000\n"));
  EXPECT_THAT(out, HasSubstr("\n61001\n61002\n61002 61010 61011\n"));
  // No passwd entry for the uid: HOME is the task's workdir, and no USER is made up.
  EXPECT_THAT(out, HasSubstr("HOME=" + launch.workdir + " USER=unset\n"));
  EXPECT_THAT(ReadFile(launch.stderr_path), HasSubstr("Permission denied"));
  EXPECT_THAT(ReadFile(launch.stderr_path), Not(HasSubstr("the agent's")));

  // Its output is its user's, mode 0600; the workdir the runner made is theirs alone, and what
  // the task made in it belongs to them.
  for (const std::string& file : {launch.stdout_path, launch.stderr_path}) {
    const Owner o = OwnerOf(file);
    EXPECT_EQ(o.uid, kUid) << file;
    EXPECT_EQ(o.gid, kGid) << file;
    EXPECT_EQ(o.mode, 0600) << file;
  }
  const Owner work = OwnerOf(launch.workdir);
  EXPECT_EQ(work.uid, kUid);
  EXPECT_EQ(work.gid, kGid);
  EXPECT_EQ(work.mode, 0700);
  EXPECT_EQ(OwnerOf(fs::path(launch.workdir) / "mine").uid, kUid);
  // The folders above them stay the agent's.
  EXPECT_EQ(OwnerOf(fs::path(launch.stdout_path).parent_path()).uid, 0u);
}

TEST_F(TaskCredentialsTest, AWorkdirThatExistsIsUsedAsItIs) {
  if (!Root()) GTEST_SKIP() << "switching users needs root";
  TaskRunner& runner = NewRunner({"", false});
  TaskLaunch launch = Shell("61.0.1", "pwd; touch here");
  fs::create_directories(launch.workdir);
  ASSERT_EQ(chmod(launch.workdir.c_str(), 0755), 0);
  launch.run_as = CredentialsFromIds(kUid, kGid, {});
  ASSERT_TRUE(runner.Launch(launch).ok());
  EXPECT_EQ(WaitForExit(runner, "61.0.1").exit_code,
            1);  // root's folder: the user may not write there
  EXPECT_EQ(ReadFile(launch.stdout_path), fs::canonical(launch.workdir).string() + "\n");
  const Owner work = OwnerOf(launch.workdir);
  EXPECT_EQ(work.uid, 0u);
  EXPECT_EQ(work.mode, 0755);
}

TEST_F(TaskCredentialsTest, AWorkdirTheUserMayNotEnterFailsTheLaunch) {
  if (!Root()) GTEST_SKIP() << "switching users needs root";
  TaskRunner& runner = NewRunner({"", false});
  TaskLaunch launch = Shell("61.0.2", "true");
  fs::create_directories(launch.workdir);
  ASSERT_EQ(chmod(launch.workdir.c_str(), 0700), 0);  // root's alone
  launch.run_as = CredentialsFromIds(kUid, kGid, {});
  StatusOr<pid_t> pid = runner.Launch(launch);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("cannot enter workdir '" + launch.workdir +
                                                "' as uid 61001 gid 61002: Permission denied"));
  EXPECT_FALSE(runner.IsRunning("61.0.2"));
}

TEST_F(TaskCredentialsTest, AnAgentThatIsNotRootRunsTasksOnlyAsItself) {
  if (!Root()) GTEST_SKIP() << "becoming another user to test this needs root";
  // A child process becomes uid 61001 and runs a runner there, as an agent started by that user.
  ASSERT_EQ(chown(dir_.c_str(), kUid, kUid), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kUid, kUid, kUid) != 0 ||
        setresuid(kUid, kUid, kUid) != 0)
      _exit(10);
    TaskRunner runner({"", false});
    TaskLaunch other = Shell("62.0.0", "id -u");
    other.run_as = CredentialsFromIds(kUid + 1, kUid + 1, {});
    StatusOr<pid_t> refused = runner.Launch(other);
    if (refused.ok()) _exit(11);
    if (refused.status().message() !=
        "task '62.0.0': the task should run as uid 61002 gid 61002, but the agent runs as uid "
        "61001 gid 61001, not "
        "root, so it starts tasks only as itself; run the agent as root") {
      _exit(12);
    }
    TaskLaunch self = Shell("62.0.1", "id -u");
    self.run_as =
        CredentialsFromIds(kUid, kUid, {61010});  // itself: nothing to switch (nor could it)
    if (!runner.Launch(self).ok()) _exit(13);
    for (int i = 0; i < 6000 && runner.IsRunning("62.0.1"); ++i) {
      runner.Reap();
      usleep(10000);
    }
    _exit(ReadFile(self.stdout_path) == "61001\n" ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: could not become 61001; 11: launched as another; 12: other message; "
         "13: could not launch as itself; 14: wrong output";
}

TEST(TaskCredentials, SwitchesOnlyWhatItMay) {
  const TaskCredentials alice = CredentialsFromIds(kUid, kGid, {61010});
  auto as_root = SwitchFrom(0, 0, alice);
  ASSERT_TRUE(as_root.ok());
  ASSERT_TRUE(as_root->has_value());
  EXPECT_EQ((*as_root)->uid, kUid);
  EXPECT_EQ((*as_root)->groups, std::vector<gid_t>{61010});
  auto as_herself = SwitchFrom(kUid, kGid, alice);
  ASSERT_TRUE(as_herself.ok());
  EXPECT_FALSE(as_herself->has_value());
  auto as_bob = SwitchFrom(61005, 61005, alice);
  EXPECT_EQ(as_bob.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(as_bob.status().message(),
              HasSubstr("the agent runs as uid 61005 gid 61005, not root"));
  auto nobody_asked = SwitchFrom(61005, 61005, std::nullopt);
  ASSERT_TRUE(nobody_asked.ok());
  EXPECT_FALSE(nobody_asked->has_value());
}

TEST(TaskCredentials, ResolvesAccountsOnThisNode) {
  auto root = ResolveAccount("root");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->uid, 0u);
  EXPECT_EQ(root->gid, 0u);
  EXPECT_EQ(root->name, "root");
  EXPECT_FALSE(root->home.empty());
  auto missing = ResolveAccount("hangar-no-such-account");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("this node has no Unix account 'hangar-no-such-account'"));
  // Numbers need no account; the name comes along when passwd has one.
  EXPECT_EQ(CredentialsFromIds(0, 0, {}).name, "root");
  const TaskCredentials anonymous = CredentialsFromIds(kUid, kGid, {61010, 61011});
  EXPECT_EQ(anonymous.name, "");
  EXPECT_EQ(anonymous.Describe(), "uid 61001 gid 61002 groups 61010,61011");
}

}  // namespace
}  // namespace hangar::agent
