// Interactive sessions end to end (docs/interactive.md): a real controller with --auth tokens, a
// real agent (root, as on a node) and the real `hangar` CLI driven through a pseudo-terminal the
// test holds (forkpty), as a person at a terminal would: `hangar run -it -- sh` (type, resize,
// Ctrl-C a sleep, exit with a status), `hangar exec` beside a running task (its user, its
// environment, stdin, a terminal), and another user's token refused (403, in the audit log).
// Tasks run as numeric uids (no accounts: nothing in /etc changes), as run_as_test does.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "common/net.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}]\n";

// `hangar ARGS` on a pseudo-terminal of the test's: what a person types and sees.
class Terminal {
 public:
  Terminal(const std::vector<std::string>& args, const std::string& token, unsigned short rows,
           unsigned short cols) {
    winsize ws{};
    ws.ws_row = rows;
    ws.ws_col = cols;
    pid_ = forkpty(&leader_, nullptr, nullptr, &ws);
    if (pid_ == 0) {
      setenv("HANGAR_TOKEN", token.c_str(), 1);
      setenv("TERM", "xterm", 1);
      std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(HANGAR_BINARY, argv.data());
      _exit(127);
    }
  }
  ~Terminal() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (leader_ >= 0) close(leader_);
  }

  void Type(const std::string& keys) {
    ASSERT_EQ(write(leader_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }

  // Reads until `text` shows (after what earlier Expects consumed) or `timeout` passes.
  bool Expect(const std::string& text, Duration timeout = 20 * kSecond) {
    const int64_t until = MonotonicNanos() + timeout * 1'000'000;
    for (;;) {
      if (size_t at = seen_.find(text, consumed_); at != std::string::npos) {
        consumed_ = at + text.size();
        return true;
      }
      const int64_t left = (until - MonotonicNanos()) / 1'000'000;
      if (left <= 0) return false;
      pollfd p{leader_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(leader_, buf, sizeof buf);
      if (n <= 0) return seen_.find(text, consumed_) != std::string::npos;
      seen_.append(buf, static_cast<size_t>(n));
    }
  }

  void Resize(unsigned short rows, unsigned short cols) {
    winsize ws{};
    ws.ws_row = rows;
    ws.ws_col = cols;
    ioctl(leader_, TIOCSWINSZ, &ws);  // the kernel tells the CLI (its foreground group) by SIGWINCH
  }

  // The CLI's exit status (-1: it did not exit within `timeout`), reading what it still prints.
  int Wait(Duration timeout = 20 * kSecond) {
    const int64_t until = MonotonicNanos() + timeout * 1'000'000;
    while (MonotonicNanos() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        Expect("\x01never", 200);  // what is left on the terminal, for the failure messages
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      Expect("\x01never", 50);
    }
    return -1;
  }

  const std::string& seen() const { return seen_; }

 private:
  int leader_ = -1;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string seen_;
  size_t consumed_ = 0;
};

struct Ran {
  int rc = -1;
  std::string output;
};

// `hangar ARGS` left running (a port forward), its output in `out`; SIGINT ends it.
class Background {
 public:
  Background(const std::vector<std::string>& args, const std::string& token, std::string out)
      : out_(std::move(out)) {
    pid_ = fork();
    if (pid_ == 0) {
      const int o = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int none = open("/dev/null", O_RDONLY);
      dup2(none, 0);
      dup2(o, 1);
      dup2(o, 2);
      setenv("HANGAR_TOKEN", token.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(HANGAR_BINARY, argv.data());
      _exit(127);
    }
  }
  ~Background() { Stop(); }

  // Ends it with SIGINT (SIGKILL if it lingers 10 s); its exit status.
  int Stop() {
    if (pid_ <= 0) return status_;
    kill(pid_, SIGINT);
    int status = 0;
    for (int i = 0; i < 1000 && waitpid(pid_, &status, WNOHANG) != pid_; ++i) {
      if (i == 999) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
      usleep(10 * 1000);
    }
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }

  std::string Output() const {
    std::ifstream f(out_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // The local port it says it forwards from (0: it did not say so within 20 s).
  int ForwardedPort() const {
    const std::regex line("Forwarding from 127\\.0\\.0\\.1:([0-9]+) ");
    int port = 0;
    LocalCluster::WaitFor(
        [&] {
          std::smatch m;
          const std::string out = Output();
          if (std::regex_search(out, m, line)) port = std::stoi(m[1]);
          return port > 0;
        },
        20 * kSecond);
    return port;
  }

 private:
  std::string out_;
  pid_t pid_ = -1;
  int status_ = -1;
};

// A task's web server: answers every GET with its user and the path asked for.
constexpr const char* kTaskServer = R"(
import http.server, os, sys
class Answer(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        body = ('task-server uid=%d path=%s' % (os.getuid(), self.path)).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), Answer).serve_forever()
)";

class InteractiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the agent runs tasks as other users only as root (as on a node)";
    cluster_ =
        std::make_unique<LocalCluster>(kCluster, std::vector<std::string>{"--auth", "tokens"});
    cluster_->StartController();
    std::ifstream in(cluster_->dir() + "/admin.token");
    std::getline(in, admin_);
    alice_ = MakeToken({"--user", "alice", "--role", "user", "--uid", "61001"});
    bob_ = MakeToken({"--user", "bob", "--role", "user", "--uid", "61002"});
    const std::string node =
        Post(admin_, "/v1/tokens", R"({"role": "node", "node": "node-1"})").value("token", "");
    std::ofstream(cluster_->dir() + "/node-1.token") << node << "\n";
    cluster_->StartAgent("node-1", {"--token-file", cluster_->dir() + "/node-1.token"});
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return Get(admin_, "/v1/nodes/node-1").value("state", "") == "ready"; },
        20 * kSecond));
  }

  nlohmann::json Get(const std::string& token, const std::string& path) {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    auto r = c.Get(path, {{"Authorization", "Bearer " + token}});
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }
  nlohmann::json Post(const std::string& token, const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    auto r = c.Post(path, {{"Authorization", "Bearer " + token}}, body, "application/yaml");
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }

  std::vector<std::string> WithServer(std::vector<std::string> args) const {
    // Before the command's own `--`, if it has one.
    auto at = std::find(args.begin(), args.end(), "--");
    args.insert(at, {"--server", "http://127.0.0.1:" + std::to_string(cluster_->api_port())});
    return args;
  }

  // `hangar ARGS` with `token`, stdin from `input`; its status and output (stdout and stderr).
  Ran Hangar(std::vector<std::string> args, const std::string& token,
             const std::string& input = "") {
    args = WithServer(std::move(args));
    const std::string out = cluster_->dir() + "/cli.out", in = cluster_->dir() + "/cli.in";
    std::ofstream(in) << input;
    pid_t pid = fork();
    if (pid == 0) {
      int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), i = open(in.c_str(), O_RDONLY);
      dup2(i, 0);
      dup2(o, 1);
      dup2(o, 2);
      setenv("HANGAR_TOKEN", token.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(HANGAR_BINARY, argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::ifstream f(out);
    std::stringstream ss;
    ss << f.rdbuf();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
  }

  std::string MakeToken(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"token", "create"});
    Ran r = Hangar(flags, admin_);
    EXPECT_EQ(r.rc, 0) << r.output;
    std::istringstream lines(r.output);
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind("hgr_", 0) == 0) return l;
    }
    ADD_FAILURE() << "no token in: " << r.output;
    return "";
  }

  // A batch job of `token`'s that sleeps, running.
  uint64_t RunningJob(const std::string& token) {
    auto r =
        Post(token, "/v1/jobs", "name: sleeper\ntasks: [{gpus: 2, command: [sleep, '300']}]\n");
    const uint64_t id = r.value("id", uint64_t{0});
    EXPECT_GT(id, 0u) << r.dump();
    EXPECT_TRUE(LocalCluster::WaitFor(
        [&] {
          return Get(token, "/v1/jobs/" + std::to_string(id)).value("state", "") == "running";
        },
        20 * kSecond));
    return id;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string admin_, alice_, bob_;
};

