// The agent against an in-process controller: the hardware parts of its conversation (NICs in
// the inventory, IB ports in heartbeats, validation on request, faults injected on cue).
#include "agent/agent.h"

#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "agent/fabric/fake_sysfs_test_util.h"
#include "agent/gpu/fake_backend.h"
#include "agent/task_journal.h"

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;
using Stream = grpc::ServerReaderWriter<pb::ControllerMessage, pb::AgentMessage>;

std::vector<nlohmann::json> TaskRecords(const fs::path& dir) {
  return LatestTaskRecords(dir.string());
}

// Answers Register with a short heartbeat interval and records everything the agent sends.
class FakeController final : public pb::AgentChannel::Service {
 public:
  grpc::Status Connect(grpc::ServerContext*, Stream* stream) override {
    pb::AgentMessage m;
    while (stream->Read(&m)) {
      std::lock_guard<std::mutex> l(mu_);
      if (m.has_register_()) {
        pb::ControllerMessage r;
        r.mutable_registered()->set_heartbeat_interval_ms(50);
        stream->Write(r);
        stream_ = stream;
      }
      received_.push_back(m);
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> l(mu_);
    stream_ = nullptr;
    return grpc::Status::OK;
  }

  bool Send(const pb::ControllerMessage& m) {
    std::lock_guard<std::mutex> l(mu_);
    return stream_ && stream_->Write(m);
  }

  // Waits (up to 20 s) for a message that `pred` accepts and returns it.
  std::optional<pb::AgentMessage> WaitFor(
      const std::function<bool(const pb::AgentMessage&)>& pred) {
    std::unique_lock<std::mutex> l(mu_);
    std::optional<pb::AgentMessage> found;
    cv_.wait_for(l, std::chrono::seconds(20), [&] {
      for (const auto& m : received_) {
        if (pred(m)) found = m;
      }
      return found.has_value();
    });
    return found;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<pb::AgentMessage> received_;
  Stream* stream_ = nullptr;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = fs::temp_directory_path() / ("agent_test." + std::to_string(getpid()));
    fs::create_directories(state_dir_);
    sys_.AddPci("pci0000:10/0000:10:01.0/0000:19:00.0", 0);
    auto port = sys_.AddIb("mlx5_0", "pci0000:10/0000:10:01.0/0000:19:00.0");
    testing::FakeSysfs::Write(port / "counters/link_downed", "1\n");
    grpc::ServerBuilder builder;
    int selected = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &selected);
    builder.RegisterService(&controller_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);

    AgentOptions o;
    o.controller = "127.0.0.1:" + std::to_string(selected);
    o.node = "n1";
    o.state_dir = state_dir_.string();
    o.use_cgroups = false;
    o.ib_root = sys_.ib_root();
    o.pci_root = sys_.pci_root();
    o.hangar_binary = "/opt/hangar-test/bin/hangar";
    o.stop_tasks_on_exit = stop_tasks_on_exit_;
    FakeGpuOptions fake;
    fake.count = 2;
    auto backend = MakeFakeBackend(fake, "n1", SystemClock::Default());
    ASSERT_TRUE(backend.ok());
    agent_ = std::make_unique<Agent>(o, std::move(*backend), SystemClock::Default());
    ASSERT_TRUE(agent_->Init().ok());
    runner_ = std::thread([this] { agent_->Run(&stop_); });
  }
  void TearDown() override {
    stop_ = true;
    if (runner_.joinable()) runner_.join();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    agent_.reset();
    // Tasks outlive agents by design: end what the tests started.
    for (const auto& t : TaskRecords(state_dir_)) {
      if (t.value("pid", 0) > 0 && !t.value("ended", false)) kill(-t.value("pid", 0), SIGKILL);
    }
    fs::remove_all(state_dir_);
  }

