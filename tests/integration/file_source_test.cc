// file:// artifact sources end to end, as a user of a cluster with --auth tokens would meet them:
// the controller and agent as root (as on a node), Alice's token mapped to uid 61001, and
// cluster.yaml letting jobs read files under one shared folder (data.file_roots).
//  - The attack: Alice names a root-only file (a link to /etc/shadow inside the shared folder,
//    a node key there with mode 0600) with a wrong size, then a wrong digest. Before, the agent
//    read it as root and its errors gave the true size, then the true digest; the third try
//    staged it. Now each try fails with the sentence a missing file gets, and nothing is staged.
//  - A file she can read stages, and her task reads it; no other account can.
//  - /etc/shadow itself is refused at submission, naming the setting.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/data/object_cache.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

struct Reply {
  int status = 0;
  nlohmann::json body;
};

class FileArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hangar-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    shared_ = tmpl;
    chmod(shared_.c_str(), 0755);  // a shared filesystem every account reaches
    cluster_ = std::make_unique<LocalCluster>(
        "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: "
        "512Gi}\n"
        "nodes: [{name: node-1}]\ndata: {file_roots: [" +
            shared_ + "]}\n",
        std::vector<std::string>{"--auth", "tokens"});
    cluster_->StartController();
    std::ifstream in(cluster_->dir() + "/admin.token");
    std::getline(in, admin_);
    alice_ = MakeToken({"--user", "alice", "--role", "user", "--uid", "61001"});
    const std::string node =
        Call(admin_, "POST", "/v1/tokens", R"({"role": "node", "node": "node-1"})")
            .body.value("token", "");
    std::ofstream(cluster_->dir() + "/node-1.token") << node << "\n";
    cluster_->StartAgent("node-1", {"--token-file", cluster_->dir() + "/node-1.token"});
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return Call(admin_, "GET", "/v1/nodes/node-1").body.value("state", "") == "ready"; },
        20 * kSecond));
  }
  void TearDown() override {
    cluster_.reset();
    std::error_code ec;
    fs::remove_all(shared_, ec);
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

  std::string MakeToken(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"token", "create"});
    flags.insert(flags.end(),
                 {"--server", "http://127.0.0.1:" + std::to_string(cluster_->api_port())});
    const std::string out = cluster_->dir() + "/cli.out";
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      setenv("HANGAR_TOKEN", admin_.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
      for (const auto& a : flags) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(HANGAR_BINARY, argv.data());
      _exit(127);
    }
    waitpid(pid, nullptr, 0);
    for (const auto& l : Lines(ReadFile(out))) {
      if (l.rfind("hgr_", 0) == 0) return l;
    }
    ADD_FAILURE() << "no token in: " << ReadFile(out);
    return "";
  }

  // Alice's job with one artifact; its id (0 when refused: then `refused` holds the answer).
  uint64_t Submit(const std::string& source, const std::string& sha256, int64_t size,
                  const std::string& command, Reply* refused = nullptr) {
    const std::string spec =
        "name: files\ntasks:\n  - gpus: 1\n    artifacts: [{source: \"file://" + source +
        "\", sha256: \"" + sha256 + "\", size: " + std::to_string(size) +
        ", path: /x/f}]\n    command: ['/bin/sh', '-c', '" + command + "']\n";
    Reply r = Call(alice_, "POST", "/v1/jobs", spec);
    if (refused) *refused = r;
    return r.status == 201 ? r.body.value("id", uint64_t{0}) : 0;
  }
  nlohmann::json Job(uint64_t id) {
    return Call(admin_, "GET", "/v1/jobs/" + std::to_string(id)).body;
  }
  bool WaitForState(uint64_t id, const std::string& state) {
    return LocalCluster::WaitFor([&] { return Job(id).value("state", "") == state; }, 60 * kSecond);
  }
  std::string Cache() { return cluster_->dir() + "/agents/node-1/cache"; }

  std::string shared_;
  std::unique_ptr<LocalCluster> cluster_;
  std::string admin_, alice_;
};

std::string DigestOf(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  auto d = agent::data::Sha256OfFile(fd, static_cast<int64_t>(fs::file_size(path)));
  close(fd);
  return *d;
}