TEST_F(InteractiveTest, RunGivesAShellThatTypesResizesTakesCtrlCAndExitsWithItsStatus) {
  Terminal t(WithServer({"run", "-it", "--", "sh"}), alice_, 30, 100);
  ASSERT_TRUE(t.Expect("submitted interactive job")) << t.seen();
  // The echo of what is typed shows the command; only the shell's answer shows the result.
  t.Type("echo hel''lo-$((6*7))\r");
  ASSERT_TRUE(t.Expect("hello-42")) << t.seen();
  t.Type("echo uid-$(id -u) job-$HANGAR_JOB_ID\r");
  ASSERT_TRUE(t.Expect("uid-61001 job-"))
      << "the task runs as alice's uid, never root: " << t.seen();
  t.Type("stty size\r");
  ASSERT_TRUE(t.Expect("30 100")) << "the terminal's size reaches the node: " << t.seen();
  t.Resize(40, 120);
  usleep(300 * 1000);  // the resize travels on its own; the next line is typed after it
  t.Type("stty size\r");
  ASSERT_TRUE(t.Expect("40 120")) << "a resize reaches the node: " << t.seen();
  t.Type("sleep 100\r");
  usleep(500 * 1000);
  t.Type("\x03");  // Ctrl-C: raw on this side, it is the node's terminal that makes it SIGINT
  t.Type("echo after-$((1+1))\r");
  ASSERT_TRUE(t.Expect("after-2", 10 * kSecond))
      << "Ctrl-C ended the sleep and the shell reads on: " << t.seen();
  t.Type("exit 7\r");
  EXPECT_EQ(t.Wait(), 7) << "the program's exit status is hangar's: " << t.seen();

  // The job is a session: so it shows.
  auto jobs = Get(alice_, "/v1/jobs");
  ASSERT_FALSE(jobs["jobs"].empty()) << jobs.dump();
  EXPECT_EQ(jobs["jobs"][0].value("interactive", false), true) << jobs.dump();
  Ran table = Hangar({"jobs", "--all"}, alice_);
  EXPECT_NE(table.output.find("interactive"), std::string::npos) << table.output;
}

