// Issue 16, "validation gaps": every malformed request is answered 4xx with a sentence that says
// what was wrong, never 500, and none of them grows the controller's memory. A real controller on
// loopback, spoken to with raw sockets where a client library would tidy the request up.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}]\n";

struct Answer {
  int status = 0;
  std::string message;  // error.message
};

class ApiValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
  }
  // Sends `head` (request line and headers, without the blank line) and `body` as they are.
  Answer Raw(const std::string& head, const std::string& body = "") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(cluster_->api_port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
    const std::string req = head + "\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" + body;
    for (size_t off = 0; off < req.size();) {
      const ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server may answer (and close) before it has read it all
      off += static_cast<size_t>(n);
    }
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
      got.append(buf, static_cast<size_t>(n));
    ::close(fd);
    Answer out;
    if (got.size() > 12) out.status = std::atoi(got.c_str() + 9);
    const size_t json = got.find("\r\n\r\n");
    if (json != std::string::npos) {
      auto j = nlohmann::json::parse(got.substr(json + 4), nullptr, false);
      if (j.is_object() && j.contains("error")) out.message = j["error"].value("message", "");
    }
    return out;
  }
  Answer Post(const std::string& path, const std::string& body,
              const std::string& type = "application/json") {
    return Raw("POST " + path + " HTTP/1.1\r\nContent-Type: " + type +
                   "\r\nContent-Length: " + std::to_string(body.size()),
               body);
  }
  long ControllerRssKb() {
    std::ifstream in("/proc/" + std::to_string(ControllerPid()) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    }
    return -1;
  }
  int ControllerPid() {
    auto ports = nlohmann::json::parse(ReadFile(cluster_->dir() + "/ports.json"), nullptr, false);
    return ports.value("pid", 0);
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(ApiValidationTest, EveryGapAnswers4xxWithASentence) {
  const std::string job = "name: x\ntasks: [{gpus: 1, command: [x]}]\n";
  struct Case {
    std::string what;
    Answer got;
    int status;
    std::string says;
  };
  std::vector<Case> cases = {
      {"memory that wraps int64",
       Post("/v1/jobs",
            "name: x\ntasks: [{gpus: 1, memory: 100000000000000000000Gi, command: [x]}]\n",
            "application/yaml"),
       400, "is more memory than any machine has"},
      {"a GPU index past int",
       Post("/v1/nodes/node-1/remediate", R"({"remedy": "gpu-reset", "gpu": 1099511627776})"), 400,
       "\"gpu\" must be from -1 to 1023; 1099511627776 is not"},
      {"invalid UTF-8 in a name",
       Post("/v1/jobs", "name: \"\xff\xfe\"\ntasks: [{gpus: 1, command: [x]}]\n",
            "application/yaml"),
       400, "is not valid UTF-8"},
      {"a reason that is a number", Post("/v1/nodes/node-1/drain", R"({"reason": 5})"), 400,
       "\"reason\" must be a string, not number 5"},
      {"a note that is a list",
       Post("/v1/nodes/node-1/remediate", R"({"remedy": "reboot", "note": [1]})"), 400,
       "\"note\" must be a string, not array [1]"},
      {"a POST without a body", Raw("POST /v1/jobs HTTP/1.1"), 400,
       "a job file is a map with at least 'name' and 'tasks'"},
      {"a chunked upload past the limit",
       Raw("POST /v1/jobs HTTP/1.1\r\nContent-Type: application/yaml\r\nTransfer-Encoding: chunked",
           [] {
             std::string chunk(64 * 1024, 'a'), out;
             for (int i = 0; i < 40; ++i) out += "10000\r\n" + chunk + "\r\n";
             return out + "0\r\n\r\n";
           }()),
       413, "over 1 MiB"},
      {"limit=abc", Raw("GET /v1/jobs?limit=abc HTTP/1.1"), 400,
       "limit must be a whole number (1 to 100000), not 'abc'"},
      {"events limit=abc", Raw("GET /v1/events?limit=abc HTTP/1.1"), 400,
       "limit must be a whole number"},
      // Twenty digits went to std::stoll, whose out_of_range became a 500 (the rest_query fuzz
      // target).
      {"since past int64", Raw("GET /v1/jobs?since=99999999999999999999 HTTP/1.1"), 400,
       "since '99999999999999999999' is past any time this server knows"},
      {"count past the cap", Post("/v1/jobs?count=1000000", job, "application/yaml"), 400,
       "count must be 1 to 10000; 1000000 is not; submit larger arrays in several requests"},
      {"count=abc", Post("/v1/jobs?count=abc", job, "application/yaml"), 400,
       "count must be a whole number"},
      // Refused before its body is read: what an HTML form or curl -d sends is never a job.
      {"a form-encoded body (curl -d) past 8 KB",
       Post("/v1/nodes/node-1/drain", std::string(10000, 'a'), "application/x-www-form-urlencoded"),
       415, "Content-Type 'application/x-www-form-urlencoded' is not one this API takes"},
      {"deep nesting", Post("/v1/nodes/node-1/drain", std::string(500000, '[')), 400,
       "nests deeper than 32 levels"},
      {"deep nesting in a job", Post("/v1/jobs", std::string(500000, '['), "application/yaml"), 400,
       "nests deeper than 32 levels"},
      {"tokens on an open controller", Post("/v1/tokens", "[1]"), 409,
       "this controller runs with --auth none"},
      {"an unknown job route", Raw("GET /v1/jobs/abc HTTP/1.1"), 404, "no such endpoint"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.got.status, c.status) << c.got.message;
    EXPECT_TRUE(Contains(c.got.message, c.says)) << c.got.message;
  }
  // Nothing of that was accepted, and the controller still answers.
  EXPECT_EQ(cluster_->Get("/v1/jobs")["jobs"].size(), 0u);
  EXPECT_EQ(cluster_->Get("/healthz").value("status", ""), "ok");
}

TEST_F(ApiValidationTest, DeepNestingCostsNoMemory) {
  const long before = ControllerRssKb();
  ASSERT_GT(before, 0);
  // Eight clients' worth of 1 MiB-ish bodies of '[' (each used to allocate ~230 MB).
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(Post("/v1/nodes/node-1/drain", std::string(1000000, '[')).status, 400);
    EXPECT_EQ(Post("/v1/jobs", std::string(1000000, '['), "application/yaml").status, 400);
  }
  const long after = ControllerRssKb();
  EXPECT_LT(after - before, 64 * 1024) << "RSS grew from " << before << " kB to " << after << " kB";
}

