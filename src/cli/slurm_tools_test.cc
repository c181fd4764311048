#include "cli/slurm_tools.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/fake_api.h"
#include "cli/slurm_format.h"
#include "cli/squeue.h"

namespace hangar::cli {
namespace {

using testing::FakeApi;

TEST(SlurmFormatTest, HostListsExpandAsSlurmsDo) {
  auto a = slurm::ExpandHostList("node-[1-3,5],gpu-a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (std::vector<std::string>{"node-1", "node-2", "node-3", "node-5", "gpu-a"}));
  auto b = slurm::ExpandHostList("rack[1-2]-n[09-10]");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<std::string>{"rack1-n09", "rack1-n10", "rack2-n09", "rack2-n10"}));
  EXPECT_EQ(CompressHostList(*slurm::ExpandHostList("gpu-[00-03,07]")), "gpu-[00-03,07]");
  for (const char* bad :
       {"node-[1-", "node-[a-b]", "node-[5-1]", "node-]", "a[1-99999]b[1-99999]"}) {
    EXPECT_FALSE(slurm::ExpandHostList(bad).ok()) << bad;
  }
}

TEST(SlurmFormatTest, FormatListsAndWidths) {
  auto f = slurm::ParseSacctFormat("JobIdRaw,State%20");
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->size(), 2u);
  EXPECT_EQ((*f)[1].width, 20);
  EXPECT_FALSE(slurm::ParseSacctFormat("State%x").ok());
  auto q = slurm::ParseSqueueFormat("%.5i|%-4j %T");
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 3u);
  EXPECT_EQ(slurm::Fit("12", (*q)[0]), "   12");
  EXPECT_EQ((*q)[1].literal, "|");
  EXPECT_EQ(slurm::Fit("abcdef", (*q)[1]), "abcd");
  EXPECT_FALSE(slurm::ParseSqueueFormat("%.18").ok());
}

class SlurmToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.server().Get(R"(/v1/jobs/(\d+))",
                      [this](const httplib::Request& req, httplib::Response& res) {
                        api_.Record(req);
                        const std::string id = req.matches[1];
                        if (id == "7") return res.set_content(kDone, "application/json");
                        if (id == "8") return res.set_content(kPending, "application/json");
                        if (id == "20") return res.set_content(kElement0, "application/json");
                        res.status = 404;
                        res.set_content(R"({"error": {"code": ")" +
                                            std::string(StatusCodeName(StatusCode::kNotFound)) +
                                            R"(", "message": "job )" + id + R"( does not exist"}})",
                                        "application/json");
                      });
    api_.server().Get("/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
      api_.Record(req);
      if (req.get_param_value("array") == "20")
        return res.set_content("{\"jobs\": [" + std::string(kElement0) + "," + kElement1 + "]}",
                               "application/json");
      const std::string state = req.has_param("state") ? req.get_param_value("state") : "";
      std::string jobs = state == "pending" ? kPending : state == "running" ? kRunning : "";
      if (state.empty()) jobs = std::string(kDone) + "," + kPending + "," + kRunning;
      res.set_content("{\"jobs\": [" + jobs + "]}", "application/json");
    });
    api_.server().Post(
        R"(/v1/jobs/bulk/cancel)", [this](const httplib::Request& req, httplib::Response& res) {
          api_.Record(req);
          cancelled_ = req.body;
          res.set_content(R"({"matched": 1, "changed": 1, "unchanged": 0, "skipped": []})",
                          "application/json");
        });
    api_.server().Get("/v1/queues", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(
          R"({"queues": [{"name": "research", "users": ["ada"]}, {"name": "prod", "users": ["bob"]}]})",
          "application/json");
    });
  }
  // Runs the tool against the fake API; its stdout.
  std::string Run(const std::string& tool, const std::vector<std::string>& args,
                  int* rc = nullptr) {
    ::testing::internal::CaptureStdout();
    int code = -1;
    try {
      code = RunSlurmTool(tool, args, api_.address());
    } catch (const std::exception& e) {
      ADD_FAILURE() << tool << " threw: " << e.what();
    }
    if (rc) *rc = code;
    return ::testing::internal::GetCapturedStdout();
  }

  static constexpr const char* kDone =
      R"({"id": 7, "name": "train", "queue": "research", "user": "ada", "state": "succeeded", "tasks": 2, "gpus": 16,
          "submitted_ms": 1796500000000, "started_ms": 1796500001000, "ended_ms": 1796500062000,
          "task_list": [{"index": 0, "node": "node-1", "state": "ended", "exit_code": 0},
                        {"index": 1, "node": "node-2", "state": "ended", "exit_code": 0}],
          "spec": {"time_limit": "7200000ms"}})";
  static constexpr const char* kPending =
      R"({"id": 8, "name": "eval", "queue": "research", "account": "physics", "user": "ada", "state": "pending",
          "tasks": 1, "gpus": 1,
          "reason": "Resources", "submitted_ms": 1796500000000, "task_list": [], "spec": {}})";
  static constexpr const char* kRunning =
      R"({"id": 9, "name": "serve", "queue": "prod", "user": "bob", "state": "running", "tasks": 1, "gpus": 1,
          "submitted_ms": 1796500000000, "started_ms": 1796500001000,
          "task_list": [{"index": 0, "node": "node-3", "state": "running", "exit_code": 0}], "spec": {}})";
  // Job 20 is an array of two elements, 20_0 (job 20) and 20_1 (job 21).
  static constexpr const char* kElement0 =
      R"({"id": 20, "array_id": 20, "array_index": 0, "name": "sweep", "queue": "research", "user": "ada",
          "state": "failed", "tasks": 1, "gpus": 1, "submitted_ms": 1796500000000,
          "started_ms": 1796500001000, "ended_ms": 1796500002000,
          "task_list": [{"index": 0, "node": "node-1", "state": "ended", "exit_code": 2}], "spec": {}})";
  static constexpr const char* kElement1 =
      R"({"id": 21, "array_id": 20, "array_index": 1, "name": "sweep", "queue": "research", "user": "ada",
          "state": "succeeded", "tasks": 1, "gpus": 1, "submitted_ms": 1796500000000,
          "started_ms": 1796500001000, "ended_ms": 1796500002000,
          "task_list": [{"index": 0, "node": "node-2", "state": "ended", "exit_code": 0}], "spec": {}})";
  FakeApi api_;
  std::string cancelled_;
};

// As in Slurm, an array's id names the whole array: every element, each as ARRAYID_INDEX; an
// element is named by ARRAYID_INDEX. Found by tests/slurm/slurm_diff.py (sacct -j ARRAYID listed
// only the first element).
TEST_F(SlurmToolsTest, AnArraysIdSelectsEveryElement) {
  EXPECT_EQ(Run("sacct", {"-P", "-n", "-X", "--format=JobID,State", "-j", "20"}),
            "20_0|FAILED\n20_1|COMPLETED\n");
  EXPECT_EQ(Run("sacct", {"-P", "-n", "-X", "--format=JobID,State", "-j", "20_1"}),
            "20_1|COMPLETED\n");
  EXPECT_EQ(Run("squeue", {"-h", "-t", "all", "-o", "%i %T", "-j", "20"}),
            "20_0 FAILED\n20_1 COMPLETED\n");
}

