// RBAC end to end: a real controller with --auth tokens; every role against every endpoint,
// allowed and denied, and what a denial says.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}, {name: node-2}]\n";

// research (admins: carol) -> vision (users: alice); open (no users: every user may submit).
constexpr const char* kQueues =
    "queues:\n"
    "  - name: research\n    admins: [carol]\n    children:\n"
    "      - name: vision\n        users: [alice]\n        quota: {gpus: 8}\n"
    "  - name: open\n";

struct Reply {
  int status = 0;
  nlohmann::json body;
};

class RbacTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ =
        std::make_unique<LocalCluster>(kCluster, std::vector<std::string>{"--auth", "tokens"});
    cluster_->StartController();
    std::ifstream in(cluster_->dir() + "/admin.token");
    std::getline(in, tokens_["admin"]);
    ASSERT_EQ(tokens_["admin"].rfind("hgr_", 0), 0u)
        << "the first start writes an admin token beside the store";
    ASSERT_EQ(Call("admin", "POST", "/v1/queues", kQueues).status, 200);
    auto make = [&](const std::string& who, const std::string& body) {
      Reply r = Call("admin", "POST", "/v1/tokens", body);
      ASSERT_EQ(r.status, 201) << r.body.dump();
      tokens_[who] = r.body["token"];
    };
    make("queue-admin", R"({"user": "carol", "role": "queue-admin"})");
    make("user", R"({"user": "alice", "role": "user"})");
    make("other-user", R"({"user": "bob", "role": "user"})");
    make("viewer", R"({"user": "vic", "role": "viewer"})");
    make("node", R"({"role": "node", "node": "node-1"})");
    tokens_["no-token"] = "";
    tokens_["bad-token"] = "hgr_0123456789ab_not-the-secret";
  }

  Reply Call(const std::string& who, const std::string& method, const std::string& path,
             const std::string& body = "") {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    httplib::Headers h;
    if (!tokens_[who].empty()) h.emplace("Authorization", "Bearer " + tokens_[who]);
    httplib::Result r = method == "GET"    ? c.Get(path, h)
                        : method == "POST" ? c.Post(path, h, body, "application/yaml")
                                           : c.Delete(path, h);
    Reply out;
    if (!r) return out;
    out.status = r->status;
    out.body = nlohmann::json::parse(r->body, nullptr, false);
    return out;
  }

  uint64_t SubmitAs(const std::string& who, const std::string& queue) {
    Reply r = Call(who, "POST", "/v1/jobs",
                   "name: j\nqueue: " + queue + "\ntasks: [{gpus: 1, command: [sleep, '60']}]\n");
    EXPECT_EQ(r.status, 201) << who << ": " << r.body.dump();
    return r.status == 201 ? r.body["id"].get<uint64_t>() : 0;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(RbacTest, EveryRoleAgainstEveryEndpoint) {
  const uint64_t alices = SubmitAs("user", "vision");
  const std::vector<std::string> roles = {"admin",  "queue-admin", "user",     "other-user",
                                          "viewer", "node",        "no-token", "bad-token"};
  struct Endpoint {
    std::string method, path, body;
    std::set<std::string>
        allowed;  // roles that may; the rest get 403 (or 401 without a valid token)
  };
  const std::string job = "/v1/jobs/" + std::to_string(alices);
  const std::set<std::string> everyone = {"admin", "queue-admin", "user", "other-user", "viewer"};
  const std::vector<Endpoint> endpoints = {
      {"GET", "/metrics", "", {"admin", "viewer"}},
      {"POST",
       "/v1/jobs",
       "name: j\nqueue: vision\ntasks: [{gpus: 1, command: [x]}]\n",
       {"admin", "queue-admin", "user"}},
      {"GET", "/v1/jobs", "", everyone},  // each sees what they may (checked below)
      {"GET", job, "", {"admin", "queue-admin", "user", "viewer"}},
      {"GET", job + "/explain", "", {"admin", "queue-admin", "user", "viewer"}},
      {"GET", job + "/logs", "", {"admin", "queue-admin", "user", "viewer"}},
      {"GET", "/v1/nodes", "", everyone},
      {"GET", "/v1/nodes/node-1", "", everyone},
      {"POST", "/v1/nodes/node-2/drain", R"({"reason": "rbac test"})", {"admin"}},
      {"POST", "/v1/nodes/node-2/undrain", "", {"admin"}},
      {"POST",
       "/v1/nodes/node-2/remediate",
       R"({"remedy": "reboot", "note": "rbac test"})",
       {"admin"}},
      {"POST", "/v1/nodes/node-2/orphans", R"({"decision": "release"})", {"admin"}},
      {"POST", "/v1/health/safety-valve/reset", "{}", {"admin"}},
      {"GET", "/v1/events", "", {"admin", "queue-admin", "viewer"}},
      // A user reads the events of their own job, not another subject's.
      {"GET",
       "/v1/events?subject=job/" + std::to_string(alices),
       "",
       {"admin", "queue-admin", "user", "viewer"}},
      {"GET", "/v1/events?subject=node/node-1", "", {"admin", "queue-admin", "viewer"}},
      {"POST", "/v1/queues", kQueues, {"admin"}},
      {"GET", "/v1/queues", "", everyone},
      {"GET", "/v1/share", "", everyone},
      {"GET", "/v1/usage", "", everyone},
      {"GET", "/v1/history", "", everyone},
      {"GET", "/v1/tokens", "", {"admin"}},
      {"POST", "/v1/tokens", R"({"user": "dave", "role": "viewer"})", {"admin"}},
      {"DELETE", "/v1/tokens/ffffffffffff", "", {"admin"}},
      {"GET", "/v1/whoami", "", {"admin", "queue-admin", "user", "other-user", "viewer", "node"}},
      {"GET", "/v1/audit", "", {"admin"}},
      // Rolling maintenance (docs/maintenance.md): admins start runs (this body lacks its
      // command: the admin's call passes RBAC and is refused for that); anyone may follow them.
      {"POST", "/v1/maintenance", R"({"nodes": "node-1", "batch": 1})", {"admin"}},
      {"GET", "/v1/maintenance", "", everyone},
      // What the agents discovered of the fabric (docs/topology-discovery.md): cluster:read.
      {"GET", "/v1/topology/discovered", "", everyone},
      {"GET", "/v1/topology/diff", "", everyone},
  };
  struct Made {
    std::string role, method, path;
    int status;
  };
  std::vector<Made> mutating;
  int checked = 0;
  for (const auto& e : endpoints) {
    for (const auto& role : roles) {
      Reply r = Call(role, e.method, e.path, e.body);
      if (e.method != "GET") mutating.push_back({role, e.method, e.path, r.status});
      SCOPED_TRACE(role + " " + e.method + " " + e.path + " -> " + std::to_string(r.status) + " " +
                   r.body.dump());
      ASSERT_NE(r.status, 0) << "no answer";
      if (role == "no-token" || role == "bad-token") {
        EXPECT_EQ(r.status, 401);
        EXPECT_NE(r.body["error"]["message"].get<std::string>().find("Authorization: Bearer"),
                  std::string::npos);
      } else if (e.allowed.count(role)) {
        EXPECT_NE(r.status, 401);
        EXPECT_NE(r.status, 403);
      } else {
        EXPECT_EQ(r.status, 403);
        EXPECT_NE(r.body["error"]["message"].get<std::string>().find("is missing"),
                  std::string::npos)
            << "a denial names the permission that was missing";
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(endpoints.size() * roles.size()));
  // /healthz needs no token at all.
  EXPECT_EQ(Call("no-token", "GET", "/healthz").status, 200);

  // Issue 16: the audit log has every one of those mutating calls -- who, what, from where, and
  // how it was answered -- the denied ones too.
  const std::map<std::string, std::string> user_of = {
      {"admin", "admin"}, {"queue-admin", "carol"}, {"user", "alice"}, {"other-user", "bob"},
      {"viewer", "vic"},  {"node", "node-1"},       {"no-token", ""},  {"bad-token", ""}};
  nlohmann::json audit;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        audit = Call("admin", "GET", "/v1/audit?limit=10000").body["audit"];
        return audit.size() >= mutating.size();
      },
      5 * kSecond))
      << audit.size() << " rows for " << mutating.size() << " calls";
  for (const auto& m : mutating) {
    SCOPED_TRACE(m.role + " " + m.method + " " + m.path + " -> " + std::to_string(m.status));
    bool found = false;
    for (auto& row : audit) {
      if (row.is_null() || row["method"] != m.method || row["path"] != m.path ||
          row["status"] != m.status || row["user"] != user_of.at(m.role)) {
        continue;
      }
      EXPECT_EQ(row["remote"].get<std::string>().rfind("127.0.0.1:", 0), 0u) << row.dump();
      if (m.status >= 400) {
        EXPECT_FALSE(row["message"].get<std::string>().empty()) << row.dump();
      }
      row = nullptr;  // each row answers for one call
      found = true;
      break;
    }
    EXPECT_TRUE(found);
  }
}

