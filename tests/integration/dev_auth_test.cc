// `hangar dev` is closed to everyone but the account that started it: a per-run token for every
// call but the dashboard's page, /healthz and /metrics, which that account's CLI finds by itself;
// no web page of another origin, no other Host name, no text/plain or form body; and no token
// written in clear to the audit log (the attack replayed: a page on 127.0.0.2 posting a job with
// fetch(..., {mode: 'no-cors'}), and another local account with curl).
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/task_journal.h"
#include "common/net.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOneNode = R"(name: devauth
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 32Gi}
nodes: [{name: node-1}]
)";
constexpr const char* kJob =
    "name: hello\ntasks:\n  - {gpus: 1, cpu: 1, memory: 1Gi, command: [/bin/true]}\n";

struct Ran {
  int rc = -1;
  std::string output;
};

class DevAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("dev_auth_test." + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/run");
    fs::create_directories(dir_ + "/elsewhere");
    // Open folders: only the token file's own mode keeps it from other accounts.
    fs::permissions(dir_, fs::perms(0755));
    std::ofstream(dir_ + "/cluster.yaml") << kOneNode;
    std::ofstream(dir_ + "/elsewhere/job.yaml") << kJob;
    // This account's runtime folder, for `hangar dev` and the CLI alike (as a login session has).
    fs::permissions(dir_ + "/run", fs::perms(0700));
    setenv("XDG_RUNTIME_DIR", (dir_ + "/run").c_str(), 1);
    unsetenv("HANGAR_TOKEN");
    unsetenv("HANGAR_TOKEN_FILE");
    for (int i = 0; i < 50 && port_ == 0; ++i) {
      const int p = PickFreePort("127.0.0.1");
      if (p > 0 && p < 65534 && PortIsFree("127.0.0.1", p + 1)) port_ = p;
    }
    ASSERT_GT(port_, 0);
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    dev_ = fork();
    if (dev_ == 0) {
      const int fd = open((dir_ + "/dev.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execl(HANGAR_BINARY, HANGAR_BINARY, "dev", "--dir", (dir_ + "/dev").c_str(), "--port",
            std::to_string(port_).c_str(), "--cluster", (dir_ + "/cluster.yaml").c_str(), nullptr);
      _exit(127);
    }
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return Contains(ReadFile(dir_ + "/dev.out"), "is up"); }, 60 * kSecond))
        << ReadFile(dir_ + "/dev.out");
    const auto lines = Lines(ReadFile(dir_ + "/dev/dev-token"));
    token_ = lines.empty() ? "" : lines[0];
  }

  void TearDown() override {
    if (dev_ > 0) {
      kill(dev_, SIGTERM);
      if (!LocalCluster::WaitFor([&] { return waitpid(dev_, nullptr, WNOHANG) == dev_; },
                                 20 * kSecond)) {
        kill(dev_, SIGKILL);
        waitpid(dev_, nullptr, 0);
      }
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/dev/agents", ec)) {
      for (const auto& t : agent::LatestTaskRecords(e.path().string())) {
        if (t.value("pid", 0) > 0 && !t.value("ended", false)) kill(-t.value("pid", 0), SIGKILL);
      }
    }
    unsetenv("XDG_RUNTIME_DIR");
    if (!std::getenv("HANGAR_KEEP_TEST_DIRS")) fs::remove_all(dir_);
  }

  // The hangar CLI run from `cwd` with only HANGAR_URL set.
  Ran Cli(const std::vector<std::string>& args, const std::string& cwd) {
    const std::string out = dir_ + "/cli.out";
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      if (chdir(cwd.c_str()) != 0) _exit(126);
      setenv("HANGAR_URL", url_.c_str(), 1);
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

  // A request as raw bytes (so Host and every header are exactly what a browser or curl sends).
  std::pair<int, std::string> Raw(const std::string& head, const std::string& body = "") {
    const std::string req = head + "\r\nContent-Length: " + std::to_string(body.size()) +
                            "\r\nConnection: close\r\n\r\n" + body;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return {0, "no connection"};
    }
    (void)!::write(fd, req.data(), req.size());
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
    const int status = got.size() > 12 ? std::atoi(got.c_str() + 9) : 0;
    const size_t end = got.find("\r\n\r\n");
    return {status, end == std::string::npos ? got : got.substr(end + 4)};
  }

  std::string Host() const { return "Host: 127.0.0.1:" + std::to_string(port_); }
  std::string Bearer() const { return "Authorization: Bearer " + token_; }

  size_t JobCount() {
    auto [status, body] = Raw("GET /v1/jobs HTTP/1.1\r\n" + Host() + "\r\n" + Bearer());
    EXPECT_EQ(status, 200) << body;
    auto j = nlohmann::json::parse(body, nullptr, false);
    return j.is_object() ? j["jobs"].size() : 0;
  }

  std::string dir_, url_, token_;
  int port_ = 0;
  pid_t dev_ = 0;
};

