// What the controller admits, whatever client sends it: a real controller with --auth tokens,
// spoken to over HTTP as a script would, without the CLI's own checks. Arrays are counted before
// they are expanded and stored once, each user may store so many bytes of specs, and text that
// would reach terminals raw (control characters), paths as names, a second YAML document,
// repeated keys and a zero time limit are refused with a sentence naming the field.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sqlite3.h>

#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}]\n";

struct Answer {
  int status = 0;
  nlohmann::json body;
  std::string message() const { return body.is_object() ? body["error"].value("message", "") : ""; }
};

std::string CommaList(int n) {
  std::string list;
  for (int i = 0; i < n; ++i) list += (i ? "," : "") + std::to_string(i);
  return list;
}

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(
        kCluster,
        std::vector<std::string>{"--auth", "tokens", "--max-spec-bytes-per-user", "512Ki"});
    cluster_->StartController();
    std::ifstream in(cluster_->dir() + "/admin.token");
    std::getline(in, admin_);
    Answer alice = Post("/v1/tokens",
                        "{\"user\": \"alice\", \"role\": \"user\", " + TaskAccountFields() + "}");
    ASSERT_EQ(alice.status, 201) << alice.body.dump();
    alice_ = alice.body["token"];
  }
  Answer Post(const std::string& path, const std::string& body, const std::string& token = "") {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    c.set_read_timeout(60, 0);
    auto r = c.Post(path, {{"Authorization", "Bearer " + (token.empty() ? admin_ : token)}}, body,
                    "application/yaml");
    Answer a;
    if (!r) return a;
    a.status = r->status;
    a.body = nlohmann::json::parse(r->body, nullptr, false);
    return a;
  }
  // The job's first task group is `group` (YAML lines, indented by 4).
  Answer SubmitGroup(const std::string& group, const std::string& top = "") {
    return Post("/v1/jobs", "name: t\n" + top + "tasks:\n  - gpus: 1\n" + group, alice_);
  }
  std::string StoreValue(const std::string& sql) {
    sqlite3* db = nullptr;
    std::string out;
    if (sqlite3_open_v2((cluster_->dir() + "/state.db").c_str(), &db, SQLITE_OPEN_READONLY,
                        nullptr) == SQLITE_OK) {
      sqlite3_stmt* q = nullptr;
      if (sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr) == SQLITE_OK &&
          sqlite3_step(q) == SQLITE_ROW) {
        out = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
      }
      sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return out;
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::string admin_, alice_;
};

