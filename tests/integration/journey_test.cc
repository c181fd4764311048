// A user's journey with the `hangar` binary itself (issue 15): mistyped commands, `hangar dev`
// started, stopped with Ctrl-C and restarted, examples that are refused or fail.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/task_journal.h"
#include "common/net.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int rc = -1;
  std::string output;  // stdout and stderr together
};

// Runs the hangar binary with `args` (no shell) and waits for it.
Ran RunHangar(const std::vector<std::string>& args) {
  char path[] = "/tmp/journey_out.XXXXXX";
  const int fd = mkstemp(path);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(HANGAR_BINARY, argv.data());
    _exit(127);
  }
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  Ran r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ReadFile(path)};
  unlink(path);
  return r;
}

TEST(JourneyTest, AnUnknownCommandIsNamed) {
  for (const std::string word : {"foo", "launch"}) {
    Ran r = RunHangar({word, "7"});
    EXPECT_EQ(r.rc, 2) << r.output;
    EXPECT_TRUE(Contains(
        r.output, "error: unknown command 'hangar " + word + "'. The commands of 'hangar' are: "))
        << r.output;
  }
  // Slurm's client commands point to Hangar's, not to the nearest spelling (requeue for squeue).
  Ran squeue = RunHangar({"squeue", "-u", "bob"});
  EXPECT_EQ(squeue.rc, 2);
  EXPECT_EQ(squeue.output.rfind(
                "error: unknown command 'hangar squeue': Slurm's squeue is 'hangar jobs -o "
                "slurm' here",
                0),
            0u)
      << squeue.output;
  EXPECT_FALSE(Contains(squeue.output, "requeue")) << squeue.output;
  // A typo is caught at any depth, with the nearest command and the list of that level.
  Ran typo = RunHangar({"token", "craete", "--user", "x"});
  EXPECT_EQ(typo.rc, 2) << typo.output;
  EXPECT_EQ(
      typo.output,
      "error: unknown command 'hangar token craete'; did you mean 'hangar token create'? The "
      "commands of "
      "'hangar token' are: create, list, revoke, rotate; run 'hangar token --help' for more\n");
  Ran top = RunHangar({"submitt", "job.yaml"});
  EXPECT_TRUE(Contains(top.output, "did you mean 'hangar submit'?")) << top.output;
  Ran bare = RunHangar({"sim"});
  EXPECT_EQ(bare.rc, 2) << bare.output;
  EXPECT_EQ(
      bare.output,
      "error: 'hangar sim' needs a command: fgd, mig, replay, goodput, services, windows; run "
      "'hangar sim --help' for more\n");
  Ran none = RunHangar({});
  EXPECT_NE(none.rc, 0);
  EXPECT_TRUE(Contains(none.output, "no command given")) << none.output;
  Ran help = RunHangar({"--help"});
  EXPECT_EQ(help.rc, 0);
  EXPECT_TRUE(Contains(help.output, "submit")) << help.output;
}

TEST(JourneyTest, AJobIdThatIsNotANumberIsExplained) {
  Ran r = RunHangar({"cancel", "llm-serve", "--server", "127.0.0.1:1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(
      r.output,
      "error: job ids are numbers; 'llm-serve' is not one - find the id with `hangar jobs`\n");
}

constexpr const char* kOneNode = R"(name: journey
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 32Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-1"}]}
)";

std::string JobYaml(const std::string& name, const std::string& script) {
  nlohmann::json cmd = {"/bin/sh", "-c", script};  // JSON is YAML: quoting done right
  return "name: " + name +
         "\nqueue: default\ntasks:\n  - name: main\n    gpus: 1\n    cpu: 1\n    memory: 1Gi\n" +
         "    command: " + cmd.dump() + "\n";
}

