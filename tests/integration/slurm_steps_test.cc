// Allocations and steps, as Slurm has them, end to end: a two-node batch script through a real
// `hangar dev` runs once, on the allocation's first node; its `srun` steps run on the job's nodes
// through the agents' step sockets and the controller, concurrently when started with `&`, their
// output back in the script's; `sacct` lists each step with its nodes and exit.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "dev_cluster.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

// Two nodes of 2 GPUs. The job asks 1 GPU per node: both would fit one node, and --nodes=2 must
// still give it two distinct nodes, as Slurm does.
constexpr const char* kTwoNodes = R"(name: steps
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 32Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-2]"}]}
)";

class SlurmStepsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dev_.Start()) << dev_.log(); }

  DevCluster::Ran Hangar(std::vector<std::string> args) { return dev_.Hangar(std::move(args)); }
  // Writes `script` as FILE in the work folder and submits it with `hangar sbatch --parsable`;
  // the job's id, once it has succeeded within `within` (0 when it did not).
  uint64_t RunScript(const std::string& file, const std::string& script, Duration within) {
    std::ofstream(dev_.work() + "/" + file) << script;
    DevCluster::Ran sub = Hangar({"sbatch", "--parsable", file});
    EXPECT_EQ(sub.rc, 0) << sub.output;
    const uint64_t id = DevCluster::LastLineId(sub.output);
    EXPECT_GT(id, 0u) << sub.output;
    if (id == 0) return 0;
    const bool done = dev_.WaitForState(id, "succeeded", within);
    EXPECT_TRUE(done) << JobState(id) << "\n" << dev_.log();
    return done ? id : 0;
  }
  std::string JobState(uint64_t id) { return dev_.JobState(id); }
  std::string Work(const std::string& file) { return dev_.Work(file); }

  DevCluster dev_{"slurm_steps", kTwoNodes};
};

// The two-node script of a Ray-style launch: one-off setup, a step across both nodes, then a head
// step on the first node and a worker step on the other, at once, and `wait`. Each of the two
// waits (bounded) for the other to have started, so they pass only when they run concurrently.
constexpr const char* kScript = R"(#!/bin/bash
#SBATCH -J steps -N 2 --ntasks-per-node=1 --gres=gpu:1 -c 1 --mem=1G -t 5 -o steps.out
echo "setup on node $SLURM_NODEID" >> setup.log
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
echo "nodelist $SLURM_JOB_NODELIST head $head"
srun -l bash -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS node $SLURM_NODEID $SLURMD_NODENAME step $SLURM_STEP_ID nodes $SLURM_STEP_NODELIST gpus $CUDA_VISIBLE_DEVICES"' | sort
meet='for i in $(seq 200); do [ -f "$1" ] && break; sleep 0.05; done; [ -f "$1" ] || { echo "never saw $1"; exit 9; }'
srun -N1 -n1 -w "$head" bash -c "touch head-started; echo head on \$SLURMD_NODENAME; $meet" _ worker-started > head.out &
h=$!
srun -N1 -n1 --exclude "$head" bash -c "touch worker-started; echo worker on \$SLURMD_NODENAME; $meet; exit 3" _ head-started > worker.out &
w=$!
wait $h; echo "head rc $?"
wait $w; echo "worker rc $?"
srun -K bash -c 'if [ "$SLURM_PROCID" = 1 ]; then exit 4; fi; sleep 60'; echo "kill-on-bad-exit rc $?"
srun -N1 bash -c 'touch cut-started; sleep 60' &
c=$!
for i in $(seq 200); do [ -f cut-started ] && break; sleep 0.05; done
kill $c; wait $c; echo "srun cut rc $?"
srun -N 3 true || echo "three nodes refused rc $?"
srun -N1 -n1 no-such-program-x 2>&1; echo "missing rc $?"
echo end
)";