TEST_F(DevAuthTest, ACallWithoutTheTokenIsRefusedAndTheCliFindsItFromAnyFolder) {
  EXPECT_EQ(token_.size(), 8u + 64u) << "DIR/dev-token: " << token_;
  auto [status, body] =
      Raw("POST /v1/jobs HTTP/1.1\r\n" + Host() + "\r\nContent-Type: application/yaml", kJob);
  EXPECT_EQ(status, 401) << body;
  EXPECT_TRUE(Contains(body, "per-run token")) << body;
  EXPECT_TRUE(Contains(body, dir_ + "/dev/dev-token")) << body;
  // Reads of the API too (job logs and environments are the user's); the page, health and metrics
  // stay open.
  EXPECT_EQ(Raw("GET /v1/jobs HTTP/1.1\r\n" + Host()).first, 401);
  EXPECT_EQ(Raw("GET / HTTP/1.1\r\n" + Host()).first, 200);
  EXPECT_EQ(Raw("GET /healthz HTTP/1.1\r\n" + Host()).first, 200);
  EXPECT_EQ(Raw("GET /metrics HTTP/1.1\r\n" + Host()).first, 200);
  EXPECT_EQ(JobCount(), 0u);

  // The CLI, from a folder of its own with nothing but HANGAR_URL, finds this run's token.
  Ran submit = Cli({"submit", "job.yaml"}, dir_ + "/elsewhere");
  EXPECT_EQ(submit.rc, 0) << submit.output;
  EXPECT_TRUE(Contains(submit.output, "submitted job 1")) << submit.output;
  EXPECT_EQ(JobCount(), 1u);
  // The token is this account's alone: the file, the record and its folder.
  for (const std::string& f :
       {dir_ + "/dev/dev-token", dir_ + "/run/hangar/dev/" + std::to_string(port_) + ".token"}) {
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
    EXPECT_EQ(st.st_uid, ::geteuid()) << f;
  }
  EXPECT_TRUE(
      Contains(ReadFile(dir_ + "/run/hangar/dev/" + std::to_string(port_) + ".token"), token_));
  // The banner names the file, never the token.
  EXPECT_TRUE(Contains(ReadFile(dir_ + "/dev.out"), "token: " + dir_ + "/dev/dev-token"))
      << ReadFile(dir_ + "/dev.out");
  EXPECT_FALSE(Contains(ReadFile(dir_ + "/dev.out"), token_));
}

// The attack: a page on another loopback address posts a job with fetch(url, {method: 'POST',
// mode: 'no-cors', body}) -- a "simple" request, text/plain, that the browser sends without asking.
TEST_F(DevAuthTest, ACrossOriginBrowserPostIsRefusedAndMakesNoJob) {
  const std::string origin = "Origin: http://127.0.0.2:" + std::to_string(port_);
  const std::string browser =
      "\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Site: cross-site\r\nUser-Agent: Mozilla/5.0";
  auto [status, body] = Raw("POST /v1/jobs HTTP/1.1\r\n" + Host() + "\r\n" + origin +
                                "\r\nContent-Type: text/plain;charset=UTF-8" + browser,
                            kJob);
  EXPECT_EQ(status, 403) << body;
  EXPECT_TRUE(Contains(body, "a web page of another origin")) << body;
  // Not even with the token (a page cannot read it, but the refusal does not rest on that).
  auto with_token = Raw("POST /v1/jobs HTTP/1.1\r\n" + Host() + "\r\n" + origin + "\r\n" +
                            Bearer() + "\r\nContent-Type: application/yaml" + browser,
                        kJob);
  EXPECT_EQ(with_token.first, 403) << with_token.second;
  // text/plain and forms are refused from anyone, with the token or not.
  for (const char* type : {"text/plain;charset=UTF-8", "application/x-www-form-urlencoded"}) {
    auto typed =
        Raw("POST /v1/jobs HTTP/1.1\r\n" + Host() + "\r\n" + Bearer() + "\r\nContent-Type: " + type,
            kJob);
    EXPECT_EQ(typed.first, 415) << type << ": " << typed.second;
    EXPECT_TRUE(Contains(typed.second, "application/yaml")) << typed.second;
  }
  EXPECT_EQ(JobCount(), 0u);
}