// `hangar dev` as a child process of the test, with its output in a file.
class DevTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("journey_test." + std::to_string(getpid()) + "." +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/examples");
    std::ofstream(dir_ + "/cluster.yaml") << kOneNode;
    // The API port and the next one (the agents') must both be free.
    for (int i = 0; i < 50 && port_ == 0; ++i) {
      const int p = PickFreePort("127.0.0.1");
      if (p > 0 && p < 65534 && PortIsFree("127.0.0.1", p + 1)) port_ = p;
    }
    ASSERT_GT(port_, 0);
  }

  void TearDown() override {
    if (dev_ > 0) {
      kill(dev_, SIGKILL);
      waitpid(dev_, nullptr, 0);
    }
    KillEverythingUnder(dir_);
    LocalCluster::UnmountPins(dir_ + "/dev/agents");
    // Tasks (their command lines need not name the directory), as the agents recorded them.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/dev/agents", ec)) {
      for (const auto& t : agent::LatestTaskRecords(e.path().string())) {
        if (t.value("pid", 0) > 0 && !t.value("ended", false)) kill(-t.value("pid", 0), SIGKILL);
      }
    }
    std::error_code gone;
    if (!std::getenv("HANGAR_KEEP_TEST_DIRS")) fs::remove_all(dir_, gone);
  }

  // Any process whose command line names the test directory (controller, agents, tasks left by
  // a failed test): nothing outlives the test.
  static void KillEverythingUnder(const std::string& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = ReadFile(e.path().string() + "/cmdline");
      if (Contains(cmdline, dir)) kill(std::stoi(name), SIGKILL);
    }
  }

  // `own_cluster`: the one-node cluster.yaml, else dev's default 4 x 8 GPUs.
  void StartDev(std::vector<std::string> extra = {}, bool own_cluster = true) {
    std::vector<std::string> args = {HANGAR_BINARY, "dev",    "--dir",
                                     dir_ + "/dev", "--port", std::to_string(port_)};
    if (own_cluster) args.insert(args.end(), {"--cluster", dir_ + "/cluster.yaml"});
    args.insert(args.end(), extra.begin(), extra.end());
    out_ = dir_ + "/dev-" + std::to_string(++runs_) + ".out";
    dev_ = fork();
    if (dev_ == 0) {
      const int fd = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(HANGAR_BINARY, argv.data());
      _exit(127);
    }
  }

  // As StartDev, its output into a pipe (as `hangar dev | tee log`); returns the read end.
  int StartDevPiped(std::vector<std::string> extra = {}) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    std::vector<std::string> args = {HANGAR_BINARY, "dev",
                                     "--dir",       dir_ + "/dev",
                                     "--port",      std::to_string(port_),
                                     "--cluster",   dir_ + "/cluster.yaml"};
    args.insert(args.end(), extra.begin(), extra.end());
    dev_ = fork();
    if (dev_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(HANGAR_BINARY, argv.data());
      _exit(127);
    }
    close(fds[1]);
    return fds[0];
  }

  // Reads the pipe until `part` has come (or `timeout`); what was read.
  static std::string ReadPipeUntil(int fd, const std::string& part, Duration timeout) {
    std::string got;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    LocalCluster::WaitFor(
        [&] {
          char buf[4096];
          for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
            got.append(buf, static_cast<size_t>(n));
          return Contains(got, part);
        },
        timeout);
    return got;
  }

  // Whether any `hangar controller` or `hangar agent` of this test's directory still runs.
  bool DaemonsLeft() const {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string cmdline = ReadFile(e.path().string() + "/cmdline");
      if (Contains(cmdline, dir_) && (Contains(cmdline, std::string("controller\0", 11)) ||
                                      Contains(cmdline, std::string("agent\0", 6)))) {
        return true;
      }
    }
    return false;
  }

  // Waits for `hangar dev` to exit (at most `timeout`); its exit code, or -1 if it did not.
  int WaitDev(Duration timeout) {
    int status = 0;
    if (!LocalCluster::WaitFor([&] { return waitpid(dev_, &status, WNOHANG) == dev_; }, timeout))
      return -1;
    dev_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string Output() const { return ReadFile(out_); }
  bool WaitForOutput(const std::string& part, Duration timeout) {
    return LocalCluster::WaitFor([&] { return Contains(Output(), part); }, timeout);
  }

  std::string dir_;
  int port_ = 0;
  pid_t dev_ = 0;
  int runs_ = 0;
  std::string out_;
};

