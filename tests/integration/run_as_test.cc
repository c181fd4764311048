// Tasks run as their user (issue 16), end to end: a real controller with --auth tokens and a real
// agent (as root, as on a node). Two users' tokens map to two uids -- numbers without accounts in
// /etc/passwd, which the kernel does not need and which keeps the test from editing /etc -- made
// with `hangar token create --uid`. Each user's job reports its uid, gid and groups; its log is
// that uid's, mode 0600; one user's task cannot read the other's output; a token mapped to root
// is refused in a queue that does not allow root and runs in one that does.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/task_journal.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}]\n";

// default: no root; ops: root allowed (docs/queues.md).
constexpr const char* kQueues =
    "queues:\n"
    "  - name: default\n"
    "  - name: ops\n    allow_root: true\n";

struct Reply {
  int status = 0;
  nlohmann::json body;
};

struct Ran {
  int rc = -1;
  std::string output;  // stdout and stderr together
};

class RunAsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "running tasks as other users needs the agent to be root";
    cluster_ =
        std::make_unique<LocalCluster>(kCluster, std::vector<std::string>{"--auth", "tokens"});
    cluster_->StartController();
    std::ifstream in(cluster_->dir() + "/admin.token");
    std::getline(in, admin_);
    ASSERT_EQ(Call(admin_, "POST", "/v1/queues", kQueues).status, 200);
    // The CLI, as an admin would: two people, each mapped to a uid of their own, and an operator
    // mapped to root.
    alice_ = MakeToken(
        {"--user", "alice", "--role", "user", "--uid", "61001", "--groups", "61010,61011"});
    bob_ = MakeToken({"--user", "bob", "--role", "user", "--uid", "61002", "--gid", "61020"});
    ops_ = MakeToken({"--user", "ops", "--role", "user", "--uid", "0"});
    const std::string node =
        Call(admin_, "POST", "/v1/tokens", R"({"role": "node", "node": "node-1"})")
            .body.value("token", "");
    std::ofstream(cluster_->dir() + "/node-1.token") << node << "\n";
    cluster_->StartAgent("node-1", {"--token-file", cluster_->dir() + "/node-1.token"});
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return Call(admin_, "GET", "/v1/nodes/node-1").body.value("state", "") == "ready"; },
        20 * kSecond));
  }

  Reply Call(const std::string& token, const std::string& method, const std::string& path,
             const std::string& body = "") {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    c.set_read_timeout(10, 0);
    httplib::Headers h{{"Authorization", "Bearer " + token}};
    httplib::Result r =
        method == "GET" ? c.Get(path, h) : c.Post(path, h, body, "application/yaml");
    Reply out;
    if (!r) return out;
    out.status = r->status;
    out.body = nlohmann::json::parse(r->body, nullptr, false);
    return out;
  }

  // `hangar ARGS --server ...` with the admin's token; its output.
  Ran Hangar(std::vector<std::string> args) {
    args.push_back("--server");
    args.push_back("http://127.0.0.1:" + std::to_string(cluster_->api_port()));
    const std::string out = cluster_->dir() + "/cli.out";
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      setenv("HANGAR_TOKEN", admin_.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(HANGAR_BINARY, argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(out)};
  }

  std::string MakeToken(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"token", "create"});
    Ran r = Hangar(flags);
    EXPECT_EQ(r.rc, 0) << r.output;
    const std::vector<std::string> lines = Lines(r.output);
    for (const auto& l : lines) {
      if (l.rfind("hgr_", 0) == 0) return l;
    }
    ADD_FAILURE() << "no token in: " << r.output;
    return "";
  }

  uint64_t Submit(const std::string& token, const std::string& queue, const std::string& script) {
    nlohmann::json spec = {{"name", "who"},
                           {"queue", queue},
                           {"tasks", {{{"gpus", 1}, {"command", {"/bin/sh", "-c", script}}}}}};
    Reply r = Call(token, "POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.body.dump();
    return r.body.value("id", uint64_t{0});
  }

  bool WaitForState(uint64_t id, const std::string& state) {
    return LocalCluster::WaitFor(
        [&] {
          return Call(admin_, "GET", "/v1/jobs/" + std::to_string(id)).body.value("state", "") ==
                 state;
        },
        30 * kSecond);
  }

  // The job's task 0 folder on node-1 (its first attempt), once the job has succeeded.
  std::string Succeeded(uint64_t id) {
    EXPECT_TRUE(WaitForState(id, "succeeded"))
        << Call(admin_, "GET", "/v1/jobs/" + std::to_string(id)).body.dump() << "\n"
        << ReadFile(cluster_->dir() + "/agent-node-1.log");
    return cluster_->dir() + "/agents/node-1/tasks/" + std::to_string(id) + ".0.0";
  }

  static void ExpectOwned(const std::string& path, uid_t uid, gid_t gid, mode_t mode) {
    struct stat st {};
    ASSERT_EQ(lstat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, uid) << path;
    EXPECT_EQ(st.st_gid, gid) << path;
    EXPECT_EQ(st.st_mode & 07777, mode) << path;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string admin_, alice_, bob_, ops_;
};

TEST_F(RunAsTest, EachUsersTaskRunsAsTheirUidAndCannotReadTheOthersOutput) {
  // The tokens say who their tasks run as.
  const Ran list = Hangar({"token", "list"});
  EXPECT_TRUE(Contains(list.output, "uid 61001 gid 61001 groups 61010,61011")) << list.output;
  EXPECT_TRUE(Contains(list.output, "uid 61002 gid 61020")) << list.output;
  EXPECT_EQ(Call(alice_, "GET", "/v1/whoami").body["run_as"].dump(),
            R"({"gid":61001,"groups":[61010,61011],"uid":61001})");

  const std::string ids = "id -u; id -g; id -G; grep -E '^(Uid|Gid):' /proc/self/status; ";
  const uint64_t bobs = Submit(bob_, "default", ids + "echo bob-secret");
  const std::string bob_task = Succeeded(bobs);
  const std::string bob_out = bob_task + "/stdout.log";
  EXPECT_EQ(ReadFile(bob_out),
            "61002\n61020\n61020\nUid:\t61002\t61002\t61002\t61002\nGid:"
            "\t61020\t61020\t61020\t61020\nbob-secret\n");
  ExpectOwned(bob_out, 61002, 61020, 0600);
  ExpectOwned(bob_task + "/stderr.log", 61002, 61020, 0600);
  ExpectOwned(bob_task + "/work", 61002, 61020, 0700);

  // Alice's task, on the same node, tries to read Bob's output.
  const uint64_t alices =
      Submit(alice_, "default",
             ids + "cat " + bob_out + "; echo \"cat: $?\"; ls " + bob_task + "/work; echo done");
  const std::string alice_task = Succeeded(alices);
  EXPECT_EQ(ReadFile(alice_task + "/stdout.log"),
            "61001\n61001\n61001 61010 "
            "61011\nUid:\t61001\t61001\t61001\t61001\nGid:\t61001\t61001\t61001\t61001\n"
            "cat: 1\ndone\n");
  const std::string alice_err = ReadFile(alice_task + "/stderr.log");
  EXPECT_TRUE(Contains(alice_err, "cat: " + bob_out + ": Permission denied")) << alice_err;
  EXPECT_TRUE(Contains(alice_err, "Permission denied")) << alice_err;  // ls of Bob's workdir
  EXPECT_FALSE(Contains(alice_err, "bob-secret"));
  ExpectOwned(alice_task + "/stdout.log", 61001, 61001, 0600);
  // A rotated token runs its jobs as the same account.
  const std::string bob_id = bob_.substr(4, bob_.find('_', 4) - 4);  // hgr_<id>_<secret>
  Reply rotated = Call(admin_, "POST", "/v1/tokens/" + bob_id + "/rotate", "{}");
  EXPECT_EQ(rotated.status, 201) << rotated.body.dump();
  EXPECT_EQ(rotated.body["run_as"].dump(), R"({"gid":61020,"uid":61002})");
  // The job records who it ran as.
  EXPECT_EQ(Call(admin_, "GET", "/v1/jobs/" + std::to_string(alices)).body["spec"]["run_as"].dump(),
            R"({"gid":61001,"groups":[61010,61011],"uid":61001})");
}

// The attack of issue 16: one user's job read another's /proc/PID/environ (an API key).
TEST_F(RunAsTest, AUsersTaskCannotReadAnotherUsersEnvironment) {
  nlohmann::json spec = {
      {"name", "keyholder"},
      {"tasks",
       {{{"gpus", 1}, {"env", {{"API_KEY", "bob-key-123"}}}, {"command", {"sleep", "60"}}}}}};
  Reply r = Call(bob_, "POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(r.status, 201) << r.body.dump();
  const std::string task = std::to_string(r.body.value("id", uint64_t{0})) + ".0.0";
  int pid = 0;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        for (const auto& t : agent::LatestTaskRecords(cluster_->dir() + "/agents/node-1")) {
          if (t.value("task_id", "") == task) pid = t.value("pid", 0);
        }
        return pid > 0;
      },
      20 * kSecond));
  ASSERT_TRUE(
      Contains(ReadFile("/proc/" + std::to_string(pid) + "/environ"), "API_KEY=bob-key-123"));
  const std::string environ = "/proc/" + std::to_string(pid) + "/environ";
  const std::string alice_task =
      Succeeded(Submit(alice_, "default", "cat " + environ + "; echo \"cat: $?\""));
  EXPECT_EQ(ReadFile(alice_task + "/stdout.log"), "cat: 1\n");
  EXPECT_TRUE(Contains(ReadFile(alice_task + "/stderr.log"), environ + ": Permission denied"))
      << ReadFile(alice_task + "/stderr.log");
}