// Issue 15, item 12: a retried submission with the same Idempotency-Key gets the first answer,
// also after the controller restarted, and never a second job.
TEST_F(ApiValidationTest, ARetriedSubmissionIsAnsweredOnceAndCreatesNoDuplicate) {
  const std::string job = "name: once\ntasks: [{gpus: 1, command: [sleep, '1']}]\n";
  auto submit = [&](const std::string& key, const std::string& body,
                    std::string* replayed = nullptr) {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    auto r =
        c.Post("/v1/jobs", httplib::Headers{{"Idempotency-Key", key}}, body, "application/yaml");
    if (!r) return std::make_pair(0, nlohmann::json());
    if (replayed) *replayed = r->get_header_value("Idempotent-Replayed");
    return std::make_pair(r->status, nlohmann::json::parse(r->body, nullptr, false));
  };
  auto first = submit("k-1", job);
  ASSERT_EQ(first.first, 201) << first.second.dump();
  std::string replayed;
  auto again = submit("k-1", job, &replayed);
  EXPECT_EQ(again.first, 201);
  EXPECT_EQ(again.second, first.second);
  EXPECT_EQ(replayed, "true");
  EXPECT_EQ(cluster_->Get("/v1/jobs")["jobs"].size(), 1u);
  // Another key is another job; the same key with another body is refused.
  EXPECT_EQ(submit("k-2", job).first, 201);
  auto other = submit("k-1", "name: other\ntasks: [{gpus: 1, command: [x]}]\n");
  EXPECT_EQ(other.first, 409);
  EXPECT_TRUE(Contains(other.second.dump(), "was used for another request")) << other.second.dump();
  // The key is in the store: a restarted controller answers the same.
  cluster_->KillController(SIGTERM);
  cluster_->StartController();
  auto after = submit("k-1", job, &replayed);
  EXPECT_EQ(after.first, 201);
  EXPECT_EQ(after.second, first.second);
  EXPECT_EQ(replayed, "true");
  EXPECT_EQ(cluster_->Get("/v1/jobs")["jobs"].size(), 2u);
}

}  // namespace
}  // namespace hangar::testing