  // Launches `script` under /bin/sh as task `id` of job `job`; returns its first status.
  pb::TaskStatus Launch(const std::string& id, uint64_t job, const std::string& script,
                        const std::map<std::string, std::string>& env = {},
                        const std::optional<pb::RunAs>& run_as = std::nullopt) {
    pb::ControllerMessage m;
    if (run_as) *m.mutable_launch()->mutable_run_as() = *run_as;
    m.mutable_launch()->set_task_id(id);
    m.mutable_launch()->set_job_id(job);
    for (const char* a : {"/bin/sh", "-c"}) m.mutable_launch()->add_argv(a);
    m.mutable_launch()->add_argv(script);
    for (const auto& [k, v] : env) (*m.mutable_launch()->mutable_env())[k] = v;
    EXPECT_TRUE(controller_.Send(m));
    auto status = controller_.WaitFor([&](const pb::AgentMessage& a) {
      return a.has_task_status() && a.task_status().task_id() == id;
    });
    EXPECT_TRUE(status);
    return status ? status->task_status() : pb::TaskStatus{};
  }
  fs::path Work(const std::string& id) { return state_dir_ / "tasks" / id / "work"; }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static bool Eventually(const std::function<bool()>& pred) {
    for (int i = 0; i < 2000 && !pred(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return pred();
  }
  std::map<std::string, std::string> TaskEnv(const std::string& id) {
    EXPECT_TRUE(Eventually([&] { return Read(Work(id) / "env.done") == "ok\n"; }));
    std::map<std::string, std::string> env;
    std::istringstream in(Read(Work(id) / "env.txt"));
    for (std::string line; std::getline(in, line);) {
      auto eq = line.find('=');
      if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return env;
  }

  bool stop_tasks_on_exit_ = false;  // set by a derived fixture's constructor
  testing::FakeSysfs sys_;
  fs::path state_dir_;
  FakeController controller_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Agent> agent_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
};

TEST_F(AgentTest, ReportsNicsAndIbPorts) {
  auto reg = controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); });
  ASSERT_TRUE(reg);
  const pb::Inventory& inv = reg->register_().inventory();
  EXPECT_EQ(inv.gpu_backend(), "fake");
  EXPECT_EQ(inv.gpus_size(), 2);
  ASSERT_EQ(inv.nics_size(), 1);
  EXPECT_EQ(inv.nics(0).device(), "mlx5_0");
  EXPECT_EQ(inv.nics(0).pci_bus_id(), "0000:19:00.0");
  auto hb = controller_.WaitFor([](const pb::AgentMessage& m) {
    return m.has_heartbeat() && m.heartbeat().ib_ports_size() == 1;
  });
  ASSERT_TRUE(hb);
  EXPECT_EQ(hb->heartbeat().gpus_size(), 2);
  EXPECT_EQ(hb->heartbeat().ib_ports(0).counters().at("link_downed"), 1u);
}

TEST_F(AgentTest, ValidatesWhenAsked) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  pb::ControllerMessage v;
  v.mutable_validate()->set_reason("test");
  ASSERT_TRUE(controller_.Send(v));
  auto r = controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_validation(); });
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->validation().ok());
  auto j = nlohmann::json::parse(r->validation().json());
  EXPECT_EQ(j["gpus"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["gpus"][0]["gemm_tflops"].get<double>(), kFakeGemmTflops);
}

TEST_F(AgentTest, InjectsFaultsDroppedIntoTheStateDirectory) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  const fs::path inject = state_dir_ / "inject-faults.yaml";
  std::ofstream(state_dir_ / "tmp.yaml") << "- {gpu: 1, kind: fall_off_bus}\n";
  fs::rename(state_dir_ / "tmp.yaml", inject);
  auto ev = controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_gpu_event(); });
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->gpu_event().index(), 1u);
  EXPECT_EQ(ev->gpu_event().code(), 79u);
  auto lost = controller_.WaitFor([](const pb::AgentMessage& m) {
    return m.has_heartbeat() && m.heartbeat().gpus_size() == 2 && m.heartbeat().gpus(1).lost();
  });
  EXPECT_TRUE(lost);
  EXPECT_TRUE(fs::exists(state_dir_ / "inject-faults.yaml.applied"));
  EXPECT_FALSE(fs::exists(inject));

  std::ofstream(state_dir_ / "tmp.yaml") << "- {gpu: 7, kind: fall_off_bus}\n";
  fs::rename(state_dir_ / "tmp.yaml", inject);
  auto rejected = controller_.WaitFor([&](const pb::AgentMessage&) {
    return fs::exists(state_dir_ / "inject-faults.yaml.rejected");
  });
  EXPECT_TRUE(rejected);
}

// Logs each USR1 and TERM to `signals`; TERM ends it.
constexpr const char* kTrapper =
    "env > env.txt; echo ok > env.done; trap 'echo USR1 >> signals' USR1; "
    "trap 'echo TERM >> signals; exit 0' TERM; while :; do sleep 1 & wait $!; done";