TEST_F(RunAsTest, RootOnlyWhereTheQueueAllowsIt) {
  Reply refused =
      Call(ops_, "POST", "/v1/jobs", "name: fix\ntasks: [{gpus: 1, command: [id, -u]}]\n");
  EXPECT_EQ(refused.status, 403) << refused.body.dump();
  EXPECT_EQ(refused.body["error"].value("message", ""),
            "job 'fix' would run as root (uid 0 gid 0) and queue 'default' does not allow root "
            "tasks; submit with a "
            "token mapped to another account, or ask an admin to set allow_root: true on the queue "
            "(docs/queues.md)");
  EXPECT_EQ(Call(admin_, "GET", "/v1/jobs").body["jobs"].size(), 0u);
  const uint64_t fix = Submit(ops_, "ops", "id -u");
  EXPECT_EQ(ReadFile(Succeeded(fix) + "/stdout.log"), "0\n");
}

TEST_F(RunAsTest, ATokenWithoutAnAccountRunsAsTheAccountNamedLikeItsUser) {
  // The first admin token names no account: its user is "admin", which this node lacks.
  Reply r = Call(admin_, "POST", "/v1/jobs", "name: a\ntasks: [{gpus: 1, command: [id, -u]}]\n");
  ASSERT_EQ(r.status, 201) << r.body.dump();
  const uint64_t id = r.body.value("id", uint64_t{0});
  ASSERT_TRUE(WaitForState(id, "failed"));
  const std::string events =
      Call(admin_, "GET", "/v1/events?subject=job/" + std::to_string(id)).body.dump();
  EXPECT_TRUE(Contains(
      events,
      "task 0 failed to start: node node-1: this node has no Unix account 'admin' (getpwnam)"))
      << events;
  // An account the node has: `nobody` exists everywhere.
  const std::string nobody = MakeToken({"--user", "nobody", "--role", "user"});
  const uint64_t ok = Submit(nobody, "default", "id -un");
  EXPECT_EQ(ReadFile(Succeeded(ok) + "/stdout.log"), "nobody\n");
}

}  // namespace
}  // namespace hangar::testing