TEST_F(SlurmStepsTest, TheScriptRunsOnceAndItsStepsRunOnTheAllocationsNodesAndAreAccounted) {
  std::ofstream(dev_.work() + "/steps.sbatch") << kScript;
  DevCluster::Ran sub = Hangar({"sbatch", "--parsable", "steps.sbatch"});
  ASSERT_EQ(sub.rc, 0) << sub.output;
  const uint64_t id = DevCluster::LastLineId(sub.output);  // warnings, if any, come before
  ASSERT_GT(id, 0u) << sub.output;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const std::string s = JobState(id);
        return s == "succeeded" || s == "failed" || s == "cancelled";
      },
      90 * kSecond))
      << JobState(id) << "\n"
      << dev_.log();
  const std::string out = Work("steps.out");
  EXPECT_EQ(JobState(id), "succeeded") << out;
  EXPECT_EQ(Work("setup.log"), "setup on node 0\n") << "the script runs once, on the first node";
  EXPECT_TRUE(Contains(out, "nodelist node-[1-2] head node-1\n")) << out;
  // Each task sees its node's one GPU of the job (which of the two is the scheduler's choice).
  EXPECT_TRUE(std::regex_search(out, std::regex("0: task 0 of 2 node 0 node-1 step 0 nodes "
                                                "node-\\[1-2\\] gpus [01]\n1: task 1 of 2 node 1 "
                                                "node-2 step 0 nodes node-\\[1-2\\] gpus [01]\n")))
      << out;
  EXPECT_EQ(Work("head.out"), "head on node-1\n");
  EXPECT_EQ(Work("worker.out"), "worker on node-2\n");
  EXPECT_TRUE(Contains(out, "head rc 0\nworker rc 3\n")) << out;
  // The failed task's status; its partner was ended at once (it would sleep for a minute).
  EXPECT_TRUE(Contains(out, "kill-on-bad-exit rc 4\n")) << out;
  EXPECT_TRUE(Contains(out, "srun cut rc 143\n")) << out;
  EXPECT_TRUE(Contains(
      out, "srun: error: the step asks for 3 nodes; the job's allocation (node-[1-2]) has 2"))
      << out;
  EXPECT_TRUE(Contains(out, "three nodes refused rc 1\n")) << out;
  // A program that is not there: slurmstepd's line and status 2 (ENOENT), as Slurm's srun.
  EXPECT_TRUE(Contains(out,
                       "slurmstepd: error: execve(): no-such-program-x: No such file or "
                       "directory\nmissing rc 2\nend\n"))
      << out;

  DevCluster::Ran acct = Hangar({"slurm", "sacct", "-j", std::to_string(id), "-P", "-n",
                                 "--format=JobID,JobName,State,ExitCode,NodeList,NTasks"});
  ASSERT_EQ(acct.rc, 0) << acct.output;
  const std::string ids = std::to_string(id);
  EXPECT_TRUE(Contains(acct.output, ids + ".0|bash|COMPLETED|0:0|node-[1-2]|2\n")) << acct.output;
  // The head and the worker steps started at once: either may be step 1.
  const bool head_first = Contains(acct.output, ids + ".1|bash|COMPLETED|0:0|node-1|1\n") &&
                          Contains(acct.output, ids + ".2|bash|FAILED|3:0|node-2|1\n");
  const bool worker_first = Contains(acct.output, ids + ".1|bash|FAILED|3:0|node-2|1\n") &&
                            Contains(acct.output, ids + ".2|bash|COMPLETED|0:0|node-1|1\n");
  EXPECT_TRUE(head_first || worker_first) << acct.output;
  EXPECT_TRUE(Contains(acct.output, ids + ".3|bash|FAILED|4:0|node-[1-2]|2\n")) << acct.output;
  // srun killed once its step runs: the step is ended at once and recorded cancelled.
  EXPECT_TRUE(Contains(acct.output, ids + ".4|bash|CANCELLED|0:0|node-1|1\n")) << acct.output;
  // The refused three-node step is not a step; the missing program's is, and failed with 2.
  EXPECT_TRUE(Contains(acct.output, ids + ".5|no-such-program-x|FAILED|2:0|node-1|1\n"))
      << acct.output;
  EXPECT_FALSE(Contains(acct.output, ids + ".6|")) << acct.output;
}

// `sacct` is history: the steps of a finished job are still listed after `hangar dev` (its
// controller) restarts on the same store.
TEST_F(SlurmStepsTest, StepsOutliveAControllerRestart) {
  const uint64_t id = RunScript("two.sbatch",
                                "#!/bin/bash\n#SBATCH -J two -N 1 -c 1 --mem=1G -t 5\nsrun true\n"
                                "srun bash -c 'exit 5' || true\n",
                                60 * kSecond);
  ASSERT_GT(id, 0u);
  const std::vector<std::string> sacct = {"slurm",
                                          "sacct",
                                          "-j",
                                          std::to_string(id),
                                          "-P",
                                          "-n",
                                          "--format=JobID,JobName,State,ExitCode"};
  const std::string ids = std::to_string(id);
  const std::string want = ids + ".0|true|COMPLETED|0:0\n" + ids + ".1|bash|FAILED|5:0\n";
  DevCluster::Ran before = Hangar(sacct);
  ASSERT_EQ(before.rc, 0) << before.output;
  EXPECT_TRUE(Contains(before.output, want)) << before.output;
  ASSERT_TRUE(dev_.Restart()) << dev_.log();
  DevCluster::Ran after = Hangar(sacct);
  ASSERT_EQ(after.rc, 0) << after.output;
  EXPECT_TRUE(Contains(after.output, want)) << after.output;
}