// Examples: one that checks what a task is given, one the controller refuses. --exit-when-done
// must print the refusal as a sentence and exit non-zero.
TEST_F(DevTest, GivesTasksAbsolutePathsAndFailsWhenAnExampleIsRefused) {
  const std::string seen = dir_ + "/seen";
  std::ofstream(dir_ + "/examples/a-check.yaml") << JobYaml(
      "check", "env > " + seen + ".env; test -d \"$HANGAR_CHECKPOINT_DIR\" && echo dir >> " + seen +
                   "; hangar checkpoint-done --path /no/such/checkpoint; echo ckpt=$? >> " + seen);
  std::ofstream(dir_ + "/examples/b-refused.yaml") << "name: refused\nqueue: default\ntasks: []\n";
  StartDev({"--submit-examples", dir_ + "/examples", "--exit-when-done"});
  const int rc = WaitDev(60 * kSecond);
  const std::string out = Output();
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(Contains(out, "could not submit b-refused.yaml: ")) << out;
  EXPECT_FALSE(Contains(out, "{\"error\"")) << out;
  EXPECT_TRUE(Contains(out, "1 example(s) refused")) << out;

  std::map<std::string, std::string> env;
  for (const auto& line : Lines(ReadFile(seen + ".env"))) {
    if (auto eq = line.find('='); eq != std::string::npos)
      env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  for (const char* var :
       {"HANGAR_CHECKPOINT_DIR", "HANGAR_FAKE_GPU_UTIL_FILE", "HANGAR_AGENT_STATE_DIR"}) {
    EXPECT_EQ(env[var].rfind(dir_ + "/dev/", 0), 0u) << var << "=" << env[var];
  }
  EXPECT_TRUE(fs::is_directory(env["HANGAR_CHECKPOINT_DIR"]));
  // The checkpoint directory existed for the task, and a report of a missing checkpoint failed.
  EXPECT_EQ(ReadFile(seen), "dir\nckpt=2\n");
}

TEST_F(DevTest, AFailedJobMakesExitWhenDoneFail) {
  std::ofstream(dir_ + "/examples/fails.yaml") << JobYaml("fails", "exit 3");
  StartDev({"--submit-examples", dir_ + "/examples", "--exit-when-done"});
  const int rc = WaitDev(60 * kSecond);
  EXPECT_EQ(rc, 2) << Output();
  EXPECT_TRUE(Contains(Output(), "1 job(s) failed")) << Output();
}

// Ctrl-C stops every task `hangar dev` started; starting again at once works (the port is not
// "in use") and keeps the first run's logs.
TEST_F(DevTest, CtrlCStopsTasksAndARestartKeepsTheLogs) {
  const std::string pid_file = dir_ + "/task.pid";
  std::ofstream(dir_ + "/examples/sleeper.yaml")
      << JobYaml("sleeper", "echo $$ > " + pid_file + "; exec sleep 600");
  StartDev({"--submit-examples", dir_ + "/examples"});
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return !ReadFile(pid_file).empty(); }, 30 * kSecond))
      << Output();
  const int task = std::stoi(ReadFile(pid_file));
  ASSERT_EQ(kill(task, 0), 0);
  kill(dev_, SIGINT);
  EXPECT_EQ(WaitDev(20 * kSecond), 0) << Output();
  EXPECT_TRUE(kill(task, 0) != 0 && errno == ESRCH) << "task " << task << " still runs";
  const std::string first_log = ReadFile(dir_ + "/dev/logs/controller.log");
  ASSERT_FALSE(first_log.empty());

  StartDev();
  ASSERT_TRUE(WaitForOutput("is up", 30 * kSecond)) << Output();
  EXPECT_EQ(ReadFile(dir_ + "/dev/logs/controller.log.1"), first_log);
  EXPECT_TRUE(fs::exists(dir_ + "/dev/logs/agent-node-1.log.1"));
  // The restarted controller hears from the agent how the task ended: stopped because its agent
  // exited, not by its own doing -- so the job did not fail: it runs again (attempt 1).
  httplib::Client api("127.0.0.1", port_);
  api.set_default_headers(
      {{"Authorization", "Bearer " + Lines(ReadFile(dir_ + "/dev/dev-token")).at(0)}});
  std::string state;
  uint64_t restarts = 0;
  LocalCluster::WaitFor(
      [&] {
        auto r = api.Get("/v1/jobs/1");
        auto j = r && r->status == 200 ? nlohmann::json::parse(r->body) : nlohmann::json::object();
        state = j.value("state", "");
        restarts = j.value("restarts", uint64_t{0});
        return state == "running" || state == "failed" || state == "succeeded";
      },
      20 * kSecond);
  EXPECT_EQ(state, "running");
  EXPECT_EQ(restarts, 1u);
  kill(dev_, SIGTERM);
  EXPECT_EQ(WaitDev(20 * kSecond), 0) << Output();
}