// What Snakemake's Slurm executor runs to follow its jobs.
TEST_F(SlurmToolsTest, SacctParsableAnswersIdAndStateAsSnakemakeReadsThem) {
  int rc = 0;
  EXPECT_EQ(Run("sacct", {"-P", "-n", "--format=JobIdRaw,State", "-j", "7,8"}, &rc),
            "7|COMPLETED\n8|PENDING\n");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(Run("sacct", {"-X", "--parsable2", "--noheader", "--format",
                          "JobID,ExitCode,NodeList,Elapsed", "-j7"}),
            "7|0:0|node-[1-2]|1:01\n");
  // An id that does not exist prints nothing, as in Slurm.
  EXPECT_EQ(Run("sacct", {"-Pn", "-o", "JobIdRaw,State", "-j", "99"}), "");
  EXPECT_EQ(Run("sacct", {"-j", "7", "--format=JobID,State"}),
            "JobID             State \n------------ ---------- \n7             COMPLETED \n");
  Run("sacct", {"-P", "--format=JobID,Bogus"}, &rc);
  EXPECT_EQ(rc, 1);
}

TEST_F(SlurmToolsTest, SqueueListsJobsNotEndedInItsColumnsAndFormats) {
  const std::string all = Run("squeue", {});
  EXPECT_EQ(all.substr(0, all.find("                 9")),
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
            "                 8  research     eval      ada PD       0:00      1 (Resources)\n");
  EXPECT_NE(all.find("                 9      prod    serve      bob  R "), std::string::npos)
      << all;
  EXPECT_EQ(all.find("train"), std::string::npos) << "an ended job is not in squeue's list";
  EXPECT_EQ(Run("squeue", {"-h", "-o", "%i|%T|%u", "-u", "bob"}), "9|RUNNING|bob\n");
  EXPECT_EQ(Run("squeue", {"--noheader", "--format=%i %j", "-t", "pd"}), "8 eval\n");
  int rc = 0;
  Run("squeue", {"--bogus"}, &rc);
  EXPECT_EQ(rc, 1);
}

TEST_F(SlurmToolsTest, ScontrolShowsHostnamesAndJobs) {
  EXPECT_EQ(Run("scontrol", {"show", "hostnames", "node-[1-2],gpu-a"}), "node-1\nnode-2\ngpu-a\n");
  ::setenv("SLURM_JOB_NODELIST", "n[3-4]", 1);
  EXPECT_EQ(Run("scontrol", {"show", "hostnames"}), "n3\nn4\n");
  ::unsetenv("SLURM_JOB_NODELIST");
  const std::string job = Run("scontrol", {"show", "jobid", "-dd", "7"});
  EXPECT_NE(job.find("JobId=7 JobName=train"), std::string::npos) << job;
  EXPECT_NE(job.find("JobState=COMPLETED"), std::string::npos) << job;
  EXPECT_NE(job.find("NodeList=node-[1-2]"), std::string::npos) << job;
  EXPECT_NE(job.find("TimeLimit=02:00:00"), std::string::npos) << job;
  int rc = 0;
  Run("scontrol", {"show", "job", "99"}, &rc);
  EXPECT_EQ(rc, 1);
  Run("scontrol", {"update", "JobId=7", "TimeLimit=1:00:00"}, &rc);
  EXPECT_EQ(rc, 1) << "a change hangar cannot make is refused, not ignored";
}

