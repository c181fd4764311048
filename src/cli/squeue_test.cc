// squeue's columns from /v1/jobs, and `hangar sbatch` / `hangar jobs -o slurm` against a fake API.
#include "cli/squeue.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/fake_api.h"

namespace hangar::cli {
namespace {

using testing::FakeApi;
using testing::RunCli;

TEST(SqueueTest, SlurmsStateLetters) {
  const std::pair<const char*, const char*> cases[] = {
      {"pending", "PD"},   {"starting", "CF"}, {"running", "R"},    {"preempting", "CG"},
      {"succeeded", "CD"}, {"failed", "F"},    {"cancelled", "CA"}, {"timed_out", "TO"}};
  for (auto [state, letters] : cases) EXPECT_EQ(SlurmStateLetters(state), letters) << state;
  EXPECT_EQ(SlurmStateLetters("held"),
            "held");  // a state Slurm has no letter for is shown as it is
}

TEST(SqueueTest, ElapsedTimeAsSqueuePrintsIt) {
  EXPECT_EQ(SlurmElapsed(0), "0:00");
  EXPECT_EQ(SlurmElapsed(65 * kSecond), "1:05");
  EXPECT_EQ(SlurmElapsed(kHour + 2 * kMinute + 3 * kSecond), "1:02:03");
  EXPECT_EQ(SlurmElapsed(2 * kDay + 3 * kHour + 4 * kMinute + 5 * kSecond), "2-03:04:05");
  EXPECT_EQ(SlurmElapsed(-5 * kSecond), "0:00");
}

TEST(SqueueTest, HostListsAreCompressedAsSlurmDoes) {
  EXPECT_EQ(CompressHostList({"node-1"}), "node-1");
  EXPECT_EQ(CompressHostList({"node-2", "node-1", "node-3", "node-5"}), "node-[1-3,5]");
  EXPECT_EQ(CompressHostList({"gpu07", "gpu08", "cpu1", "login"}), "gpu[07-08],cpu1,login");
  EXPECT_EQ(CompressHostList({"n9", "n10", "n11"}), "n[9-11]");
  EXPECT_EQ(CompressHostList({}), "");
}

TEST(SqueueTest, RendersTheColumnsOfSqueue) {
  api::JobView running;
  running.id = 12;
  running.name = "llama-pretrain";
  running.queue = "default";
  running.user = "ada";
  running.state = "running";
  running.tasks = 2;
  running.started = 1000;
  running.task_views = {{0, "batch", "node-1", {0}, {}, "running"},
                        {1, "batch", "node-2", {0}, {}, "running"}};
  api::JobView pending;
  pending.id = 13;
  pending.name = "sweep";
  pending.queue = "research";
  pending.state = "pending";
  pending.tasks = 1;
  pending.reason = "waiting for 8 GPUs on one node";
  api::JobView done = running;
  done.id = 11;
  done.state = "succeeded";
  done.ended = 1000 + 90 * kSecond;
  EXPECT_EQ(RenderSqueue({running, pending, done}, 1000 + kHour + 5 * kSecond),
            "JOBID  PARTITION  NAME            USER  ST  TIME     NODES  NODELIST(REASON)\n"
            "12     default    llama-pretrain  ada   R   1:00:05  2      node-[1-2]\n"
            "13     research   sweep           -     PD  0:00     1      (waiting for 8 GPUs on "
            "one node)\n"
            "11     default    llama-pretrain  ada   CD  1:30     2      node-[1-2]\n");
}

TEST(SqueueCliTest, JobsDashOSlurmReadsTheSameList) {
  FakeApi api;
  api.server().Get("/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    api.Record(req);
    res.set_content(
        R"({"jobs": [{"id": 7, "name": "a", "queue": "default", "user": "bob", "state": "pending",
                                  "tasks": 2, "reason": "waiting for the next scheduling cycle"}]})",
        "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"jobs", "-o", "slurm", "--state", "pending"}), 0);
  EXPECT_EQ(
      ::testing::internal::GetCapturedStdout(),
      "JOBID  PARTITION  NAME  USER  ST  TIME  NODES  NODELIST(REASON)\n"
      "7      default    a     bob   PD  0:00  2      (waiting for the next scheduling cycle)\n");
  EXPECT_EQ(api.requests(), (std::vector<std::string>{"/v1/jobs?limit=100&state=pending"}));
}

class SbatchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (std::filesystem::temp_directory_path() / ("sbatch_cli_test." + std::to_string(getpid())))
            .string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Script(const std::string& text) {
    const std::string path = dir_ + "/run.sbatch";
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(SbatchCliTest, SubmitsTheConvertedJobAndSaysSoInSbatchsWords) {
  FakeApi api;
  std::string body, type;
  api.server().Post("/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    body = req.body;
    type = req.get_header_value("Content-Type");
    res.status = 201;
    res.set_content(R"({"id": 42})", "application/json");
  });
  const std::string path = Script("#!/bin/bash\n#SBATCH -J hello -t 10 --gres=gpu:1\necho hi\n");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"sbatch", path, "-t", "1:00:00", "-p", "research"}), 0);
  EXPECT_EQ(RunCli(api, {"sbatch", "--parsable", path}), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "Submitted batch job 42\n42\n");
  EXPECT_EQ(type, "application/yaml");
  EXPECT_EQ(body.rfind("name: hello\ntime_limit: 10m\n", 0), 0u)
      << body;  // the last one: no overrides
}

// What Snakemake's Slurm executor runs for every rule: any #SBATCH option on the command line,
// and the job as --wrap. Each of these options was refused before ("argument was not expected").
TEST_F(SbatchCliTest, SnakemakesCommandLineWithWrapIsAJob) {
  FakeApi api;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"sbatch", "--dry-run", "-J", "snakejob_a_1", "-o",
                         ".snakemake/slurm_logs/rule_a/%j.log", "--export=ALL", "-A", "default",
                         "-p", "default", "-t", "10", "--mem", "100", "--cpus-per-task=1", "-D",
                         dir_, "--wrap=python3 -m snakemake --target-jobs 'a:'"}),
            0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.rfind("name: snakejob_a_1\n", 0), 0u) << out << err;
  EXPECT_NE(out.find("python3 -m snakemake --target-jobs 'a:'"), std::string::npos) << out;
  EXPECT_NE(out.find("time_limit: 10m"), std::string::npos) << out;
  // Words after the script that are no options would be its arguments: refused, not dropped.
  const std::string path = Script("#!/bin/bash\necho hi\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"sbatch", "--dry-run", path, "input.txt"}), 1);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(
                "arguments after the script (input.txt) are not passed"),
            std::string::npos);
}

TEST_F(SbatchCliTest, CommandLineOptionsOverrideAndDryRunPrintsTheJob) {
  FakeApi api;
  api.server().set_logger(
      [&](const httplib::Request& req, const httplib::Response&) { api.Record(req); });
  const std::string path = Script("#!/bin/bash\n#SBATCH -J hello -t 10\necho hi\n");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(
      RunCli(api, {"sbatch", "--dry-run", path, "-t", "1:00:00", "-p", "research", "-J", "other",
                   "-a", "0-3%2", "-d", "afterok:5", "-q", "high", "-o", "o-%j.txt"}),
      0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.rfind("name: other\nqueue: research\npriority: 100\ntier: guaranteed\narray: "
                      "0-3%2\nafter:\n  ok: [5]\n"
                      "time_limit: 1h\n",
                      0),
            0u)
      << out;
  EXPECT_NE(out.find("> \"o-${HANGAR_JOB_ID}.txt\" 2>&1"), std::string::npos) << out;
  EXPECT_TRUE(api.requests().empty());  // a dry run sends nothing
  // What is set aside is said on stderr; the job file alone goes to stdout.
  const std::string set_aside = Script("#!/bin/bash\n#SBATCH -J hi --mail-type=END\necho hi\n");
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"sbatch", "--dry-run", set_aside}), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "warning: " + set_aside +
                ":2: #SBATCH --mail-type=END is set aside: Hangar sends no mail; follow the job "
                "with `hangar events job/ID` or `hangar jobs`\n");
  EXPECT_EQ(::testing::internal::GetCapturedStdout().rfind("name: hi\n", 0), 0u);
  EXPECT_TRUE(api.requests().empty());
}

TEST_F(SbatchCliTest, EveryRefusedDirectiveIsNamedAndNothingIsSent) {
  FakeApi api;
  api.server().set_logger(
      [&](const httplib::Request& req, const httplib::Response&) { api.Record(req); });
  const std::string path =
      Script("#!/bin/bash\n#SBATCH -J x\n#SBATCH --begin=whenever\n#SBATCH --test-only\necho hi\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"sbatch", path}), 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "error: " + path +
                ":3: #SBATCH --begin=whenever: 'whenever' is not a time sbatch reads: write "
                "now+30minutes, 22:00, 10:00pm, tomorrow, midnight, 2026-12-24 or "
                "2026-12-24T18:00:00\n"
                "error: " +
                path +
                ":4: #SBATCH --test-only cannot be honoured by hangar sbatch; use `hangar sbatch "
                "--dry-run`\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"sbatch", dir_ + "/missing.sbatch"}), 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "error: " + dir_ + "/missing.sbatch: cannot open the batch script; check the path\n");
  EXPECT_TRUE(api.requests().empty());
}

}  // namespace
}  // namespace hangar::cli