// `hangar dev | tee log`, then Ctrl-C: the terminal's SIGINT ends tee as well, so `hangar dev`
// writes to a closed pipe. It must still stop its agents, tasks and controller (it died of
// SIGPIPE and left them all running under PID 1).
TEST_F(DevTest, CtrlCWithItsOutputPipeClosedStillStopsEverything) {
  const std::string pid_file = dir_ + "/task.pid";
  std::ofstream(dir_ + "/examples/sleeper.yaml")
      << JobYaml("sleeper", "echo $$ > " + pid_file + "; exec sleep 600");
  const int out = StartDevPiped({"--submit-examples", dir_ + "/examples"});
  ASSERT_GE(out, 0);
  const std::string seen = ReadPipeUntil(out, "is up", 30 * kSecond);
  ASSERT_TRUE(Contains(seen, "is up")) << seen;
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return !ReadFile(pid_file).empty(); }, 30 * kSecond))
      << seen;
  const int task = std::stoi(ReadFile(pid_file));
  close(out);  // tee is gone
  kill(dev_, SIGINT);
  EXPECT_EQ(WaitDev(20 * kSecond), 0);
  EXPECT_TRUE(
      LocalCluster::WaitFor([&] { return kill(task, 0) != 0 && errno == ESRCH; }, 10 * kSecond))
      << "task " << task << " still runs";
  EXPECT_FALSE(DaemonsLeft());
}

// `hangar dev` killed outright (SIGKILL, an OOM kill): its controller and agents end with it, and
// the agents stop their tasks; nothing is left running for the next start to trip over.
TEST_F(DevTest, AKilledDevTakesItsDaemonsAndTasksWithIt) {
  const std::string pid_file = dir_ + "/task.pid";
  std::ofstream(dir_ + "/examples/sleeper.yaml")
      << JobYaml("sleeper", "echo $$ > " + pid_file + "; exec sleep 600");
  StartDev({"--submit-examples", dir_ + "/examples"});
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return !ReadFile(pid_file).empty(); }, 30 * kSecond))
      << Output();
  const int task = std::stoi(ReadFile(pid_file));
  kill(dev_, SIGKILL);
  EXPECT_EQ(WaitDev(10 * kSecond), 128 + SIGKILL);
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return !DaemonsLeft(); }, 15 * kSecond))
      << "controller or agent still runs";
  EXPECT_TRUE(
      LocalCluster::WaitFor([&] { return kill(task, 0) != 0 && errno == ESRCH; }, 15 * kSecond))
      << "task " << task << " still runs";
}

// A restart restores the store: the examples are not submitted again, and the events of the
// earlier run are not printed as if they happened now.
TEST_F(DevTest, ARestartNeitherResubmitsTheExamplesNorReplaysOldEvents) {
  std::ofstream(dir_ + "/examples/quick.yaml") << JobYaml("quick", "true");
  StartDev({"--submit-examples", dir_ + "/examples", "--exit-when-done"});
  ASSERT_EQ(WaitDev(60 * kSecond), 0) << Output();
  ASSERT_TRUE(Contains(Output(), "submitted quick.yaml as job 1")) << Output();
  StartDev({"--submit-examples", dir_ + "/examples"});
  ASSERT_TRUE(WaitForOutput("not submitting", 30 * kSecond)) << Output();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // a few rounds of the event feed
  EXPECT_FALSE(Contains(Output(), "submitted quick.yaml")) << Output();
  EXPECT_FALSE(Contains(Output(), "job/1")) << "an old event printed again:\n" << Output();
  kill(dev_, SIGTERM);
  EXPECT_EQ(WaitDev(20 * kSecond), 0) << Output();
}

// `hangar dev` waits for its controller as long as the controller lives (a big store restores
// slowly), so a controller that exits must be noticed at once and named.
TEST_F(DevTest, AControllerThatExitsIsReportedAtOnce) {
  fs::create_directories(dir_ + "/dev/state.db");  // a directory: the store cannot open
  StartDev();
  const int rc = WaitDev(20 * kSecond);
  EXPECT_EQ(rc, 2) << Output();
  EXPECT_TRUE(Contains(Output(), "the controller exited (status ")) << Output();
  EXPECT_TRUE(Contains(Output(), "/dev/logs/controller.log")) << Output();
}