TEST_F(AgentTest, TasksGetTheSocketAndReportCheckpointsOnTheirOwn) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  ASSERT_FALSE(agent_->socket_path().empty());
  // Every local user may connect (tasks run as their users); the agent checks who did.
  EXPECT_EQ(fs::status(agent_->socket_path()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::group_write | fs::perms::others_read | fs::perms::others_write);
  Launch("5.0.0", 5, kTrapper);
  auto env = TaskEnv("5.0.0");
  EXPECT_EQ(env["HANGAR_TASK_ID"], "5.0.0");
  EXPECT_EQ(env["HANGAR_AGENT_SOCKET"], agent_->socket_path());
  EXPECT_EQ(env["HANGAR_BIN"], "/opt/hangar-test/bin/hangar");
  EXPECT_THAT(env["PATH"], ::testing::EndsWith(":/opt/hangar-test/bin"));

  auto reply =
      SendCheckpointDone(env["HANGAR_AGENT_SOCKET"], {"5.0.0", "/ckpt/step-7", 7}, 10 * kSecond);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_FALSE(reply->released);  // not being stopped: nothing happens to it
  auto done =
      controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_checkpoint_done(); });
  ASSERT_TRUE(done);
  EXPECT_EQ(done->checkpoint_done().task_id(), "5.0.0");
  EXPECT_EQ(done->checkpoint_done().job_id(), 5u);
  EXPECT_EQ(done->checkpoint_done().path(), "/ckpt/step-7");
  EXPECT_EQ(done->checkpoint_done().step(), 7u);
  EXPECT_GT(done->checkpoint_done().time_ms(), 0);
  EXPECT_FALSE(fs::exists(Work("5.0.0") / "signals"));

  auto stranger = SendCheckpointDone(agent_->socket_path(), {"9.0.0", "", 0}, 10 * kSecond);
  ASSERT_FALSE(stranger.ok());
  EXPECT_THAT(stranger.status().message(),
              ::testing::HasSubstr("task '9.0.0' does not run on node n1"));
  auto nobody = SendCheckpointDone((state_dir_ / "no.sock").string(), {"5.0.0", "", 0}, kSecond);
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable);
}

// Progress (docs/progress.md): the op "progress" on the same socket, forwarded to the controller.
TEST_F(AgentTest, TasksReportProgressThroughTheSocket) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  Launch("7.0.0", 7, kTrapper);
  auto env = TaskEnv("7.0.0");
  ASSERT_TRUE(SendProgress(env["HANGAR_AGENT_SOCKET"], {"7.0.0", 42, 500'000}, 10 * kSecond).ok());
  auto p = controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_progress(); });
  ASSERT_TRUE(p);
  EXPECT_EQ(p->progress().task_id(), "7.0.0");
  EXPECT_EQ(p->progress().job_id(), 7u);
  EXPECT_EQ(p->progress().step(), 42u);
  EXPECT_EQ(p->progress().step_time_us(), 500'000u);
  EXPECT_GT(p->progress().time_ms(), 0);
  auto stranger = SendProgress(agent_->socket_path(), {"9.0.0", 1, 0}, 10 * kSecond);
  ASSERT_FALSE(stranger.ok());
  EXPECT_THAT(stranger.message(), ::testing::HasSubstr("task '9.0.0' does not run on node n1"));
}

TEST_F(AgentTest, StopWithACheckpointSignalsAndIsReleasedByTheReport) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  Launch("6.0.0", 6, kTrapper);
  TaskEnv("6.0.0");
  pb::ControllerMessage stop;
  stop.mutable_stop()->set_task_id("6.0.0");
  stop.mutable_stop()->set_grace_ms(kHour);  // only the report can end it within the test
  stop.mutable_stop()->set_checkpoint_signal(SIGUSR1);
  stop.mutable_stop()->set_kill_grace_ms(kHour);
  ASSERT_TRUE(controller_.Send(stop));
  ASSERT_TRUE(Eventually([&] { return Read(Work("6.0.0") / "signals") == "USR1\n"; }));

  auto reply = SendCheckpointDone(agent_->socket_path(), {"6.0.0", "/ckpt/x", 0}, 10 * kSecond);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->released);
  auto ended = controller_.WaitFor([](const pb::AgentMessage& m) {
    return m.has_task_status() && m.task_status().task_id() == "6.0.0" &&
           m.task_status().state() == pb::TaskStatus::EXITED;
  });
  ASSERT_TRUE(ended);
  EXPECT_TRUE(ended->task_status().stopped());
  EXPECT_EQ(ended->task_status().exit_code(), 0);
  EXPECT_EQ(Read(Work("6.0.0") / "signals"), "USR1\nTERM\n");
  EXPECT_TRUE(
      controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_checkpoint_done(); }));
}