// Slurm's salloc as a person types it: a shell on the allocation with its variables, `srun`
// inside it running a step there, and salloc's exit status the shell's.
TEST_F(InteractiveTest, SallocGivesAShellOnTheAllocationWhereSrunRunsSteps) {
  // Slurm's commands take no --server: they find the controller as scripts do, by HANGAR_URL.
  setenv("HANGAR_URL", ("http://127.0.0.1:" + std::to_string(cluster_->api_port())).c_str(), 1);
  Terminal t({"slurm", "salloc", "-N1", "--gres=gpu:2", "-t", "10"}, alice_, 30, 100);
  ASSERT_TRUE(t.Expect("salloc: Pending job allocation ")) << t.seen();
  ASSERT_TRUE(t.Expect("salloc: Granted job allocation ")) << t.seen();
  // As Slurm's: SLURM_NTASKS only with -n (or --ntasks-per-node/--ntasks-per-gpu).
  t.Type("echo alloc-$SLURM_JOB_NUM_NODES-${SLURM_NTASKS:-none}-uid$(id -u)\r");
  ASSERT_TRUE(t.Expect("alloc-1-none-uid61001")) << t.seen();
  t.Type("srun sh -c 'echo step-$SLURM_STEP_ID-on-$SLURM_NODEID'\r");
  ASSERT_TRUE(t.Expect("step-0-on-0")) << "srun runs a step on the allocation: " << t.seen();
  t.Type("exit 4\r");
  EXPECT_EQ(t.Wait(), 4) << "salloc's exit status is its shell's: " << t.seen();
  const auto jobs = Get(alice_, "/v1/jobs?name=salloc");
  ASSERT_EQ(jobs["jobs"].size(), 1u) << jobs.dump();
  EXPECT_EQ(jobs["jobs"][0].value("interactive", false), true) << jobs.dump();
}