// GPUs per task, as Slurm binds them since 21.08: the job asks one GPU per task, two tasks on each
// of the two nodes, so each node's job task holds both of its node's GPUs; each step task gets its
// own of its node's, unless --gpu-bind=none; a step that needs more than the job has on a node is
// refused with the counts.
TEST_F(SlurmStepsTest, EachStepTaskGetsItsOwnGpusOfItsNode) {
  const uint64_t id = RunScript(
      "bind.sbatch",
      "#!/bin/bash\n"
      "#SBATCH -J bind -N 2 --ntasks-per-node=2 --gpus-per-task=1 -c 1 --mem=1G -t 5 -o "
      "bind.out\n"
      "echo \"job SLURM_GPUS_PER_TASK=$SLURM_GPUS_PER_TASK\"\n"
      "srun bash -c 'echo \"bound $SLURM_PROCID $SLURMD_NODENAME [$CUDA_VISIBLE_DEVICES]\"' | "
      "sort\n"
      "srun --gpu-bind=none bash -c 'echo \"all $SLURM_PROCID [$CUDA_VISIBLE_DEVICES]\"' | "
      "sort\n"
      "srun -N1 -n1 --gpus-per-task=2 bash -c 'echo \"two [$CUDA_VISIBLE_DEVICES]\"'\n"
      "srun --ntasks-per-node=3 true || echo \"three refused rc $?\"\n"
      "echo end\n",
      90 * kSecond);
  ASSERT_GT(id, 0u) << Work("bind.out");
  const std::string out = Work("bind.out");
  EXPECT_TRUE(Contains(out, "job SLURM_GPUS_PER_TASK=1\n")) << out;
  EXPECT_TRUE(Contains(out,
                       "bound 0 node-1 [0]\nbound 1 node-1 [1]\nbound 2 node-2 [0]\n"
                       "bound 3 node-2 [1]\n"))
      << out;
  EXPECT_TRUE(Contains(out, "all 0 [0,1]\nall 1 [0,1]\nall 2 [0,1]\nall 3 [0,1]\n")) << out;
  EXPECT_TRUE(Contains(out, "two [0,1]\n")) << out;
  EXPECT_TRUE(Contains(out,
                       "srun: error: 3 task(s) of --gpus-per-task=1 need 3 GPUs on node-1; the "
                       "job has 2 there"))
      << out;
  EXPECT_TRUE(Contains(out, "three refused rc 1\nend\n")) << out;
}

// A heterogeneous job (`#SBATCH hetjob`): its components are one gang of two task groups; the
// script runs once, on the first component's node, and sees each component's nodes; srun runs on
// the first component unless --het-group names others; a component the job lacks is refused.
TEST_F(SlurmStepsTest, AHetjobsStepsRunOnTheComponentsTheyName) {
  const uint64_t id =
      RunScript("het.sbatch",
                "#!/bin/bash\n"
                "#SBATCH -J het -N 1 --gres=gpu:1 -c 1 --mem=1G -t 5 -o het.out\n"
                "#SBATCH hetjob\n"
                "#SBATCH -N 1 --ntasks-per-node=2 --gres=gpu:2 -c 1 --mem=1G\n"
                "echo \"size $SLURM_HET_SIZE g0 $SLURM_JOB_NODELIST_HET_GROUP_0 g1 "
                "$SLURM_JOB_NODELIST_HET_GROUP_1 tpn $SLURM_TASKS_PER_NODE_HET_GROUP_1\"\n"
                "srun bash -c 'echo \"first $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME\"'\n"
                "srun --het-group=1 bash -c 'echo \"second $SLURM_PROCID of $SLURM_NTASKS on "
                "$SLURMD_NODENAME\"' | sort\n"
                "srun --het-group=0-1 --ntasks-per-node=1 bash -c 'echo \"both $SLURM_PROCID on "
                "$SLURMD_NODENAME\"' | sort\n"
                "srun --het-group=2 true || echo \"third refused rc $?\"\n"
                "echo end\n",
                90 * kSecond);
  ASSERT_GT(id, 0u) << Work("het.out");
  const std::string out = Work("het.out");
  // Component 0 asks 1 GPU and component 1 both of a node's 2: they lie on distinct nodes.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("size 2 g0 (node-[12]) g1 (node-[12]) tpn 2\n")))
      << out;
  const std::string first = m[1], second = m[2];
  EXPECT_NE(first, second) << out;
  EXPECT_TRUE(Contains(out, "first 0 of 1 on " + first + "\n")) << out;
  EXPECT_TRUE(Contains(out, "second 0 of 2 on " + second + "\nsecond 1 of 2 on " + second + "\n"))
      << out;
  EXPECT_TRUE(Contains(out, "both 0 on " + first + "\nboth 1 on " + second + "\n")) << out;
  EXPECT_TRUE(Contains(out, "srun: error: --het-group=2: the job has 2 components (0-1)")) << out;
  EXPECT_TRUE(Contains(out, "third refused rc 1\nend\n")) << out;
}