TEST_F(SlurmToolsTest, ScancelCancelsByIdOrSelection) {
  int rc = 0;
  Run("scancel", {"8"}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(cancelled_, R"({"ids":[8]})");
  Run("scancel", {"-u", "ada", "-t", "PENDING"}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(cancelled_, R"({"state":"pending","user":"ada"})");
  Run("scancel", {"--signal=USR1", "8"}, &rc);
  EXPECT_EQ(rc, 1) << "a signal hangar does not send is refused";
}

TEST_F(SlurmToolsTest, SacctmgrNamesTheQueuesAUserMaySubmitTo) {
  EXPECT_EQ(Run("sacctmgr", {"-n", "-s", "list", "user", "ada", "format=account%20"}),
            "            research\n");
}

// sbatch -A sets the job's account: sacct's and squeue's Account; without one, the queue.
TEST_F(SlurmToolsTest, AccountIsTheJobsLabelElseItsQueue) {
  EXPECT_EQ(Run("sacct", {"-n", "-P", "-o", "JobIDRaw,Account,Partition", "-j", "8"}),
            "8|physics|research\n");
  EXPECT_EQ(Run("sacct", {"-n", "-P", "-o", "JobIDRaw,Account", "-j", "7"}), "7|research\n");
}

// Snakemake's probes: `sinfo -o %P` for the default partition, `sacct -nu "$USER" -o Account%20`.
TEST_F(SlurmToolsTest, SinfoFormatsAndBundledShortOptions) {
  api_.server().Get("/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        R"({"nodes": [{"name": "node-1", "state": "ready", "gpus": 8, "gpus_free": 8, "model": "H100"},
                                  {"name": "node-2", "state": "ready", "gpus": 8, "gpus_free": 0, "model": "H100"},
                                  {"name": "node-3", "state": "drained", "gpus": 8, "gpus_free": 8, "model": "H100"}]})",
        "application/json");
  });
  EXPECT_EQ(Run("sinfo", {"-o", "%P"}), "PARTITION\nresearch*\nprod\n");
  EXPECT_EQ(Run("sinfo", {"-h", "-p", "prod", "-o", "%P %D %t %N"}),
            "prod 1 idle node-1\nprod 1 alloc node-2\nprod 1 drain node-3\n");
  EXPECT_EQ(Run("sacct", {"-nu", "ada", "-o", "Account%20", "-j", "7"}), "            research \n");
}

