// The agent's MIG side over its real channel: the static layout in the inventory, MigReshape
// refused while a task runs in an instance it would destroy and applied otherwise, and MIG tasks
// started on their instance's MIG device.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/agent.h"
#include "agent/gpu/fake_backend.h"
#include "agent/task_journal.h"

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;
using Stream = grpc::ServerReaderWriter<pb::ControllerMessage, pb::AgentMessage>;

class Controller final : public pb::AgentChannel::Service {
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
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(20), [&] { return stream_ != nullptr; });
    return stream_ && stream_->Write(m);
  }
  std::optional<pb::AgentMessage> WaitFor(
      const std::function<bool(const pb::AgentMessage&)>& pred) {
    std::unique_lock<std::mutex> l(mu_);
    std::optional<pb::AgentMessage> found;
    cv_.wait_for(l, std::chrono::seconds(20), [&] {
      for (const auto& m : received_)
        if (pred(m)) found = m;
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

class AgentMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("agent_mig_test." + std::to_string(getpid()));
    fs::create_directories(dir_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&controller_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    AgentOptions o;
    o.controller = "127.0.0.1:" + std::to_string(port);
    o.node = "m1";
    o.state_dir = dir_.string();
    o.use_cgroups = false;
    o.ib_root = (dir_ / "no-ib").string();
    o.mig_layout = *ParseStaticMigLayout("0:3g.40gb,3g.40gb");
    FakeGpuOptions fake;
    fake.count = 2;
    fake.mig = true;
    auto backend = MakeFakeBackend(fake, "m1", SystemClock::Default());
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
    for (const auto& t : LatestTaskRecords(dir_.string())) {
      if (t.value("pid", 0) > 0 && !t.value("ended", false)) kill(-t.value("pid", 0), SIGKILL);
    }
    fs::remove_all(dir_);
  }
  pb::TaskStatus LaunchMig(const std::string& id, const std::string& profile, uint32_t start,
                           uint32_t size) {
    pb::ControllerMessage m;
    pb::Launch* l = m.mutable_launch();
    l->set_task_id(id);
    l->set_job_id(7);
    for (const char* a : {"/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES > ../devices; sleep 30"})
      l->add_argv(a);
    (*l->mutable_env())["CUDA_VISIBLE_DEVICES"] = "0";
    l->add_gpu_indices(0);
    pb::MigInstance* mi = l->add_mig_instances();
    mi->set_gpu_index(0);
    mi->set_profile(profile);
    mi->set_start(start);
    mi->set_memory_slices(size);
    EXPECT_TRUE(controller_.Send(m));
    auto s = controller_.WaitFor([&](const pb::AgentMessage& a) {
      return a.has_task_status() && a.task_status().task_id() == id;
    });
    return s ? s->task_status() : pb::TaskStatus{};
  }
  pb::MigReshaped Reshape(uint64_t id, const std::vector<std::pair<std::string, uint32_t>>& destroy,
                          const std::vector<std::pair<std::string, uint32_t>>& create) {
    pb::ControllerMessage m;
    pb::MigReshape* r = m.mutable_mig_reshape();
    r->set_id(id);
    r->set_gpu_index(0);
    for (const auto& [p, s] : destroy) {
      pb::MigGpuInstance* d = r->add_destroy();
      d->set_profile(p);
      d->set_start(s);
      d->set_memory_slices(p[0] == '2' ? 2 : 4);
    }
    for (const auto& [p, s] : create) {
      pb::MigGpuInstance* c = r->add_create();
      c->set_profile(p);
      c->set_start(s);
    }
    EXPECT_TRUE(controller_.Send(m));
    auto a = controller_.WaitFor([&](const pb::AgentMessage& x) {
      return x.has_mig_reshaped() && x.mig_reshaped().id() == id;
    });
    return a ? a->mig_reshaped() : pb::MigReshaped{};
  }

  fs::path dir_;
  Controller controller_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Agent> agent_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
};

TEST_F(AgentMigTest, ReshapesOnlyIdleInstancesAndStartsTasksOnTheirMigDevice) {
  auto reg = controller_.WaitFor([](const pb::AgentMessage& m) { return m.has_register_(); });
  ASSERT_TRUE(reg);
  const pb::GpuInfo& g0 = reg->register_().inventory().gpus(0);
  ASSERT_EQ(g0.mig_layout_size(), 2);  // the static layout
  EXPECT_EQ(g0.mig_layout(1).profile(), "3g.40gb");
  EXPECT_EQ(g0.mig_layout(1).start(), 4u);
  const std::string uuid = g0.mig_layout(1).uuid();
  EXPECT_EQ(uuid.rfind("MIG-", 0), 0u);
  EXPECT_EQ(reg->register_().inventory().gpus(1).mig_layout_size(), 0);  // not in the layout

  ASSERT_EQ(LaunchMig("7.0.0", "3g.40gb", 4, 4).state(), pb::TaskStatus::RUNNING);
  for (int i = 0; i < 200 && !fs::exists(dir_ / "tasks/7.0.0/devices"); ++i) usleep(20000);
  std::string devices;
  std::ifstream(dir_ / "tasks/7.0.0/devices") >> devices;
  EXPECT_EQ(devices, uuid);

  pb::MigReshaped busy = Reshape(1, {{"3g.40gb", 4}}, {{"2g.20gb", 4}, {"1g.20gb", 6}});
  EXPECT_FALSE(busy.ok());
  EXPECT_EQ(busy.message(),
            "task 7.0.0 runs in the instance at slice 4 of GPU 0; nothing was changed");
  EXPECT_EQ(busy.layout_size(), 2);

  pb::MigReshaped done =
      Reshape(2, {{"3g.40gb", 0}}, {{"2g.20gb", 0}, {"1g.10gb", 2}, {"1g.10gb", 3}});
  EXPECT_TRUE(done.ok()) << done.message();
  EXPECT_EQ(DescribeMigLayout({done.layout().begin(), done.layout().end()}),
            "2g.20gb@0, 1g.10gb@2, 1g.10gb@3, 3g.40gb@4");
  EXPECT_EQ(done.gpu_index(), 0u);
  EXPECT_GE(done.duration_ms(), 0);
  // The same change again finds it done.
  pb::MigReshaped again =
      Reshape(3, {{"3g.40gb", 0}}, {{"2g.20gb", 0}, {"1g.10gb", 2}, {"1g.10gb", 3}});
  EXPECT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again.message(), "the GPU has that layout already");

  pb::TaskStatus gone = LaunchMig("7.0.1", "3g.40gb", 0, 4);
  EXPECT_EQ(gone.state(), pb::TaskStatus::FAILED_TO_START);
  EXPECT_EQ(gone.message(),
            "GPU 0 of node m1 has no MIG instance 3g.40gb at slice 0 (it has 2g.20gb@0, 1g.10gb@2, "
            "1g.10gb@3, "
            "3g.40gb@4); the controller must create it with a MigReshape first");
  EXPECT_EQ(LaunchMig("7.0.2", "1g.10gb", 2, 1).state(), pb::TaskStatus::RUNNING);
}

TEST_F(AgentMigTest, RefusesAReshapeThatDoesNotFit) {
  pb::MigReshaped r = Reshape(9, {}, {{"4g.40gb", 0}});  // 0-3 overlaps the 3g at 0
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            "4g.40gb at slice 0 overlaps an instance that stays (the GPU has 3g.40gb@0, 3g.40gb@4) "
            "or another one to "
            "create");
  EXPECT_EQ(r.layout_size(), 2);
}

}  // namespace
}  // namespace hangar::agent