TEST_F(RbacTest, UsersSeeAndCancelOnlyTheirOwnJobs) {
  const uint64_t alices = SubmitAs("user", "vision");
  const uint64_t bobs = SubmitAs("other-user", "open");
  // bob may not submit to vision, and is told where he may.
  Reply denied = Call("other-user", "POST", "/v1/jobs",
                      "name: j\nqueue: vision\ntasks: [{gpus: 1, command: [x]}]\n");
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(denied.body["error"]["message"],
            "permission jobs:submit on queue 'vision' is missing: bob (user) may submit to open; "
            "ask an admin to add "
            "bob to the queue's users");
  // Lists are filtered.
  auto ids = [&](const std::string& who) {
    std::set<uint64_t> out;
    const Reply r = Call(who, "GET", "/v1/jobs");
    for (const auto& j : r.body["jobs"]) out.insert(j["id"].get<uint64_t>());
    return out;
  };
  EXPECT_EQ(ids("user"), (std::set<uint64_t>{alices}));
  EXPECT_EQ(ids("other-user"), (std::set<uint64_t>{bobs}));
  EXPECT_EQ(ids("queue-admin"),
            (std::set<uint64_t>{alices}));  // carol administers research, not open
  EXPECT_EQ(ids("viewer"), (std::set<uint64_t>{alices, bobs}));
  // The submitter is who the token says, whatever the spec claims.
  EXPECT_EQ(Call("user", "GET", "/v1/jobs/" + std::to_string(alices)).body["user"], "alice");
  // Cancelling: bob not alice's job; the viewer nothing; carol her subtree's; alice her own.
  Reply r = Call("other-user", "POST", "/v1/jobs/" + std::to_string(alices) + "/cancel");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body["error"]["message"], "permission jobs:cancel on job " + std::to_string(alices) +
                                            " is missing: bob (user) may cancel only their own "
                                            "jobs; it belongs to alice in queue vision");
  EXPECT_EQ(Call("viewer", "POST", "/v1/jobs/" + std::to_string(alices) + "/cancel").status, 403);
  EXPECT_EQ(Call("queue-admin", "POST", "/v1/jobs/" + std::to_string(alices) + "/cancel").status,
            200);
  EXPECT_EQ(Call("queue-admin", "POST", "/v1/jobs/" + std::to_string(bobs) + "/cancel").status,
            403);
  EXPECT_EQ(Call("other-user", "POST", "/v1/jobs/" + std::to_string(bobs) + "/cancel").status, 200);
}

