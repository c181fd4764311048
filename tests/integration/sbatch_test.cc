// `hangar sbatch` end to end (issue 20, item 6): batch scripts submitted with the `hangar` binary
// to a real `hangar dev`, run by its agent, their output in the --output files; `hangar jobs -o
// slurm`. The array and dependency tests need the job spec's `array` and `after` fields (issue 20,
// items 1-2): they skip, saying so, while the parser does not know them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dev_cluster.h"
#include "job/job_spec.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOneNode = R"(name: sbatch
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 32Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-1"}]}
)";

using Ran = DevCluster::Ran;

// Whether this build's job parser knows a top-level field (issue 20's `array` and `after`).
bool ParserKnows(const std::string& field_yaml) {
  auto spec = job::ParseJobSpec(
      "name: probe\n" + field_yaml + "\ntasks: [{cpu: 1, command: [true]}]\n", "probe");
  return spec.ok() || spec.status().message().find("unknown field") == std::string::npos;
}

// `hangar dev`'s own cluster: 4 nodes x 8 GPUs, as the examples expect.
constexpr const char* kDevLike = R"(name: dev-like
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-2]"}]}
        - {name: leaf-1, nodes: [{name: "node-[3-4]"}]}
)";

class SbatchEndToEndTest : public ::testing::Test {
 protected:
  virtual const char* Cluster() const { return kOneNode; }

  void SetUp() override {
    dev_ = std::make_unique<DevCluster>("sbatch_e2e", Cluster());
    dir_ = dev_->dir();
    ASSERT_TRUE(dev_->Start()) << dev_->log();
  }

  // Runs `hangar ARGS --server DEV` in the work folder (sbatch's submit folder).
  Ran Hangar(std::vector<std::string> args) { return dev_->Hangar(std::move(args)); }

  // Submits `script` (written to work/NAME) and returns the job id sbatch printed (0 on failure).
  uint64_t Sbatch(const std::string& name, const std::string& script,
                  std::vector<std::string> options = {}) {
    std::ofstream(dir_ + "/work/" + name) << script;
    std::vector<std::string> args = {"sbatch", name};
    args.insert(args.end(), options.begin(), options.end());
    Ran r = Hangar(args);
    EXPECT_EQ(r.rc, 0) << r.output;
    const std::string prefix = "Submitted batch job ";
    EXPECT_EQ(r.output.rfind(prefix, 0), 0u) << r.output;
    return r.output.rfind(prefix, 0) == 0 ? std::stoull(r.output.substr(prefix.size())) : 0;
  }

  std::string JobState(uint64_t id) { return dev_->JobState(id); }
  bool WaitForState(uint64_t id, const std::string& want, Duration timeout) {
    return dev_->WaitForState(id, want, timeout);
  }
  std::string Work(const std::string& file) { return dev_->Work(file); }

  std::unique_ptr<DevCluster> dev_;
  std::string dir_;
};

TEST_F(SbatchEndToEndTest, ASingleNodeScriptRunsAndItsOutputFileHoldsWhatItPrinted) {
  const uint64_t id =
      Sbatch("hello.sbatch",
             "#!/bin/sh\n"
             "#SBATCH --job-name=hello\n"
             "#SBATCH --gres=gpu:1 --cpus-per-task=1 --mem=1G\n"
             "#SBATCH --time=5\n"
             "#SBATCH --output=hello-%j.out\n"
             "echo \"hello from $SLURM_JOB_NAME job $SLURM_JOB_ID in $(basename \"$PWD\")\"\n"
             "srun sh -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS\"'\n"
             "echo to-stderr >&2\n");
  ASSERT_GT(id, 0u);
  ASSERT_TRUE(WaitForState(id, "succeeded", 60 * kSecond)) << JobState(id) << "\n" << dev_->log();
  const std::string ids = std::to_string(id);
  EXPECT_EQ(Work("hello-" + ids + ".out"),
            "hello from hello job " + ids + " in work\ntask 0 of 1\nto-stderr\n");

  Ran q = Hangar({"jobs", "-o", "slurm"});
  EXPECT_EQ(q.rc, 0) << q.output;
  EXPECT_EQ(q.output.rfind("JOBID  PARTITION  NAME   USER", 0), 0u) << q.output;
  EXPECT_TRUE(Contains(q.output, "\n" + ids + "      default    hello  ")) << q.output;
  EXPECT_TRUE(Contains(q.output, "  CD  ")) << q.output;
  EXPECT_TRUE(Contains(q.output, "node-1\n")) << q.output;
}