TEST_F(AdmissionTest, EachBadFieldIsRefusedNamingIt) {
  const std::string cmd = "    command: [/bin/true]\n";
  struct Case {
    Answer got;
    std::string says;
  };
  const Case cases[] = {
      {SubmitGroup("    name: \"a\\e]0;owned\\a\"\n" + cmd),
       "tasks[0].name holds a control character, ESC"},
      {SubmitGroup("    name: \"a\\nb\"\n" + cmd),
       "tasks[0].name holds a control character, newline"},
      {SubmitGroup("    env: {A: \"x\\0y\"}\n" + cmd),
       "tasks[0].env.A holds a control character, NUL"},
      {SubmitGroup("    command: [/bin/echo, \"\\e[2J\"]\n"),
       "tasks[0].command[1] holds a control character, ESC"},
      {SubmitGroup("    workdir: \"/tmp/a\\nb\"\n" + cmd),
       "tasks[0].workdir holds a control character, newline"},
      {SubmitGroup("    name: ../../etc\n" + cmd), "task group name '../../etc'"},
      {SubmitGroup("    name: " + std::string(10'000, 'a') + "\n" + cmd),
       "(10000 bytes) must be 1-63 letters"},
      {SubmitGroup(cmd, "array: \"9223372036854775807\"\n"), "is over the largest index, 9999999"},
      {SubmitGroup(cmd, "priority: 1\npriority: 2\n"), "request body:3: 'priority' is given twice"},
      {SubmitGroup(cmd + "---\nname: second\ntasks: [{gpus: 1, command: [x]}]\n"),
       "request body:6: a second document begins here"},
      {SubmitGroup(cmd, "time_limit: 0s\n"), "request body:2: time_limit must be positive"},
      {Post("/v1/tokens", "{\"user\": \"mallory\\n1  alice  admin\", \"role\": \"user\"}"),
       "the user name holds a control character, newline"},
      {Post("/v1/queues", "queues:\n  - name: \"q\\e[31m\"\n"),
       "queue name holds a control character, ESC"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.got.status, 400) << c.says << ": " << c.got.body.dump();
    EXPECT_NE(c.got.message().find(c.says), std::string::npos)
        << "wanted '" << c.says << "' in: " << c.got.message();
  }
  EXPECT_EQ(cluster_->Get("/v1/jobs")["jobs"].size(), 0u) << "none of them was admitted";
}

// A 0.94 MB list of 150,000 indices was expanded before the 100,000 cap was checked (the
// controller went to 24 GB); 10,000 elements written as a list cost +500 MiB and wrote the spec
// once per element.
TEST_F(AdmissionTest, ALongArrayIsCountedFirstAndAnAcceptedOneIsStoredOnce) {
  Answer big = Post(
      "/v1/jobs",
      "name: t\narray: \"" + CommaList(150'000) + "\"\ntasks: [{gpus: 1, command: [x]}]\n", alice_);
  EXPECT_EQ(big.status, 400) << big.body.dump();
  EXPECT_NE(big.message().find("has more than 100000 elements"), std::string::npos)
      << big.message();

  Answer ok = Post(
      "/v1/jobs",
      "name: t\narray: \"" + CommaList(10'000) + "\"\ntasks: [{gpus: 1, command: [x]}]\n", alice_);
  ASSERT_EQ(ok.status, 201) << ok.body.dump();
  EXPECT_EQ(ok.body["count"], 10'000);
  EXPECT_EQ(StoreValue("SELECT count(*) FROM jobs"), "10000");
  EXPECT_EQ(StoreValue("SELECT count(*) FROM specs"), "1") << "one spec for the whole array";
  const long spec_bytes = std::stol(StoreValue("SELECT sum(length(text)) FROM specs"));
  EXPECT_GT(spec_bytes, 48'000);
  EXPECT_LT(spec_bytes, 60'000);
}

TEST_F(AdmissionTest, EachUserMayStoreSoManyBytesOfSpecs) {
  auto spec = [](int n) {
    return "name: t\ntasks: [{gpus: 1, command: [x], env: {PAD: \"" + std::string(100'000, 'p') +
           std::to_string(n) + "\"}}]\n";
  };
  // Environment values are sealed in a SQLite store: each spec stores ~130 KiB.
  EXPECT_EQ(Post("/v1/jobs", spec(1), alice_).status, 201);
  EXPECT_EQ(Post("/v1/jobs", spec(2), alice_).status, 201);
  EXPECT_EQ(Post("/v1/jobs", spec(3), alice_).status, 201);
  EXPECT_EQ(Post("/v1/jobs", spec(3), alice_).status, 201) << "the same spec again is stored once";
  Answer fourth = Post("/v1/jobs", spec(4), alice_);
  EXPECT_EQ(fourth.status, 413) << fourth.body.dump();
  EXPECT_NE(fourth.message().find("does not fit: alice already stores 39"), std::string::npos)
      << fourth.message();
  EXPECT_NE(
      fourth.message().find("KiB of job specs and may store at most 512.0 KiB (the controller's "
                            "--max-spec-bytes-per-user)"),
      std::string::npos)
      << fourth.message();
  Answer bob =
      Post("/v1/tokens", "{\"user\": \"bob\", \"role\": \"user\", " + TaskAccountFields() + "}");
  ASSERT_EQ(bob.status, 201) << bob.body.dump();
  EXPECT_EQ(Post("/v1/jobs", spec(4), bob.body["token"]).status, 201)
      << "another user's specs are theirs";
}

}  // namespace
}  // namespace hangar::testing