TEST_F(RbacTest, UsersReadTheEventsOfTheirOwnJobsOnly) {
  const uint64_t alices = SubmitAs("user", "vision");
  const std::string subject = "job/" + std::to_string(alices);
  Reply mine;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        mine = Call("user", "GET", "/v1/events?subject=" + subject);
        return mine.status == 200 && !mine.body["events"].empty();
      },
      5 * kSecond))
      << mine.status << " " << mine.body.dump();
  for (const auto& e : mine.body["events"]) EXPECT_EQ(e["subject"], subject);
  // bob is told whose job it is; alice is told which events she may read.
  Reply other = Call("other-user", "GET", "/v1/events?subject=" + subject);
  EXPECT_EQ(other.status, 403);
  EXPECT_EQ(other.body["error"]["message"], "permission jobs:read on job " +
                                                std::to_string(alices) +
                                                " is missing: bob (user) may see only their own "
                                                "jobs; it belongs to alice in queue vision");
  Reply all = Call("user", "GET", "/v1/events");
  EXPECT_EQ(all.status, 403);
  EXPECT_NE(all.body["error"]["message"].get<std::string>().find(
                "permission events:read is missing: alice (user) may read the events of their own "
                "jobs only: "
                "`hangar events job/ID`"),
            std::string::npos)
      << all.body.dump();
  // A prefix is not a job: job/1 is not job/12's, and job/ alone is everyone's.
  EXPECT_EQ(Call("user", "GET", "/v1/events?subject=job/").status, 403);
  EXPECT_EQ(Call("user", "GET", "/v1/events?subject=job/" + std::to_string(alices) + "0").status,
            200);
  EXPECT_TRUE(Call("user", "GET", "/v1/events?subject=job/" + std::to_string(alices) + "0")
                  .body["events"]
                  .empty());
}

