// MPS for fractional tasks (issue 22) with the real `hangar fake-mps-control` processes: the
// daemons' lifecycle on their own, then through an agent against an in-process controller.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/gpu/fake_backend.h"
#include "agent/gpu/mps.h"

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;
using Stream = grpc::ServerReaderWriter<pb::ControllerMessage, pb::AgentMessage>;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 2000 && !pred(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pred();
}

MpsOptions StandIn(const fs::path& state) {
  MpsOptions o;
  o.enabled = true;
  o.fake = true;
  o.root = (state / "mps").string();
  o.control = {HANGAR_TEST_BINARY, "fake-mps-control"};
  return o;
}

class MpsDir : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = fs::temp_directory_path() / ("agent_mps_test." + std::to_string(getpid()));
    fs::create_directories(state_);
  }
  void TearDown() override {
    // No daemon outlives a test.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state_ / "mps", ec)) {
      if (pid_t pid = LiveDaemonPid((e.path() / "pipe").string())) kill(pid, SIGKILL);
    }
    fs::remove_all(state_);
  }
  pid_t Daemon(const std::string& key) {
    return LiveDaemonPid((state_ / "mps" / key / "pipe").string());
  }
  fs::path state_;
};

using MpsDaemonsTest = MpsDir;

TEST_F(MpsDaemonsTest, OneDaemonPerGpuAndUserStoppedWithItsLastTask) {
  MpsDaemons mps(StandIn(state_));
  auto a = mps.Acquire("1.0.0", 0, "GPU-a", 1000);
  ASSERT_TRUE(a.ok()) << a.status().message();
  const pid_t first = Daemon("gpu0-uid1000");
  ASSERT_GT(first, 0);
  EXPECT_EQ(a->pipe_dir, (state_ / "mps/gpu0-uid1000/pipe").string());
  EXPECT_TRUE(fs::exists(a->pipe_dir + "/control"));
  auto b = mps.Acquire("2.0.0", 0, "GPU-a", 1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Daemon("gpu0-uid1000"), first);  // the same daemon, not a second one
  EXPECT_NE(Read(a->log_dir + "/control.log").find("GPU GPU-a"), std::string::npos);
  auto other = mps.Acquire("3.0.0", 1, "GPU-b", 1000);  // another GPU: its own
  ASSERT_TRUE(other.ok());
  EXPECT_GT(Daemon("gpu1-uid1000"), 0);
  EXPECT_EQ(mps.Running(), (std::vector<std::string>{"gpu0-uid1000", "gpu1-uid1000"}));

  mps.Release("1.0.0");
  EXPECT_EQ(Daemon("gpu0-uid1000"), first);  // 2.0.0 still holds it
  mps.Release("2.0.0");
  EXPECT_EQ(Daemon("gpu0-uid1000"), 0);
  EXPECT_FALSE(fs::exists(a->pipe_dir + "/control"));
  EXPECT_NE(Read(a->log_dir + "/control.log").find("CMD: quit"), std::string::npos);
  EXPECT_GT(Daemon("gpu1-uid1000"), 0);
  mps.Release("3.0.0");
  EXPECT_EQ(Daemon("gpu1-uid1000"), 0);
  EXPECT_TRUE(mps.Running().empty());
}

TEST_F(MpsDaemonsTest, ARestartedAgentTakesOverItsDaemonsAndStopsTheUnheldOnes) {
  {
    MpsDaemons before(StandIn(state_));
    ASSERT_TRUE(before.Acquire("1.0.0", 0, "GPU-a", 0).ok());
    ASSERT_TRUE(before.Acquire("2.0.0", 1, "GPU-b", 0).ok());
  }  // the agent went away; its daemons did not
  const pid_t kept = Daemon("gpu0-uid0"), orphan = Daemon("gpu1-uid0");
  ASSERT_GT(kept, 0);
  ASSERT_GT(orphan, 0);
  MpsDaemons after(StandIn(state_));
  ASSERT_TRUE(after.Acquire("1.0.0", 0, "GPU-a", 0).ok());  // its task was adopted
  EXPECT_EQ(Daemon("gpu0-uid0"), kept);
  after.StopUnused();
  EXPECT_EQ(Daemon("gpu1-uid0"), 0);
  EXPECT_EQ(Daemon("gpu0-uid0"), kept);
  after.Release("1.0.0");
  EXPECT_EQ(Daemon("gpu0-uid0"), 0);
}

TEST_F(MpsDaemonsTest, ADaemonThatCannotStartSaysWhy) {
  MpsOptions o = StandIn(state_);
  o.control = {"/bin/false"};
  MpsDaemons mps(o);
  auto a = mps.Acquire("1.0.0", 0, "GPU-a", 0);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("did not start (/bin/false -d exited 1"), std::string::npos)
      << a.status().message();
  EXPECT_TRUE(mps.Running().empty());
}