// The checkpoint directory exists before the task runs (a task that writes to it at once must not
// find it missing), and a directory that cannot be made fails the launch with the reason.
// A task may end before its launch has recorded it (`true` under load): its end is still reported,
// once, never lost with the job left running forever.
TEST_F(AgentTest, TasksThatEndAtOnceAreAllReportedEnded) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  constexpr int kTasks = 500;
  // Busy cores, as on a loaded node: the launch is often preempted between starting a task and
  // recording it, which is when a `true` ends.
  std::atomic<bool> busy{true};
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < 2 * std::max(1u, std::thread::hardware_concurrency()); ++i) {
    spinners.emplace_back([&] {
      while (busy) {
      }
    });
  }
  for (int i = 1; i <= kTasks; ++i) {
    pb::ControllerMessage m;
    m.mutable_launch()->set_task_id(std::to_string(i) + ".0.0");
    m.mutable_launch()->set_job_id(i);
    m.mutable_launch()->add_argv("/bin/true");
    ASSERT_TRUE(controller_.Send(m));
  }
  std::set<std::string> ended;
  auto stop_spinning = [&] {
    busy = false;
    for (auto& t : spinners) t.join();
    spinners.clear();
  };
  for (int i = 1; i <= kTasks; ++i) {
    const std::string id = std::to_string(i) + ".0.0";
    auto status = controller_.WaitFor([&](const pb::AgentMessage& a) {
      return a.has_task_status() && a.task_status().task_id() == id &&
             a.task_status().state() == pb::TaskStatus::EXITED;
    });
    if (status) {
      EXPECT_EQ(status->task_status().exit_code(), 0) << id;
      ended.insert(id);
    }
    if (i == kTasks / 2) stop_spinning();
  }
  stop_spinning();
  EXPECT_EQ(ended.size(), static_cast<size_t>(kTasks))
      << "every task that ended at once is reported ended";
}

TEST_F(AgentTest, CreatesTheCheckpointDirectoryBeforeTheTaskStarts) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  const fs::path ckpt = state_dir_ / "checkpoints" / "job-7";
  auto ok = Launch("7.0.0", 7,
                   "test -d \"$HANGAR_CHECKPOINT_DIR\" && touch \"$HANGAR_CHECKPOINT_DIR/seen\"",
                   {{"HANGAR_CHECKPOINT_DIR", ckpt.string()}});
  EXPECT_NE(ok.state(), pb::TaskStatus::FAILED_TO_START) << ok.message();
  EXPECT_TRUE(Eventually([&] { return fs::exists(ckpt / "seen"); }));
  EXPECT_EQ(fs::status(ckpt).permissions() & fs::perms::all, fs::perms::owner_all);

  std::ofstream(state_dir_ / "a-file") << "x";
  auto blocked = Launch("8.0.0", 8, "true",
                        {{"HANGAR_CHECKPOINT_DIR", (state_dir_ / "a-file" / "job-8").string()}});
  EXPECT_EQ(blocked.state(), pb::TaskStatus::FAILED_TO_START);
  EXPECT_THAT(blocked.message(),
              ::testing::HasSubstr("cannot create the job's checkpoint directory"));
  EXPECT_THAT(blocked.message(), ::testing::HasSubstr("--checkpoint-root"));

  auto relative =
      Launch("9.0.0", 9, "true", {{"HANGAR_CHECKPOINT_DIR", "./hangar-dev/checkpoints/job-9"}});
  EXPECT_EQ(relative.state(), pb::TaskStatus::FAILED_TO_START);
  EXPECT_THAT(relative.message(), ::testing::HasSubstr("is a relative path"));
  EXPECT_FALSE(fs::exists(Work("9.0.0") / "hangar-dev"));
}