TEST_F(RbacTest, TokensAreStoredHashedAndCanBeRevoked) {
  // The store holds no secret: the admin token's text appears nowhere in the database file.
  std::ifstream db(cluster_->dir() + "/state.db", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(db)), std::istreambuf_iterator<char>());
  const std::string secret = tokens_["user"].substr(tokens_["user"].rfind('_') + 1);
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  const std::string id = tokens_["user"].substr(4, tokens_["user"].rfind('_') - 4);
  EXPECT_EQ(Call("user", "GET", "/v1/whoami").body["user"], "alice");
  EXPECT_EQ(Call("admin", "DELETE", "/v1/tokens/" + id).status, 200);
  Reply r = Call("user", "GET", "/v1/whoami");
  EXPECT_EQ(r.status, 401);
  // A restart keeps the tokens (and the revocation).
  cluster_->KillController(SIGTERM);
  cluster_->StartController();
  EXPECT_EQ(Call("viewer", "GET", "/v1/whoami").body["role"], "viewer");
  EXPECT_EQ(Call("user", "GET", "/v1/whoami").status, 401);
}

// Agents use node tokens: a node's own token admits it; another node's token, or none, does not.
// Issue 16: a job's environment values (its owner's secrets) are shown to its owner and admins
// only; a viewer sees the variable names.
TEST_F(RbacTest, EnvironmentValuesAreTheOwnersAndAdminsOnly) {
  Reply r = Call(
      "user", "POST", "/v1/jobs",
      "name: j\nqueue: vision\ntasks: [{gpus: 1, command: [x], env: {WANDB_API_KEY: s3cret}}]\n");
  ASSERT_EQ(r.status, 201) << r.body.dump();
  const std::string path = "/v1/jobs/" + std::to_string(r.body["id"].get<uint64_t>());
  EXPECT_EQ(Call("user", "GET", path).body["spec"]["tasks"][0]["env"]["WANDB_API_KEY"], "s3cret");
  EXPECT_EQ(Call("admin", "GET", path).body["spec"]["tasks"][0]["env"]["WANDB_API_KEY"], "s3cret");
  auto seen = Call("viewer", "GET", path).body;
  EXPECT_EQ(seen["spec"]["tasks"][0]["env"]["WANDB_API_KEY"],
            "(hidden: only alice and admins see it)")
      << seen.dump();
  EXPECT_FALSE(Contains(seen.dump(), "s3cret"));
  EXPECT_FALSE(Contains(Call("queue-admin", "GET", path).body.dump(), "s3cret"));
}

TEST_F(RbacTest, AgentsNeedTheirOwnNodeToken) {
  const std::string file = cluster_->dir() + "/node-1.token";
  std::ofstream(file) << tokens_["node"] << "\n";
  cluster_->StartAgent("node-1", {"--token-file", file});
  cluster_->StartAgent("node-2", {"--token-file", file});  // node-1's token
  auto state = [&](const std::string& node) {
    return Call("admin", "GET", "/v1/nodes/" + node).body.value("state", "");
  };
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return state("node-1") == "ready"; }, 20 * kSecond))
      << Call("admin", "GET", "/v1/nodes/node-1").body.dump();
  std::string text;
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        std::ifstream log(cluster_->dir() + "/agent-node-2.log");
        text.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
        return text.find("not that node's token") != std::string::npos;
      },
      20 * kSecond))
      << text;
  EXPECT_NE(state("node-2"), "ready");
  EXPECT_EQ(cluster_->Get("/healthz").value("agents", 0u), 1u);
}

}  // namespace
}  // namespace hangar::testing