// `hangar mps-check` (what scripts/device-check.sh runs on a GPU), here with the stand-in.
TEST_F(MpsDaemonsTest, MpsCheckRunsACommandAsAFractionalClientAndStopsTheDaemon) {
  const std::string cmd = std::string(HANGAR_TEST_BINARY) +
                          " mps-check --fake-gpus 2 --gpu 1 --fraction 0.25 " +
                          "--gpu-memory 8Gi --state-dir " + state_.string() +
                          " -- sh -c 'echo limit=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT " +
                          "threads=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; exit 3' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 3) << out;  // the command's
  EXPECT_NE(out.find("limit=0=8192M threads=25"), std::string::npos) << out;
  EXPECT_NE(out.find("control daemon for GPU 1 (GPU-fake-mps-check-1"), std::string::npos) << out;
  EXPECT_NE(out.find("command exited 3; control daemon stopped"), std::string::npos) << out;
  EXPECT_EQ(Daemon("gpu1-uid" + std::to_string(geteuid())), 0);
}

// Records what the agent sends; answers Register with a short heartbeat.
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
  std::optional<pb::TaskStatus> WaitForStatus(const std::string& task, bool ended) {
    std::unique_lock<std::mutex> l(mu_);
    std::optional<pb::TaskStatus> found;
    cv_.wait_for(l, std::chrono::seconds(20), [&] {
      for (const auto& m : received_) {
        if (m.has_task_status() && m.task_status().task_id() == task &&
            (!ended || m.task_status().state() != pb::TaskStatus::RUNNING)) {
          found = m.task_status();
        }
      }
      return found.has_value();
    });
    return found;
  }
  bool Registered() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(20), [&] { return stream_ != nullptr; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<pb::AgentMessage> received_;
  Stream* stream_ = nullptr;
};