TEST_F(FileArtifactTest, TheThreeTriesAttackOnARootOnlyFileLearnsNothingAndStagesNothing) {
  const std::string key = shared_ + "/node.key";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY----- the node's";
  chmod(key.c_str(), 0600);
  const std::string shadow = shared_ + "/shadow";
  fs::create_symlink("/etc/shadow", shadow);
  const std::string zeros = std::string(64, '0');
  for (const std::string& path : {key, shadow, shared_ + "/missing"}) {
    const int64_t true_size = fs::exists(path) ? static_cast<int64_t>(fs::file_size(path)) : 1;
    // Try 1: any size. Try 2: the true size (as if try 1 had told it) and any digest.
    for (int64_t size : {int64_t{1}, true_size}) {
      const uint64_t id = Submit(path, zeros, size, "cat $HANGAR_ARTIFACTS/x/f");
      ASSERT_NE(id, 0u);
      ASSERT_TRUE(WaitForState(id, "failed")) << Job(id).dump();
      // The one sentence, whether the file is root's, a link to /etc/shadow, or missing.
      const std::string why = Job(id).dump();
      EXPECT_TRUE(Contains(why, "artifact sha256:" + zeros + ": file://" + path +
                                    ": not readable by uid 61001 (or does not exist)"))
          << why;
      EXPECT_FALSE(Contains(why, std::to_string(true_size) + " bytes")) << why;
      EXPECT_FALSE(Contains(why, "hashes to")) << why;
    }
  }
  // Try 3, with the true digest (as if try 2 had told it): nothing still.
  const uint64_t third =
      Submit(key, DigestOf(key).substr(7), static_cast<int64_t>(fs::file_size(key)),
             "cat $HANGAR_ARTIFACTS/x/f");
  ASSERT_TRUE(WaitForState(third, "failed")) << Job(third).dump();
  EXPECT_TRUE(Contains(Job(third).dump(), "not readable by uid 61001 (or does not exist)"));
  EXPECT_TRUE(fs::is_empty(Cache() + "/objects")) << "nothing was staged";
  EXPECT_TRUE(fs::is_empty(Cache() + "/partial"));
}

TEST_F(FileArtifactTest, AFileTheUserCanReadStagesAndOnlyHerTaskReadsIt) {
  const std::string weights = shared_ + "/weights.bin";
  std::ofstream(weights) << "open weights";
  chmod(weights.c_str(), 0644);
  const std::string out = shared_ + "/out";
  mkdir(out.c_str(), 0777);
  chmod(out.c_str(), 0777);
  const uint64_t id = Submit(
      weights, DigestOf(weights).substr(7), 12,
      "cat $HANGAR_ARTIFACTS/x/f > " + out + "/read; echo $HANGAR_ARTIFACTS > " + out + "/where");
  ASSERT_TRUE(WaitForState(id, "succeeded"))
      << Job(id).dump() << ReadFile(cluster_->dir() + "/agent-node-1.log");
  EXPECT_EQ(ReadFile(out + "/read"), "open weights");
  // The cache itself admits only the agent; the task's view only its user.
  const std::string object = Cache() + "/objects/" + DigestOf(weights).substr(7);
  ASSERT_TRUE(fs::exists(object));
  struct stat st {};
  ASSERT_EQ(stat((Cache() + "/objects").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "cached objects are not every local account's to read";
  const std::string view = Lines(ReadFile(out + "/where")).at(0);
  ASSERT_EQ(stat(view.c_str(), &st), 0) << view;
  EXPECT_EQ(st.st_uid, 61001u);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "no one else enters the task's view";
}

TEST_F(FileArtifactTest, APathOutsideTheFileRootsIsRefusedAtSubmission) {
  Reply r;
  EXPECT_EQ(Submit("/etc/shadow", std::string(64, '0'), 1, "true", &r), 0u);
  EXPECT_EQ(r.status, 403) << r.body.dump();
  EXPECT_TRUE(
      Contains(r.body.dump(),
               "source file:///etc/shadow is not under a folder this cluster lets jobs read "
               "(data.file_roots: " +
                   shared_ + ")"))
      << r.body.dump();
  EXPECT_EQ(Submit(shared_ + "/../../etc/shadow", std::string(64, '0'), 1, "true", &r), 0u);
  EXPECT_EQ(r.status, 403) << r.body.dump();
}

}  // namespace
}  // namespace hangar::testing