TEST_F(AgentTest, TasksGetAbsolutePathsUnderTheStateDirectory) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  Launch("10.0.0", 10, "env > env.txt; echo ok > env.done");
  auto env = TaskEnv("10.0.0");
  EXPECT_EQ(env["HANGAR_AGENT_STATE_DIR"], state_dir_.string());
  EXPECT_EQ(env["HANGAR_FAKE_GPU_UTIL_FILE"],
            (state_dir_ / "tasks" / "10.0.0" / "gpu_util").string());
}

pb::RunAs Uid(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups = {},
              bool allow_root = false) {
  pb::RunAs r;
  r.set_uid(uid);
  r.set_gid(gid);
  for (uint32_t g : groups) r.add_groups(g);
  r.set_allow_root(allow_root);
  return r;
}

struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
  unsigned mode = 0;
};
Owner OwnerOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
  return {st.st_uid, st.st_gid, static_cast<unsigned>(st.st_mode & 07777)};
}

// `hangar checkpoint-done` for task `id` from a process running as `uid`: the agent's answer.
std::string ReportAs(uid_t uid, const std::string& socket, const std::string& id) {
  int fds[2];
  if (pipe(fds) != 0) return "no pipe";
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    std::string answer;
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      answer = "could not become " + std::to_string(uid);
    } else {
      auto r = SendCheckpointDone(socket, {id, "", 0, -1}, 10 * kSecond);
      answer = r.ok() ? "ok" : r.status().message();
    }
    ssize_t n = write(fds[1], answer.data(), answer.size());
    _exit(n < 0);
  }
  close(fds[1]);
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    answer.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(child, nullptr, 0);
  return answer;
}

// Issue 16: a task runs as the user the Launch names, in a workdir of theirs, with its output,
// fake GPU load file and checkpoint directory theirs; only they (or root) may report its
// checkpoints. Switching users needs root.
TEST_F(AgentTest, RunsATaskAsTheUserTheLaunchNames) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  const fs::path ckpt = state_dir_ / "checkpoints" / "job-11";
  auto started =
      Launch("11.0.0", 11,
             "id -u > ids; id -g >> ids; id -G >> ids; echo 40 > \"$HANGAR_FAKE_GPU_UTIL_FILE\"; "
             "touch \"$HANGAR_CHECKPOINT_DIR/seen\"; " +
                 std::string(kTrapper),
             {{"HANGAR_CHECKPOINT_DIR", ckpt.string()}}, Uid(61001, 61002, {61010, 61011}));
  ASSERT_EQ(started.state(), pb::TaskStatus::RUNNING) << started.message();
  EXPECT_EQ(TaskEnv("11.0.0")["HOME"], Work("11.0.0").string());
  EXPECT_EQ(Read(Work("11.0.0") / "ids"), "61001\n61002\n61002 61010 61011\n");
  EXPECT_EQ(Read(state_dir_ / "tasks/11.0.0/gpu_util"), "40\n");
  EXPECT_TRUE(fs::exists(ckpt / "seen"));
  const fs::path task = state_dir_ / "tasks" / "11.0.0";
  for (const auto& [path, mode] :
       std::vector<std::pair<fs::path, unsigned>>{{task / "stdout.log", 0600},
                                                  {task / "stderr.log", 0600},
                                                  {task / "gpu_util", 0600},
                                                  {task / "work", 0700},
                                                  {ckpt, 0700}}) {
    const Owner o = OwnerOf(path);
    EXPECT_EQ(o.uid, 61001u) << path;
    EXPECT_EQ(o.gid, 61002u) << path;
    EXPECT_EQ(o.mode, mode) << path;
  }
  EXPECT_EQ(OwnerOf(task).uid, 0u)
      << "the task's folder stays the agent's: no one puts a link where it reads logs";
  const auto records = TaskRecords(state_dir_);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].value("uid", -2), 61001);

  EXPECT_EQ(
      ReportAs(61005, agent_->socket_path(), "11.0.0"),
      "the agent at " + agent_->socket_path() +
          " refused: task '11.0.0' runs as uid 61001; uid 61005 may not report its checkpoints");
  EXPECT_EQ(ReportAs(61001, agent_->socket_path(), "11.0.0"), "ok");
}