class AgentMpsTest : public MpsDir {
 protected:
  void SetUp() override {
    MpsDir::SetUp();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&controller_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    AgentOptions o;
    o.controller = "127.0.0.1:" + std::to_string(port);
    o.node = "n1";
    o.state_dir = state_.string();
    o.use_cgroups = false;
    o.ib_root = (state_ / "no-ib").string();
    o.stop_tasks_on_exit = true;
    o.mps = StandIn(state_);
    FakeGpuOptions fake;
    fake.count = 2;  // 80 GiB each
    auto backend = MakeFakeBackend(fake, "n1", SystemClock::Default());
    ASSERT_TRUE(backend.ok());
    agent_ = std::make_unique<Agent>(o, std::move(*backend), SystemClock::Default());
    ASSERT_TRUE(agent_->Init().ok());
    runner_ = std::thread([this] { agent_->Run(&stop_); });
    ASSERT_TRUE(controller_.Registered());
  }
  void TearDown() override {
    stop_ = true;
    if (runner_.joinable()) runner_.join();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    agent_.reset();
    MpsDir::TearDown();
  }
  // Launches `script` on `gpus` (HANGAR_GPU_FRACTION `fraction` unless empty).
  void Launch(const std::string& id, const std::string& script, std::vector<uint32_t> gpus,
              const std::string& fraction) {
    pb::ControllerMessage m;
    pb::Launch* l = m.mutable_launch();
    l->set_task_id(id);
    l->set_job_id(std::stoull(id));
    for (const char* a : {"/bin/sh", "-c"}) l->add_argv(a);
    l->add_argv(script);
    std::string visible;
    for (uint32_t g : gpus) {
      l->add_gpu_indices(g);
      visible += (visible.empty() ? "" : ",") + std::to_string(g);
    }
    (*l->mutable_env())["CUDA_VISIBLE_DEVICES"] = visible;
    if (!fraction.empty()) (*l->mutable_env())["HANGAR_GPU_FRACTION"] = fraction;
    ASSERT_TRUE(controller_.Send(m));
    auto s = controller_.WaitForStatus(id, false);
    ASSERT_TRUE(s);
    ASSERT_EQ(s->state(), pb::TaskStatus::RUNNING) << s->message();
  }
  std::map<std::string, std::string> TaskEnv(const std::string& id) {
    const fs::path work = state_ / "tasks" / id / "work";
    EXPECT_TRUE(Eventually([&] { return Read(work / "env.done") == "ok\n"; })) << id;
    std::map<std::string, std::string> env;
    std::istringstream in(Read(work / "env.txt"));
    for (std::string line; std::getline(in, line);) {
      if (auto eq = line.find('='); eq != std::string::npos)
        env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return env;
  }
  // Writes its environment, then waits until the file `release` exists.
  static std::string Holder() {
    return "env > env.txt; echo ok > env.done; while [ ! -e release ]; do sleep 0.05; done";
  }
  void Release(const std::string& id) {
    std::ofstream(state_ / "tasks" / id / "work" / "release") << "\n";
  }
  const std::string me_ = std::to_string(geteuid());

  FakeController controller_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Agent> agent_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
};

TEST_F(AgentMpsTest, AHalfGpuTaskRunsUnderItsGpusDaemonWithItsLimits) {
  Launch("10", Holder(), {1}, "0.5");
  auto env = TaskEnv("10");
  const std::string dir = (state_ / "mps" / ("gpu1-uid" + me_)).string();
  EXPECT_EQ(env["CUDA_MPS_PIPE_DIRECTORY"], dir + "/pipe");
  EXPECT_EQ(env["CUDA_MPS_LOG_DIRECTORY"], dir + "/log");
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=40960M");
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-fake-n1-1");
  EXPECT_GT(LiveDaemonPid(dir + "/pipe"), 0);
  Release("10");
  ASSERT_TRUE(controller_.WaitForStatus("10", true));
  EXPECT_TRUE(Eventually([&] { return LiveDaemonPid(dir + "/pipe") == 0; }));
}

TEST_F(AgentMpsTest, TwoFractionalTasksShareOneDaemonThatQuitsAfterBoth) {
  Launch("11", Holder(), {0}, "0.25");
  Launch("12", Holder(), {0}, "0.5");
  const std::string pipe = (state_ / "mps" / ("gpu0-uid" + me_) / "pipe").string();
  EXPECT_EQ(TaskEnv("11")["CUDA_MPS_PIPE_DIRECTORY"], pipe);
  EXPECT_EQ(TaskEnv("12")["CUDA_MPS_PIPE_DIRECTORY"], pipe);
  EXPECT_EQ(TaskEnv("11")["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "25");
  const pid_t daemon = LiveDaemonPid(pipe);
  ASSERT_GT(daemon, 0);
  const std::string log = Read(state_ / "mps" / ("gpu0-uid" + me_) / "log/control.log");
  EXPECT_EQ(log.find("Control daemon started"), log.rfind("Control daemon started"))
      << log;  // started once
  Release("11");
  ASSERT_TRUE(controller_.WaitForStatus("11", true));
  EXPECT_EQ(LiveDaemonPid(pipe), daemon);
  Release("12");
  ASSERT_TRUE(controller_.WaitForStatus("12", true));
  EXPECT_TRUE(Eventually([&] { return LiveDaemonPid(pipe) == 0; }));
}

TEST_F(AgentMpsTest, AWholeGpuTaskIsLeftAlone) {
  Launch("13", Holder(), {0, 1}, "");
  auto env = TaskEnv("13");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(env.count("CUDA_MPS_PIPE_DIRECTORY"), 0u);
  EXPECT_EQ(env.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), 0u);
  EXPECT_FALSE(fs::exists(state_ / "mps" / ("gpu0-uid" + me_)));
  Release("13");
}

TEST_F(AgentMpsTest, ATaskOverItsMemoryLimitIsEndedAsItsAllocationFails) {
  // 30 GiB is within a half GPU's 40; 50 GiB is not.
  Launch("14",
         "echo '90 30720' > $HANGAR_FAKE_GPU_UTIL_FILE; sleep 0.5; echo '90 51200' > "
         "$HANGAR_FAKE_GPU_UTIL_FILE; "
         "exec sleep 60",
         {0}, "0.5");
  auto s = controller_.WaitForStatus("14", true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->signal(), SIGKILL);
  EXPECT_FALSE(s->stopped());
  EXPECT_NE(s->message().find("GPU memory over its MPS limit: it used 51200 MiB of GPU 0, its "
                              "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is 40960 MiB"),
            std::string::npos)
      << s->message();
  EXPECT_NE(Read(state_ / "mps" / ("gpu0-uid" + me_) / "log/server.log")
                .find("client of task 14: allocation refused"),
            std::string::npos);
  EXPECT_NE(
      Read(state_ / "tasks/14/stderr.log").find("hangar agent: GPU memory over its MPS limit"),
      std::string::npos);
  EXPECT_TRUE(Eventually(
      [&] { return LiveDaemonPid((state_ / "mps" / ("gpu0-uid" + me_) / "pipe").string()) == 0; }));
}

TEST_F(AgentMpsTest, TheAgentStopsItsDaemonsWhenItStops) {
  Launch("15", Holder(), {1}, "0.5");
  TaskEnv("15");
  const std::string pipe = (state_ / "mps" / ("gpu1-uid" + me_) / "pipe").string();
  const pid_t daemon = LiveDaemonPid(pipe);
  ASSERT_GT(daemon, 0);
  stop_ = true;
  runner_.join();  // --stop-tasks-on-exit: the task ends, then its daemon
  EXPECT_FALSE(ProcessAlive(daemon));
  EXPECT_EQ(LiveDaemonPid(pipe), 0);
}

}  // namespace
}  // namespace hangar::agent