// `hangar dev --tls`: its own CA under DIR/tls, HTTPS on the API and mutual TLS to the agents.
// The banner's exports work as printed; plaintext is refused; a restart keeps the CA.
TEST_F(DevTest, TlsServesHttpsWithItsOwnCaAndTheBannerSaysHowToReachIt) {
  StartDev({"--tls"});
  ASSERT_TRUE(WaitForOutput("is up", 60 * kSecond)) << Output();
  const std::string url = "https://127.0.0.1:" + std::to_string(port_),
                    ca = dir_ + "/dev/tls/ca.crt";
  EXPECT_TRUE(Contains(Output(), "export HANGAR_URL=" + url + " HANGAR_CA=" + ca)) << Output();
  for (const char* f : {"ca.key", "controller.key", "node-node-1.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir_ + "/dev/tls/" + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  EXPECT_TRUE(Contains(ReadFile(dir_ + "/dev/logs/controller.log"), "TLS"))
      << ReadFile(dir_ + "/dev/logs/controller.log");
  // The CLI as the banner says: the node is ready, a job runs and its log reads back.
  setenv("HANGAR_URL", url.c_str(), 1);
  setenv("HANGAR_CA", ca.c_str(), 1);
  Ran nodes;
  LocalCluster::WaitFor(  // on a loaded machine the node may still be validating
      [&] {
        nodes = RunHangar({"nodes"});
        return Contains(nodes.output, "node-1  ready");
      },
      30 * kSecond);
  EXPECT_EQ(nodes.rc, 0) << nodes.output;
  EXPECT_TRUE(Contains(nodes.output, "node-1  ready")) << nodes.output;
  std::ofstream(dir_ + "/hello.yaml") << JobYaml("hello", "echo over-tls");
  Ran submit = RunHangar({"submit", dir_ + "/hello.yaml"});
  EXPECT_EQ(submit.rc, 0) << submit.output;
  std::string state;
  LocalCluster::WaitFor(
      [&] {
        Ran job = RunHangar({"job", "1", "-o", "json"});
        state = nlohmann::json::parse(job.output, nullptr, false).value("state", "");
        return state == "succeeded" || state == "failed";
      },
      30 * kSecond);
  EXPECT_EQ(state, "succeeded");
  Ran logs = RunHangar({"logs", "1"});
  EXPECT_TRUE(Contains(logs.output, "over-tls")) << logs.output;
  // Without the CA, and over http://: refused, each with its sentence.
  unsetenv("HANGAR_CA");
  Ran untrusted = RunHangar({"nodes"});
  EXPECT_NE(untrusted.rc, 0);
  EXPECT_TRUE(Contains(untrusted.output, "has a certificate no CA you trust signed"))
      << untrusted.output;
  Ran plain = RunHangar({"nodes", "--server", "http://127.0.0.1:" + std::to_string(port_)});
  EXPECT_NE(plain.rc, 0);
  EXPECT_TRUE(Contains(plain.output, "a controller with TLS wants https://")) << plain.output;
  unsetenv("HANGAR_URL");
  // A restart keeps the CA (certificates users were given stay valid).
  const std::string ca_pem = ReadFile(ca);
  kill(dev_, SIGINT);
  ASSERT_EQ(WaitDev(60 * kSecond), 0) << Output();
  StartDev({"--tls"});
  ASSERT_TRUE(WaitForOutput("is up", 60 * kSecond)) << Output();
  EXPECT_EQ(ReadFile(ca), ca_pem);
  kill(dev_, SIGINT);
  EXPECT_EQ(WaitDev(60 * kSecond), 0) << Output();
}

// The shipped examples are accepted by the default dev cluster (4 nodes x 8 GPUs on two leaves):
// `hangar dev --submit-examples examples/jobs` is what the README suggests.
TEST_F(DevTest, TheShippedExamplesAreAcceptedByTheDefaultDevCluster) {
  std::vector<std::string> examples;
  for (const auto& e : fs::directory_iterator(std::string(HANGAR_SOURCE_DIR) + "/examples/jobs")) {
    if (e.path().extension() == ".yaml") examples.push_back(e.path().filename().string());
  }
  ASSERT_FALSE(examples.empty());
  std::vector<std::string> args = {"--submit-examples",
                                   std::string(HANGAR_SOURCE_DIR) + "/examples/jobs"};
  StartDev(args, /*own_cluster=*/false);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const std::string out = Output();
        for (const auto& f : examples) {
          if (!Contains(out, "submitted " + f + " as job") &&
              !Contains(out, "could not submit " + f))
            return false;
        }
        return true;
      },
      30 * kSecond))
      << Output();
  for (const auto& f : examples)
    EXPECT_TRUE(Contains(Output(), "submitted " + f + " as job")) << Output();
  kill(dev_, SIGTERM);
  EXPECT_EQ(WaitDev(20 * kSecond), 0) << Output();
}

}  // namespace
}  // namespace hangar::testing
