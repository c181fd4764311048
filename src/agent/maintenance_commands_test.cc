#include "agent/maintenance_commands.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;

// What the agent would send the controller, collected.
class Answers {
 public:
  MaintenanceCommands::Send Sink() {
    return [this](const pb::MaintenanceResult& r) {
      std::lock_guard<std::mutex> l(mu_);
      got_.push_back(r);
      cv_.notify_all();
    };
  }
  // The `n`th answer (waits for it; commands run on threads of their own).
  pb::MaintenanceResult Nth(size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return got_.size() > n; });
    return got_[n];
  }
  size_t size() {
    std::lock_guard<std::mutex> l(mu_);
    return got_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<pb::MaintenanceResult> got_;
};

class MaintenanceCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hangar-maint-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static pb::MaintenanceCommand Command(const std::string& id, const std::string& cmd) {
    pb::MaintenanceCommand c;
    c.set_id(id);
    c.set_command(cmd);
    return c;
  }
  fs::path dir_;
};

TEST_F(MaintenanceCommandsTest, AnAgentWithoutTheOptionRefusesAndRunsNothing) {
  Answers a;
  MaintenanceCommands m("node-3", dir_.string(), /*allowed=*/false, a.Sink());
  m.Handle(Command("1/node-3", "touch " + (dir_ / "ran").string()));
  const pb::MaintenanceResult r = a.Nth(0);
  EXPECT_TRUE(r.refused());
  EXPECT_EQ(r.id(), "1/node-3");
  EXPECT_EQ(r.error(),
            "the agent of node-3 runs no maintenance commands: start it with "
            "--allow-maintenance-commands to let `hangar maintain` run commands there");
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
}

TEST_F(MaintenanceCommandsTest, RunsOnceKeepsOutputAndAnswersAgainFromItsRecord) {
  Answers a;
  const std::string count = (dir_ / "count").string();
  {
    MaintenanceCommands m("node-1", dir_.string(), true, a.Sink());
    m.Handle(Command("2/node-1", "echo run >> " + count +
                                     "; echo on $HANGAR_NODE; echo oops >&2; "
                                     "exit 3"));
    const pb::MaintenanceResult r = a.Nth(0);
    EXPECT_FALSE(r.refused());
    EXPECT_EQ(r.exit_code(), 3);
    EXPECT_EQ(r.output(), "on node-1\noops\n");
    m.Handle(Command("2/node-1", "echo run >> " + count));  // asked again: answered, not run
    EXPECT_EQ(a.Nth(1).exit_code(), 3);
  }
  // A restarted agent answers from the record too.
  MaintenanceCommands again("node-1", dir_.string(), true, a.Sink());
  again.Handle(Command("2/node-1", "echo run >> " + count));
  EXPECT_EQ(a.Nth(2).output(), "on node-1\noops\n");
  std::ifstream in(count);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "run\n");
  std::ifstream log(dir_ / "2_node-1.log");
  std::string kept((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "on node-1\noops\n");
}

TEST_F(MaintenanceCommandsTest, ACommandAnEarlierAgentNeverFinishedIsOfUnknownOutcome) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "4_node-2.json") << R"({"id": "4/node-2", "command": "flash"})";
  Answers a;
  MaintenanceCommands m("node-2", dir_.string(), true, a.Sink());
  m.Handle(Command("4/node-2", "touch " + (dir_ / "ran").string()));
  const pb::MaintenanceResult r = a.Nth(0);
  EXPECT_EQ(r.exit_code(), -1);
  EXPECT_NE(r.error().find("restarted while the command ran, so its outcome is unknown"),
            std::string::npos)
      << r.error();
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
}

}  // namespace
}  // namespace hangar::agent