TEST_F(AgentTest, RunsNothingAsRootUnlessTheLaunchAllowsIt) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  auto root = Launch("12.0.0", 12, "true", {}, Uid(0, 0));
  EXPECT_EQ(root.state(), pb::TaskStatus::FAILED_TO_START);
  EXPECT_EQ(
      root.message(),
      "the task would run as root (uid 0 gid 0 (root)) on node n1 and its queue does not allow "
      "root tasks (allow_root)");
  pb::RunAs named;
  named.set_account("root");
  auto by_name = Launch("13.0.0", 13, "true", {}, named);
  EXPECT_EQ(by_name.state(), pb::TaskStatus::FAILED_TO_START);
  EXPECT_THAT(by_name.message(), ::testing::HasSubstr("would run as root"));
  pb::RunAs missing;
  missing.set_account("hangar-no-such-account");
  auto unknown = Launch("14.0.0", 14, "true", {}, missing);
  EXPECT_EQ(unknown.state(), pb::TaskStatus::FAILED_TO_START);
  EXPECT_THAT(
      unknown.message(),
      ::testing::StartsWith("node n1: this node has no Unix account 'hangar-no-such-account'"));
  if (geteuid() != 0) return;
  auto allowed = Launch("15.0.0", 15, "id -u > ids", {}, Uid(0, 0, {}, /*allow_root=*/true));
  EXPECT_NE(allowed.state(), pb::TaskStatus::FAILED_TO_START) << allowed.message();
  EXPECT_TRUE(Eventually([&] { return Read(Work("15.0.0") / "ids") == "0\n"; }));
}

class StoppingAgentTest : public AgentTest {
 protected:
  StoppingAgentTest() { stop_tasks_on_exit_ = true; }
};

// No live (non-zombie) process is left in process group `pgid`.
bool NoLiveMember(int pgid) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    int ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z') return false;
  }
  return true;
}

// A SIGKILLed group member is gone a moment later (it may still be dying, or waiting for init).
bool ProcessGroupGone(int pgid) {
  for (int i = 0; i < 50 && !NoLiveMember(pgid); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return pgid > 0 && NoLiveMember(pgid);
}

// `hangar dev` runs its agents with --stop-tasks-on-exit: leaving, the agent ends every task, one
// that obeys SIGTERM at once and one that ignores it with SIGKILL after the grace.
TEST_F(StoppingAgentTest, StopsEveryTaskWhenItExits) {
  ASSERT_TRUE(controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); }));
  Launch("11.0.0", 11, kTrapper);
  Launch("12.0.0", 12,
         "trap '' TERM; env > env.txt; echo ok > env.done; while :; do sleep 1; done");
  TaskEnv("11.0.0");
  TaskEnv("12.0.0");
  std::map<std::string, int> pids;
  {
    for (const auto& t : TaskRecords(state_dir_)) pids[t["task_id"]] = t["pid"];
  }
  ASSERT_EQ(pids.size(), 2u);
  stop_ = true;
  runner_.join();  // Run() returns only once its tasks are gone
  for (const auto& [id, pid] : pids) EXPECT_TRUE(ProcessGroupGone(pid)) << id;
  EXPECT_EQ(Read(Work("11.0.0") / "signals"), "TERM\n");
  const auto ended = TaskRecords(state_dir_);
  EXPECT_EQ(ended.size(), 2u);
  for (const auto& t : ended) {
    EXPECT_TRUE(t["ended"].get<bool>()) << t.dump();
    // Not `stopped` (the controller's word for a stop it asked for): the job did not finish.
    EXPECT_FALSE(t["stopped"].get<bool>()) << t.dump();
    EXPECT_EQ(t["message"], "stopped when its agent exited (--stop-tasks-on-exit)");
    // Said so, for the controller to queue the job again rather than fail it.
    EXPECT_TRUE(t["agent_exiting"].get<bool>()) << t.dump();
  }
}

// A launch or a log request whose task id held "../" reached a path outside the state dir (the
// agent_message fuzz target; only an authenticated controller can send one).
TEST(AgentTaskIdTest, OnlyIdsThatNameAFolderOfTheStateDirAreTaken) {
  EXPECT_TRUE(Agent::SafeTaskId("12.0.3"));
  EXPECT_TRUE(Agent::SafeTaskId("validate-node-1"));
  for (const char* bad : {"", "..", "../etc", "1.0.0/../../x", "a/b", ".hidden", "1.0.0\n"}) {
    EXPECT_FALSE(Agent::SafeTaskId(bad)) << bad;
  }
}

}  // namespace
}  // namespace hangar::agent