// Who has a session open on a job, and how idle it is (GET /v1/jobs/ID/sessions, which the
// dashboard's job page shows): a terminal and an exec beside it, both alice's; the last input once
// she types; GPUs idle once the fake backend says so; the queue's idle policy. Bob may not look.
TEST_F(InteractiveTest, ItsSessionsShowWhoIsAttachedAndHowIdleItIs) {
  const auto applied = Post(admin_, "/v1/queues",
                            "queues:\n  - name: default\n"
                            "    idle: {gpu_util_below: 10, for: 1h, action: stop}\n");
  ASSERT_TRUE(applied.contains("changed") || applied.contains("created")) << applied.dump();
  Terminal t(WithServer({"run", "-it", "--gpus", "1", "--", "sh"}), alice_, 30, 100);
  ASSERT_TRUE(t.Expect("submitted interactive job")) << t.seen();
  t.Type("echo 0 > \"$HANGAR_FAKE_GPU_UTIL_FILE\"; echo typed-$((40+2))\r");
  ASSERT_TRUE(t.Expect("typed-42")) << t.seen();
  // The shell can answer before the controller has committed its task's report that it runs (the
  // terminal goes to the agent, the report through the state thread and the store): wait for it.
  nlohmann::json running;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        running = Get(alice_, "/v1/jobs?state=running");
        return running["jobs"].size() == 1;
      },
      10 * kSecond))
      << running.dump();
  const std::string id = std::to_string(running["jobs"][0].value("id", 0));
  Background exec({"exec", id, "--server",
                   "http://127.0.0.1:" + std::to_string(cluster_->api_port()), "--", "sleep", "60"},
                  alice_, cluster_->dir() + "/exec.out");
  nlohmann::json s;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        s = Get(alice_, "/v1/jobs/" + id + "/sessions");
        return s.contains("sessions") && s["sessions"].size() == 2 && !s["input_at_ms"].is_null() &&
               !s["gpus_idle_since_ms"].is_null();
      },
      20 * kSecond))
      << s.dump(2);
  EXPECT_EQ(s["sessions"][0].value("kind", ""), "attach") << s.dump(2);
  EXPECT_EQ(s["sessions"][0].value("user", ""), "alice") << s.dump(2);
  EXPECT_EQ(s["sessions"][1].value("kind", ""), "exec") << s.dump(2);
  EXPECT_EQ(s["sessions"][1].value("program", ""), "sleep") << s.dump(2);
  EXPECT_TRUE(s.value("interactive", false) && s.value("terminal", false)) << s.dump(2);
  EXPECT_EQ(s["idle_policy"].value("for_s", 0), 3600) << s.dump(2);
  EXPECT_EQ(s["idle_policy"].value("action", ""), "stop") << s.dump(2);
  EXPECT_EQ(s.value("idle_warned", true), false) << s.dump(2);

  httplib::Client c("127.0.0.1", cluster_->api_port());
  auto refused = c.Get("/v1/jobs/" + id + "/sessions", {{"Authorization", "Bearer " + bob_}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403) << refused->body;

  exec.Stop();  // the exec's session ends with its client
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        s = Get(alice_, "/v1/jobs/" + id + "/sessions");
        return s.contains("sessions") && s["sessions"].size() == 1;
      },
      10 * kSecond))
      << s.dump(2);
  t.Type("exit\r");
  t.Wait();
}

// The idle policy on a session: its GPUs are idle (the shell tells the fake backend they are at
// 0%), and once nobody types for the policy's `for` it is reclaimed -- the attached terminal hears
// of it first. Typing resets the clock, so a session in use is never taken.
TEST_F(InteractiveTest, AnIdleSessionWarnsItsTerminalAndIsReclaimedUnlessSomeoneTypes) {
  const auto applied = Post(admin_, "/v1/queues",
                            "queues:\n  - name: default\n"
                            "    idle: {gpu_util_below: 10, for: 8s, action: stop}\n");
  ASSERT_TRUE(applied.contains("changed") || applied.contains("created")) << applied.dump();
  Terminal t(WithServer({"run", "-it", "--gpus", "1", "--", "sh"}), alice_, 30, 100);
  ASSERT_TRUE(t.Expect("submitted interactive job")) << t.seen();
  // The fake GPU backend counts a task's GPUs busy until it writes their utilisation.
  t.Type("echo 0 > \"$HANGAR_FAKE_GPU_UTIL_FILE\"; echo ready-$((2+3))\r");
  ASSERT_TRUE(t.Expect("ready-5")) << t.seen();
  // Kept alive by typing: a key every 2 s for 12 s (longer than `for`), never warned.
  for (int i = 0; i < 6; ++i) {
    usleep(2000 * 1000);
    t.Type(" ");
  }
  t.Type(
      "\x15"
      "echo still-$((3+4))\r");  // Ctrl-U clears the spaces
  ASSERT_TRUE(t.Expect("still-7")) << "a session in use is not reclaimed: " << t.seen();
  EXPECT_EQ(t.seen().find("[hangar] this session has been idle"), std::string::npos) << t.seen();
  // Left alone: warned halfway through `for`, then ended.
  ASSERT_TRUE(t.Expect("[hangar] this session has been idle for", 20 * kSecond)) << t.seen();
  ASSERT_TRUE(t.Expect("queue default will end it in")) << t.seen();
  t.Wait(30 * kSecond);
  auto jobs = Get(alice_, "/v1/jobs?state=cancelled");
  ASSERT_FALSE(jobs["jobs"].empty()) << jobs.dump();
  const auto job = Get(alice_, "/v1/jobs/" + std::to_string(jobs["jobs"][0].value("id", 0)));
  EXPECT_NE(job.value("message", "").find("and its terminal had no input for"), std::string::npos)
      << job.dump();
}