// DNS rebinding: a name of the attacker's that resolves to 127.0.0.1 reaches the port, with its
// own Host; refused even with the token.
TEST_F(DevAuthTest, AnotherHostNameIsRefused) {
  for (const std::string& host :
       {"Host: rebind.example:" + std::to_string(port_), std::string("Host: 127.0.0.1")}) {
    auto [status, body] = Raw("POST /v1/jobs HTTP/1.1\r\n" + host + "\r\n" + Bearer() +
                                  "\r\nContent-Type: application/yaml",
                              kJob);
    EXPECT_EQ(status, 421) << host << ": " << body;
    EXPECT_TRUE(Contains(body, "this API answers to 127.0.0.1:" + std::to_string(port_))) << body;
    EXPECT_EQ(Raw("GET / HTTP/1.1\r\n" + host).first, 421) << host;
  }
  EXPECT_EQ(Raw("GET /healthz HTTP/1.1\r\nHost: localhost:" + std::to_string(port_)).first, 200);
  EXPECT_EQ(JobCount(), 0u);
}

// Another local account cannot read the token, and without it gets nothing done.
TEST_F(DevAuthTest, AnotherLocalAccountCannotReadTheTokenOrSubmit) {
  ASSERT_EQ(::geteuid(), 0u)
      << "this test switches to uid 65534 and must run as root (the project's tests do)";
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0)
      _exit(10);
    const int fd = ::open((dir_ + "/dev/dev-token").c_str(), O_RDONLY);
    if (fd >= 0 || errno != EACCES) _exit(11);
    const int record =
        ::open((dir_ + "/run/hangar/dev/" + std::to_string(port_) + ".token").c_str(), O_RDONLY);
    if (record >= 0) _exit(12);
    auto [status, body] =
        Raw("POST /v1/jobs HTTP/1.1\r\n" + Host() + "\r\nContent-Type: application/yaml", kJob);
    _exit(status == 401 ? 0 : 13);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(JobCount(), 0u);
}

// A token put in a URL (?token=, ?access_token=) is masked before the audit log stores the call.
TEST_F(DevAuthTest, ATokenInTheQueryStringIsNotStoredInClear) {
  auto [status, body] =
      Raw("POST /v1/jobs?token=" + token_ + "&access_token=" + token_ + " HTTP/1.1\r\n" + Host() +
              "\r\n" + Bearer() + "\r\nContent-Type: application/yaml",
          kJob);
  ASSERT_EQ(status, 201) << body;
  auto refused = Raw("POST /v1/jobs/1/cancel?token=" + token_ + " HTTP/1.1\r\n" + Host());
  EXPECT_EQ(refused.first, 401);
  // Audit rows ride on the controller's next commit.
  std::string audit;
  LocalCluster::WaitFor(
      [&] {
        audit = Raw("GET /v1/audit HTTP/1.1\r\n" + Host() + "\r\n" + Bearer()).second;
        return Contains(audit, "/v1/jobs/1/cancel") && Contains(audit, "/v1/jobs?");
      },
      10 * kSecond);
  EXPECT_TRUE(Contains(audit, "/v1/jobs?token=REDACTED&access_token=REDACTED")) << audit;
  EXPECT_TRUE(Contains(audit, "/v1/jobs/1/cancel?token=REDACTED")) << audit;
  EXPECT_TRUE(Contains(audit, "admin (the hangar dev token)")) << audit;
  EXPECT_TRUE(Contains(audit, "none (no hangar dev token)")) << audit;
  const std::string secret = token_.substr(8);  // without "hgr_dev_"
  EXPECT_FALSE(Contains(audit, secret)) << audit;
  // Nor anywhere the controller writes: its store (with its write-ahead log) and its log.
  for (const char* f : {"/dev/state.db", "/dev/state.db-wal", "/dev/logs/controller.log"}) {
    EXPECT_FALSE(Contains(ReadFile(dir_ + f), secret)) << f;
  }
}

}  // namespace
}  // namespace hangar::testing