TEST_F(SbatchEndToEndTest, AFailingScriptFailsTheJobAndARefusedOneIsNeverSent) {
  const uint64_t id =
      Sbatch("fails.sbatch", "#!/bin/sh\n#SBATCH -c 1 -o fails.out\necho before; exit 7\n");
  ASSERT_GT(id, 0u);
  ASSERT_TRUE(WaitForState(id, "failed", 60 * kSecond)) << JobState(id);
  EXPECT_EQ(Work("fails.out"), "before\n");

  std::ofstream(dir_ + "/work/refused.sbatch")
      << "#!/bin/sh\n#SBATCH -c 1\n#SBATCH --begin=tonight\ntrue\n";
  Ran r = Hangar({"sbatch", "refused.sbatch"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.output,
            "error: refused.sbatch:3: #SBATCH --begin=tonight: 'tonight' is not a time sbatch "
            "reads: write now+30minutes, 22:00, 10:00pm, tomorrow, midnight, 2026-12-24 or "
            "2026-12-24T18:00:00\n");
  Ran jobs = Hangar({"jobs", "-o", "json"});
  EXPECT_EQ(nlohmann::json::parse(jobs.output, nullptr, false)["jobs"].size(), 1u) << jobs.output;
}

// Needs the job spec's `array` field (issue 20, item 1).
TEST_F(SbatchEndToEndTest, AnArrayRunsEveryElementWithItsIndex) {
  if (!ParserKnows("array: \"0-2\""))
    GTEST_SKIP() << "needs the job spec's `array` field (issue 20, item 1)";
  const uint64_t id = Sbatch(
      "sweep.sbatch",
      "#!/bin/sh\n#SBATCH -c 1 --array=0-9 -o sweep-%A_%a.out\n"
      "echo \"element $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT in $SLURM_ARRAY_JOB_ID\"\n",
      {"--array=0-2%2"});  // the command line wins
  ASSERT_GT(id, 0u);
  const std::string ids = std::to_string(id);
  for (int i = 0; i < 3; ++i) {
    const std::string file = "sweep-" + ids + "_" + std::to_string(i) + ".out";
    EXPECT_TRUE(LocalCluster::WaitFor([&] { return !Work(file).empty(); }, 60 * kSecond)) << file;
    EXPECT_EQ(Work(file), "element " + std::to_string(i) + " of 3 in " + ids + "\n") << file;
  }
  EXPECT_FALSE(fs::exists(dir_ + "/work/sweep-" + ids + "_3.out"));
}

// Needs the job spec's `after` field (issue 20, item 2).
TEST_F(SbatchEndToEndTest, AnAfterOkDependencyWaitsForTheFirstJob) {
  if (!ParserKnows("after: {ok: [1]}"))
    GTEST_SKIP() << "needs the job spec's `after` field (issue 20, item 2)";
  const uint64_t first =
      Sbatch("first.sbatch", "#!/bin/sh\n#SBATCH -c 1 -o first.out\nsleep 2; echo first done\n");
  ASSERT_GT(first, 0u);
  const uint64_t second =
      Sbatch("second.sbatch", "#!/bin/sh\n#SBATCH -c 1 -o second.out\ncat first.out; echo second\n",
             {"--dependency=afterok:" + std::to_string(first)});
  ASSERT_GT(second, 0u);
  ASSERT_TRUE(WaitForState(second, "succeeded", 60 * kSecond)) << JobState(second);
  EXPECT_EQ(Work("second.out"), "first done\nsecond\n");
}

class SbatchExamplesTest : public SbatchEndToEndTest {
 protected:
  const char* Cluster() const override { return kDevLike; }
};

// examples/slurm, submitted as they are from a copy of the folder (as `cd examples/slurm` would):
// each runs to success on a dev cluster, the stand-in train.py in place of a real trainer. They
// failed at run time before it was shipped (the array as that many failed jobs).
TEST_F(SbatchExamplesTest, EveryShippedExampleRunsToTheEnd) {
  const fs::path examples = fs::path(HANGAR_SOURCE_DIR) / "examples/slurm";
  for (const auto& e : fs::directory_iterator(examples))
    fs::copy_file(e.path(), dir_ + "/work/" + e.path().filename().string());
  const auto submit = [&](const std::string& name, std::vector<std::string> options = {}) {
    return Sbatch(name, ReadFile((examples / name).string()), std::move(options));
  };
  const uint64_t pretrain = submit("torchrun-2node.sbatch");
  const uint64_t resumable = submit("checkpoint-usr1.sbatch");
  uint64_t sweep = 0;
  if (ParserKnows("array: \"0-2\"")) sweep = submit("sweep-array.sbatch", {"--array=0-5%3"});
  ASSERT_TRUE(WaitForState(pretrain, "succeeded", 120 * kSecond))
      << JobState(pretrain) << "\n"
      << Work("pretrain-llama-pretrain-" + std::to_string(pretrain) + ".err");
  const std::string log = Work("pretrain-llama-pretrain-" + std::to_string(pretrain) + ".out");
  EXPECT_TRUE(Contains(log, "train.py: rank 0 done at step 5")) << log;
  EXPECT_TRUE(Contains(log, "train.py: rank 1 done at step 5")) << log;
  ASSERT_TRUE(WaitForState(resumable, "succeeded", 120 * kSecond)) << JobState(resumable);
  EXPECT_TRUE(Contains(Work("resumable-" + std::to_string(resumable) + ".log"),
                       "train.py: rank 0 done at step 5"));
  if (!sweep) return;
  for (int i = 0; i < 6; ++i) {
    const std::string file = "sweep-" + std::to_string(sweep) + "_" + std::to_string(i) + ".out";
    EXPECT_TRUE(LocalCluster::WaitFor([&] { return Contains(Work(file), "done at step 5"); },
                                      120 * kSecond))
        << file << ": " << Work(file);
    EXPECT_TRUE(fs::exists(dir_ + "/work/runs/lr-" + std::to_string(i) + "/metrics.json")) << i;
  }
}

}  // namespace
}  // namespace hangar::testing