TEST_F(InteractiveTest, ExecRunsBesideATaskAsItsUserWithItsEnvironmentAndStatus) {
  const uint64_t id = RunningJob(alice_);
  Ran r = Hangar(
      {"exec", std::to_string(id), "--", "sh", "-c",
       "echo uid=$(id -u) job=$HANGAR_JOB_ID gpus=$CUDA_VISIBLE_DEVICES; echo oops >&2; exit 3"},
      alice_);
  EXPECT_EQ(r.rc, 3) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("uid=61001 job=" + std::to_string(id) + " gpus=[0-9],[0-9]\n")))
      << "the task's two GPUs, as it has them: " << r.output;
  EXPECT_NE(r.output.find("oops"), std::string::npos) << "stderr comes back: " << r.output;

  Ran piped = Hangar({"exec", "-i", std::to_string(id) + ".0", "--", "tr", "a-z", "A-Z"}, alice_,
                     "through stdin\n");
  EXPECT_EQ(piped.rc, 0) << piped.output;
  EXPECT_NE(piped.output.find("THROUGH STDIN"), std::string::npos) << piped.output;

  Terminal t(WithServer({"exec", "-it", std::to_string(id), "--", "sh"}), alice_, 24, 80);
  t.Type("echo $((2+3))x-$(tty | cut -c1-8)\r");
  ASSERT_TRUE(t.Expect("5x-/dev/pts")) << "a terminal of its own on the node: " << t.seen();
  t.Type("exit\r");
  EXPECT_EQ(t.Wait(), 0) << t.seen();
}

TEST_F(InteractiveTest, RunWithoutATerminalPassesStdinAndItsEnd) {
  Ran r = Hangar({"run", "-i", "--", "sh", "-c", "read first; echo got-$first; wc -c"}, alice_,
                 "hi\n12345");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("got-hi\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("5\n"), std::string::npos)
      << "the rest of stdin, and then its end (wc ends): " << r.output;

  Ran closed = Hangar({"run", "--", "sh", "-c", "wc -c"}, alice_, "not passed without -i");
  EXPECT_EQ(closed.rc, 0) << closed.output;
  EXPECT_NE(closed.output.find("0\n"), std::string::npos)
      << "without -i the task's stdin is empty: " << closed.output;
}

TEST_F(InteractiveTest, AnotherUsersTokenIsRefusedAndAudited) {
  const uint64_t id = RunningJob(alice_);
  Ran exec = Hangar({"exec", std::to_string(id), "--", "true"}, bob_);
  EXPECT_NE(exec.rc, 0) << exec.output;
  EXPECT_NE(exec.output.find("403"), std::string::npos) << exec.output;
  EXPECT_NE(exec.output.find("alice's"), std::string::npos)
      << "the reason names whose job it is: " << exec.output;
  Ran attach = Hangar({"attach", std::to_string(id)}, bob_);
  EXPECT_NE(attach.rc, 0) << attach.output;
  EXPECT_NE(attach.output.find("403"), std::string::npos) << attach.output;

  // An admin may, and that is recorded too.
  Ran admin = Hangar({"exec", std::to_string(id), "--", "id", "-u"}, admin_);
  EXPECT_EQ(admin.rc, 0) << admin.output;
  EXPECT_NE(admin.output.find("61001"), std::string::npos)
      << "even an admin's exec runs as the task's user";

  bool refused = false, admitted = false;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const nlohmann::json audit = Get(admin_, "/v1/audit?limit=100");
        for (const auto& row : audit["audit"]) {
          const std::string path = row.value("path", "");
          if (path.find("/v1/jobs/" + std::to_string(id) + "/exec") == std::string::npos) continue;
          refused = refused || (row.value("user", "") == "bob" && row.value("status", 0) == 403);
          admitted =
              admitted || (row.value("role", "") == "admin" && row.value("status", 0) == 200 &&
                           row.value("message", "").find("alice") != std::string::npos);
        }
        return refused && admitted;
      },
      10 * kSecond))
      << "refused: " << refused << ", admitted: " << admitted << "; "
      << Get(admin_, "/v1/audit?limit=20").dump();
}