// sbatch --begin and --hold through `hangar dev`: the job is held from the start and, once
// released, still waits for its begin time, which the controller's tick notices without any other
// event; then it runs.
TEST_F(SlurmStepsTest, BeginAndHoldDeferTheStart) {
  std::ofstream(dev_.work() + "/later.sbatch")
      << "#!/bin/bash\n#SBATCH -J later -N1 -c1 --mem=1G -t 5 --begin=now+5 -H -o later.out\n"
         "date +%s > started\n";
  const auto t0 = std::chrono::system_clock::now();
  DevCluster::Ran sub = Hangar({"sbatch", "--parsable", "later.sbatch"});
  ASSERT_EQ(sub.rc, 0) << sub.output;
  const uint64_t id = DevCluster::LastLineId(sub.output);
  ASSERT_GT(id, 0u) << sub.output;
  const std::string ids = std::to_string(id);
  DevCluster::Ran show = Hangar({"slurm", "scontrol", "show", "job", ids});
  EXPECT_TRUE(Contains(show.output, "JobState=PENDING")) << show.output;
  DevCluster::Ran why = Hangar({"explain", ids});
  EXPECT_TRUE(Contains(why.output, "held by")) << why.output;
  DevCluster::Ran release = Hangar({"slurm", "scontrol", "release", ids});
  ASSERT_EQ(release.rc, 0) << release.output;
  why = Hangar({"explain", ids});
  EXPECT_TRUE(Contains(why.output, "begins at ")) << why.output;
  ASSERT_TRUE(dev_.WaitForState(id, "succeeded", 30 * kSecond)) << JobState(id) << dev_.log();
  const long started = std::stol(Work("started"));
  const long submitted =
      std::chrono::duration_cast<std::chrono::seconds>(t0.time_since_epoch()).count();
  EXPECT_GE(started, submitted + 4) << "not before its --begin=now+5";
}

// The job's checkpoint signal reaches its running steps too, as Slurm signals a job's steps:
// --signal=USR1@55 with -t 1 sends USR1 five seconds in; the step, in a session of its own, traps
// it and ends cleanly.
TEST_F(SlurmStepsTest, TheCheckpointSignalReachesTheSteps) {
  std::ofstream(dev_.work() + "/sig.sbatch")
      << "#!/bin/bash\n#SBATCH -J sig -N1 -c1 --mem=1G -t 1 --signal=USR1@55 -o sig.out\n"
         "trap 'echo script got USR1' USR1\n"
         "srun bash -c 'trap \"echo step got USR1 > step-signalled; exit 0\" USR1; touch "
         "step-started; while :; do sleep 0.1; done' &\n"
         "s=$!\nwait $s; wait $s; echo \"step rc $?\"\n";
  DevCluster::Ran sub = Hangar({"sbatch", "--parsable", "sig.sbatch"});
  ASSERT_EQ(sub.rc, 0) << sub.output;
  const uint64_t id = DevCluster::LastLineId(sub.output);
  ASSERT_GT(id, 0u) << sub.output;
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return fs::exists(dev_.work() + "/step-signalled"); },
                                    40 * kSecond))
      << JobState(id) << "\n"
      << Work("sig.out") << dev_.log();
  EXPECT_EQ(Work("step-signalled"), "step got USR1\n");
  ASSERT_TRUE(dev_.WaitForState(id, "timed_out", 30 * kSecond)) << JobState(id);
  const std::string out = Work("sig.out");
  EXPECT_TRUE(Contains(out, "script got USR1\n")) << out;
  EXPECT_TRUE(Contains(out, "step rc 0\n")) << out;
}

// A folder too deep for a Unix socket's path puts the services' HAProxy runtime socket under /tmp
// (dev_load_balancer.cc); it goes with `hangar dev` (547 such files had piled up in /tmp from the
// test runs before).
TEST(DevLoadBalancerTest, ItsSocketUnderTmpGoesWithHangarDev) {
  std::string socket;
  {
    DevCluster dev(std::string(90, 'd'), kTwoNodes);
    ASSERT_TRUE(dev.Start()) << dev.log();
    socket = "/tmp/hangar-dev-lb-" + std::to_string(dev.pid()) + ".sock";
    ASSERT_TRUE(fs::exists(socket)) << "the deep folder's socket is under /tmp: " << dev.log();
  }
  EXPECT_FALSE(fs::exists(socket)) << socket << " stayed behind";
}

}  // namespace
}  // namespace hangar::testing