// Snakemake runs `srun -n1 --cpu-bind=q snakemake ...` from inside its job; a launcher may run a
// few local tasks. Each gets its rank; srun's status is its worst task's.
TEST(SlurmSrunTest, RunsTheStepsTasksOnThisNodeWithTheirRanks) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("srun-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  ::unsetenv("HANGAR_JOB_ID");
  EXPECT_EQ(RunSlurmTool("srun", {"true"}, ""), 1) << "outside a job, srun says where it belongs";
  ::setenv("HANGAR_JOB_ID", "5", 1);
  ::setenv("SLURM_NODEID", "1", 1);
  ::setenv("SLURM_NTASKS_PER_NODE", "2", 1);
  EXPECT_EQ(RunSlurmTool("srun",
                         {"-n1", "--cpu-bind=q", "sh", "-c",
                          "echo $SLURM_PROCID/$SLURM_LOCALID > " + dir + "/one"},
                         ""),
            0);
  EXPECT_EQ(
      RunSlurmTool("srun",
                   {"sh", "-c", "echo $SLURM_PROCID/$SLURM_LOCALID > " + dir + "/t$SLURM_LOCALID"},
                   ""),
      0);
  auto read = [&](const std::string& f) {
    std::ifstream in(dir + "/" + f);
    std::string s;
    std::getline(in, s);
    return s;
  };
  EXPECT_EQ(read("one"), "2/0");
  EXPECT_EQ(read("t0"), "2/0");
  EXPECT_EQ(read("t1"), "3/1") << "without -n, the node's share of the job's tasks";
  // A script that asked no --ntasks-per-node has no SLURM_NTASKS_PER_NODE (as in Slurm): srun
  // takes the node's share from SLURM_TASKS_PER_NODE.
  ::unsetenv("SLURM_NTASKS_PER_NODE");
  ::setenv("SLURM_TASKS_PER_NODE", "2(x2)", 1);
  std::filesystem::remove(dir + "/t1");
  EXPECT_EQ(
      RunSlurmTool("srun",
                   {"sh", "-c", "echo $SLURM_PROCID/$SLURM_LOCALID > " + dir + "/t$SLURM_LOCALID"},
                   ""),
      0);
  EXPECT_EQ(read("t1"), "3/1") << "the share from SLURM_TASKS_PER_NODE";
  ::setenv("SLURM_NTASKS_PER_NODE", "2", 1);
  EXPECT_EQ(RunSlurmTool("srun", {"--ntasks", "3", "sh", "-c", "exit $SLURM_LOCALID"}, ""), 2);
  EXPECT_EQ(RunSlurmTool("srun", {"-n", "1", "sh", "-c", "kill -9 $$"}, ""), 137);
  EXPECT_EQ(RunSlurmTool("srun", {"-N2", "true"}, ""), 1)
      << "a step over several nodes is refused, not run here";
  EXPECT_EQ(RunSlurmTool("srun", {"-w", "node-2", "true"}, ""), 1);
  EXPECT_EQ(RunSlurmTool("srun", {"-n1", "/no/such/program"}, ""), 2)
      << "as Slurm: the task exits with ENOENT";
  for (const char* v :
       {"HANGAR_JOB_ID", "SLURM_NODEID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
    ::unsetenv(v);
  std::filesystem::remove_all(dir);
}

// Without the agent (a container task), srun binds GPUs per task from this task's own
// CUDA_VISIBLE_DEVICES, as the controller does across nodes.
TEST(SlurmSrunTest, LocalTasksGetTheirOwnGpusPerTask) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("srun-gpus-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  ::setenv("HANGAR_JOB_ID", "5", 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b,GPU-c,GPU-d", 1);
  const std::string write = "echo $CUDA_VISIBLE_DEVICES > " + dir + "/g$SLURM_LOCALID";
  auto read = [&](const std::string& f) {
    std::ifstream in(dir + "/" + f);
    std::string s;
    std::getline(in, s);
    return s;
  };
  EXPECT_EQ(RunSlurmTool("srun", {"-n2", "--gpus-per-task=h100:2", "sh", "-c", write}, ""), 0);
  EXPECT_EQ(read("g0"), "GPU-a,GPU-b");
  EXPECT_EQ(read("g1"), "GPU-c,GPU-d");
  ::setenv("SLURM_GPUS_PER_TASK", "1", 1);  // the job's (sbatch --gpus-per-task=1)
  EXPECT_EQ(RunSlurmTool("srun", {"-n2", "sh", "-c", write}, ""), 0);
  EXPECT_EQ(read("g1"), "GPU-b");
  EXPECT_EQ(RunSlurmTool("srun", {"-n2", "--gpu-bind=none", "sh", "-c", write}, ""), 0);
  EXPECT_EQ(read("g1"), "GPU-a,GPU-b,GPU-c,GPU-d");
  EXPECT_EQ(RunSlurmTool("srun", {"-n5", "true"}, ""), 1) << "5 tasks of 1 GPU: this task has 4";
  EXPECT_EQ(RunSlurmTool("srun", {"-n1", "--gpus-per-task=x", "true"}, ""), 1);
  for (const char* v : {"HANGAR_JOB_ID", "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_PER_TASK"})
    ::unsetenv(v);
  std::filesystem::remove_all(dir);
}

TEST(SlurmInstallTest, WritesRegularExecutablesThatRunHangar) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("slurm-bin-" + std::to_string(getpid()))).string();
  std::string error;
  const auto names = InstallSlurmCommands(dir, "/opt/hangar's/bin/hangar", &error);
  ASSERT_TRUE(error.empty()) << error;
  for (const char* n : {"sbatch", "srun", "salloc", "squeue", "scancel", "sacct", "sacctmgr",
                        "sinfo", "scontrol"}) {
    const std::string path = dir + "/" + n;
    struct stat st {};
    ASSERT_EQ(lstat(path.c_str(), &st), 0) << path;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << path << " must be a regular file, not a link";
    EXPECT_EQ(st.st_mode & 0777, 0755u) << path;
  }
  std::ifstream in(dir + "/sacct");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("exec '/opt/hangar'\\''s/bin/hangar' slurm sacct \"$@\""), std::string::npos)
      << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hangar::cli