TEST_F(InteractiveTest, PortForwardReachesTheTasksServerOnlyAndOnlyForItsOwner) {
  const int remote = PickFreePort("127.0.0.1");
  const nlohmann::json spec = {
      {"name", "web"},
      {"tasks",
       {{{"gpus", 1},
         {"command", {"/usr/bin/python3", "-c", kTaskServer, std::to_string(remote)}}}}}};
  const uint64_t id = Post(alice_, "/v1/jobs", spec.dump()).value("id", uint64_t{0});
  ASSERT_GT(id, 0u);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        httplib::Client direct("127.0.0.1", remote);
        auto r = direct.Get("/ready");
        return r && r->status == 200;
      },
      30 * kSecond))
      << "the task's server never answered: " << Get(alice_, "/v1/jobs/" + std::to_string(id));

  Background forward(
      WithServer({"port-forward", std::to_string(id), "0:" + std::to_string(remote)}), alice_,
      cluster_->dir() + "/forward.out");
  const int local = forward.ForwardedPort();
  ASSERT_GT(local, 0) << forward.Output();
  // Several connections at once, each its own session; one client keeps its connection.
  std::vector<std::string> bodies(8);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < bodies.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", local);
      c.set_keep_alive(true);
      c.set_read_timeout(20, 0);
      for (int round = 0; round < 2; ++round) {
        auto r = c.Get("/page-" + std::to_string(i));
        if (r) bodies[i] += r->body + ";";
      }
    });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < bodies.size(); ++i) {
    const std::string want = "task-server uid=61001 path=/page-" + std::to_string(i) + ";";
    EXPECT_EQ(bodies[i], want + want) << "connection " << i << "; " << forward.Output();
  }

  // A server on the node that is not the task's (this test's own) is never reached.
  const int theirs_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(theirs_fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(theirs_fd, 8), 0);
  socklen_t len = sizeof a;
  getsockname(theirs_fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int theirs = ntohs(a.sin_port);
  Background stray(WithServer({"port-forward", std::to_string(id), "0:" + std::to_string(theirs)}),
                   alice_, cluster_->dir() + "/stray.out");
  const int stray_local = stray.ForwardedPort();
  ASSERT_GT(stray_local, 0) << stray.Output();
  httplib::Client through("127.0.0.1", stray_local);
  through.set_read_timeout(10, 0);
  auto refused = through.Get("/");
  EXPECT_FALSE(refused) << "answered: " << refused->body;
  pollfd p{theirs_fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "no connection ever reached a server that is not the task's";
  close(theirs_fd);
  EXPECT_EQ(stray.Stop(), 0);
  EXPECT_NE(stray.Output().find("nothing of the task's listens on port " + std::to_string(theirs)),
            std::string::npos)
      << stray.Output();
  EXPECT_EQ(forward.Stop(), 0) << "Ctrl-C ends a port forward: " << forward.Output();

  Ran bob = Hangar({"port-forward", std::to_string(id), "0:" + std::to_string(remote)}, bob_);
  EXPECT_NE(bob.rc, 0) << bob.output;
  EXPECT_NE(bob.output.find("403"), std::string::npos) << bob.output;
  EXPECT_NE(bob.output.find("alice's"), std::string::npos) << bob.output;
  EXPECT_EQ(bob.output.find("Forwarding from"), std::string::npos)
      << "a refused forward opens no local port: " << bob.output;
  bool refused_row = false, opened_row = false;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const nlohmann::json audit = Get(admin_, "/v1/audit?limit=200");
        for (const auto& row : audit["audit"]) {
          const std::string path = row.value("path", "");
          if (path.find("/v1/jobs/" + std::to_string(id) + "/port-forward") == std::string::npos ||
              path.find("port=" + std::to_string(remote)) == std::string::npos)
            continue;
          refused_row =
              refused_row || (row.value("user", "") == "bob" && row.value("status", 0) == 403);
          opened_row =
              opened_row || (row.value("user", "") == "alice" && row.value("status", 0) == 200);
        }
        return refused_row && opened_row;
      },
      10 * kSecond))
      << "refused: " << refused_row << ", opened: " << opened_row;
}

}  // namespace
}  // namespace hangar::testing
