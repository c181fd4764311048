// Issue 17, end to end with real podman: a controller and agents on loopback, each agent with a
// podman store of its own (so cold and warm are per node), images built from busybox-static and
// pushed to a loopback docker-registry. A container task sees its fake GPUs, environment, mounts
// and limits; a 2-node gang gets the torchrun variables; the checkpoint signal and
// `hangar checkpoint-done` work from inside; cancel stops the container; `kill -9` of the agent
// and a restart leave no orphan and start nothing twice; a missing image and a registry that is
// down say so.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "agent/container/podman.h"
#include "common/subprocess.h"
#include "local_cluster.h"
#include "loopback_registry.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

class ContainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new std::string(fs::temp_directory_path() /
                               ("hangar-registry-" + std::to_string(getpid())));
    fs::create_directories(*scratch_);
    registry_ = new LoopbackRegistry(*scratch_);
    if (registry_->ok()) image_ = new std::string(registry_->Push("test/busybox", "1"));
  }
  static void TearDownTestSuite() {
    delete registry_;
    std::error_code ec;
    fs::remove_all(*scratch_, ec);
    delete scratch_;
    delete image_;
  }
  void SetUp() override {
    ASSERT_TRUE(registry_->ok())
        << "docker-registry did not start (scripts/install-deps.sh --test installs it)";
    ASSERT_FALSE(image_->empty()) << "the test image could not be built (podman, busybox-static)";
  }
  void StartCluster(int nodes) {
    std::string yaml =
        "node_defaults: {gpus: 4, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: "
        "64Gi}\n"
        "nodes: [";
    for (int i = 1; i <= nodes; ++i)
      yaml += std::string(i > 1 ? ", " : "") + "{name: node-" + std::to_string(i) + "}";
    cluster_ = std::make_unique<LocalCluster>(
        yaml + "]\ncontainers: {mounts_allowed: [/tmp]}\ndata: {file_roots: [/tmp]}\n",
        controller_args_);
    cluster_->StartController();
    for (int i = 1; i <= nodes; ++i) cluster_->StartAgent("node-" + std::to_string(i), agent_args_);
    ASSERT_TRUE(cluster_->WaitForAgents(nodes));
    for (int i = 1; i <= nodes; ++i) {
      const std::string n = "/v1/nodes/node-" + std::to_string(i);
      ASSERT_TRUE(LocalCluster::WaitFor(
          [&] { return cluster_->Get(n).value("state", "") == "ready"; }, 20 * kSecond));
    }
    out_ = cluster_->dir() + "/out";
    fs::create_directories(out_);
  }
  uint64_t Submit(const std::string& yaml) {
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.value("id", uint64_t{0});
  }
  // The containers podman knows in node's store.
  std::string PodmanPs(const std::string& node) {
    return NodePodman(node, {"ps", "-a", "--format", "{{.Names}}"});
  }
  // What `podman ARGS` prints against node's store.
  std::string NodePodman(const std::string& node, const std::vector<std::string>& args) {
    const std::string d = cluster_->dir() + "/agents/" + node + "/podman";
    CommandOptions o;
    o.env = {{"CONTAINERS_CONF", d + "/containers.conf"}};
    auto run = agent::ShortRunDir(d);  // where the agent keeps podman's runroot and tmpdir
    if (!run.ok()) return "podman failed: " + run.status().message();
    std::vector<std::string> argv = {"podman",      "--root",   d + "/storage", "--runroot",
                                     *run + "/run", "--tmpdir", *run + "/tmp"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunCommand(argv, o);
    return r.ok() ? r->out : "podman failed";
  }

  static std::string* scratch_;
  static LoopbackRegistry* registry_;
  static std::string* image_;
  std::unique_ptr<LocalCluster> cluster_;
  std::string out_;
  std::vector<std::string> agent_args_;  // for every agent StartCluster starts
  std::vector<std::string> controller_args_;
};

std::string* ContainerTest::scratch_ = nullptr;
LoopbackRegistry* ContainerTest::registry_ = nullptr;
std::string* ContainerTest::image_ = nullptr;

TEST_F(ContainerTest, ATaskSeesItsGpusEnvironmentMountsAndLimits) {
  StartCluster(1);
  const std::string data = cluster_->dir() + "/data";
  fs::create_directories(data);
  std::ofstream(data + "/input.txt") << "shard-0\n";
  const uint64_t id = Submit("name: boxed\nimage: " + *image_ +
                             "\ntasks:\n  - gpus: 2\n    memory: 96Mi\n    cpu: 500m\n    workdir: "
                             "/out\n    env: {LR: '0.1'}\n"
                             "    mounts: ['" +
                             data + ":/data', '" + out_ +
                             ":/out:rw']\n"
                             "    command: ['/bin/sh', '-c', 'ls /dev | grep nvidia > gpus; env > "
                             "env; cat /data/input.txt > data; "
                             "(touch /data/x 2>/dev/null && echo writable || echo read-only) > ro; "
                             "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat "
                             "/sys/fs/cgroup/memory.max; true' ]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond)) << cluster_->Job(id).dump();
  auto job = cluster_->Job(id);
  EXPECT_TRUE(Contains(job["spec"]["tasks"][0].value("image", ""), "@sha256:"))
      << "pinned at submission: " << job.dump();
  const auto gpus = Lines(ReadFile(out_ + "/gpus"));
  EXPECT_EQ(gpus.size(), 2u) << ReadFile(out_ + "/gpus");
  const std::string env = ReadFile(out_ + "/env");
  EXPECT_TRUE(Contains(env, "LR=0.1")) << env;
  EXPECT_TRUE(Contains(env, "CUDA_VISIBLE_DEVICES=GPU-")) << env;
  EXPECT_TRUE(Contains(env, "HANGAR_TASK_ID=" + std::to_string(id) + ".0.0")) << env;
  EXPECT_TRUE(Contains(env, "HANGAR_BIN=/.hangar/bin/hangar")) << env;
  EXPECT_EQ(ReadFile(out_ + "/data"), "shard-0\n");
  EXPECT_EQ(ReadFile(out_ + "/ro"), "read-only\n");
  EXPECT_FALSE(fs::exists(data + "/x"));
  // Its output is the task's log, through Hangar's log API.
  const std::string log = cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=0");
  EXPECT_TRUE(Contains(log, std::to_string(96 * 1024 * 1024))) << "the memory limit: " << log;
  EXPECT_EQ(PodmanPs("node-1"), "") << "the container is removed once it has ended";
}

// `hangar exec` into a running container task (docs/interactive.md): the program runs inside the
// task's container (its filesystem, its environment), through the agent's own podman store.
// podman runs as the agent (root on a node): a job's environment must not choose which podman
// runs, its configuration or what the loader preloads into it. Before, the job's PATH was the one
// the agent looked `podman` up in: a job could have root run a program of its own.
TEST_F(ContainerTest, AJobsEnvironmentDoesNotChooseWhatPodmanIs) {
  StartCluster(1);
  fs::create_directories(out_ + "/fakebin");
  std::ofstream(out_ + "/fakebin/podman") << "#!/bin/sh\ntouch " << out_ << "/hijacked\nexit 1\n";
  fs::permissions(out_ + "/fakebin/podman",
                  fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  const uint64_t id = Submit(
      "name: env-check\nimage: " + *image_ + "\ntasks:\n  - cpu: 100m\n    env: {PATH: '" + out_ +
      "/fakebin:/usr/local/bin:/usr/bin:/bin', LD_PRELOAD: /nonexistent/evil.so, TMPDIR: "
      "/nonexistent, CONTAINERS_CONF: /nonexistent/containers.conf}\n"
      "    mounts: ['" +
      out_ + ":/out:rw']\n    command: ['/bin/sh', '-c', 'env > /out/env']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond)) << cluster_->Job(id).dump();
  EXPECT_FALSE(fs::exists(out_ + "/hijacked")) << "the agent ran the job's own podman";
  const std::string env = ReadFile(out_ + "/env");
  // They reach the container, as the job asked.
  EXPECT_TRUE(Contains(env, "PATH=" + out_ + "/fakebin:")) << env;
  EXPECT_TRUE(Contains(env, "CONTAINERS_CONF=/nonexistent/containers.conf\n")) << env;
  EXPECT_TRUE(Contains(env, "TMPDIR=/nonexistent\n")) << env;
}

TEST_F(ContainerTest, ExecRunsAProgramInsideARunningTasksContainer) {
  StartCluster(1);
  const uint64_t id =
      Submit("name: boxed\nimage: " + *image_ +
             "\ntasks:\n  - gpus: 1\n    env: {LR: '0.1'}\n"
             "    command: ['/bin/sh', '-c', 'echo inside > /tmp/marker; sleep 300']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 60 * kSecond)) << cluster_->Job(id).dump();
  CommandResult last;
  const std::vector<std::string> exec = {HANGAR_BINARY,
                                         "exec",
                                         "--server",
                                         "http://127.0.0.1:" + std::to_string(cluster_->api_port()),
                                         std::to_string(id),
                                         "--",
                                         "/bin/sh",
                                         "-c",
                                         "cat /tmp/marker && echo LR=$LR; exit 4"};
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto r = RunCommand(exec);
        if (r.ok()) last = *r;
        return r.ok() && Contains(last.out, "inside");
      },
      30 * kSecond))
      << "the container's own /tmp: " << last.Describe() << " " << last.out << last.err;
  EXPECT_EQ(last.exit_code, 4) << last.out << last.err;
  EXPECT_TRUE(Contains(last.out, "LR=0.1")) << "the container's environment: " << last.out;
  EXPECT_FALSE(fs::exists("/tmp/marker") && ReadFile("/tmp/marker") == "inside\n")
      << "not the node's /tmp";
}

// pyxis's `srun --container-image`: from a task that runs on the host, a step's task runs in the
// image (its own mount namespace), as the task's user, with the task's GPUs by UUID, Slurm's
// variables, the mounts asked and the working folder asked; a mount from outside
// containers.mounts_allowed is refused before podman sees it; nothing of the step's is left once
// the job ends.
TEST_F(ContainerTest, ASrunStepWithContainerImageRunsInTheImage) {
  StartCluster(1);
  std::ofstream(out_ + "/step.sh")
      << "readlink /proc/self/ns/mnt > ns; env > env; ls /dev | grep nvidia > gpus; pwd > pwd; "
         "id -u > uid; grep NoNewPrivs /proc/self/status > nnp\n";
  std::ofstream(out_ + "/job.sh") << "\"$HANGAR_BIN\" slurm srun --container-image=" << *image_
                                  << " --container-mounts=" << out_
                                  << ":/out --container-workdir=/out /bin/sh /out/step.sh\n"
                                  << "echo \"rc=$?\" > " << out_ << "/rc\n"
                                  << "\"$HANGAR_BIN\" slurm srun --container-image=" << *image_
                                  << " --container-mounts=/etc:/host-etc cat /host-etc/hostname 2> "
                                  << out_ << "/refused.err\necho \"rc=$?\" > " << out_
                                  << "/refused.rc\n";
  const uint64_t id =
      Submit("name: pyxis\ntasks:\n  - gpus: 2\n    command: ['/bin/sh', '" + out_ + "/job.sh']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 90 * kSecond)) << cluster_->Job(id).dump();
  EXPECT_EQ(ReadFile(out_ + "/rc"), "rc=0\n") << ReadFile(out_ + "/refused.err");
  std::error_code ec;
  const std::string own_ns = fs::read_symlink("/proc/self/ns/mnt", ec).string();
  EXPECT_NE(ReadFile(out_ + "/ns"), own_ns + "\n") << "it ran in a container of its own";
  EXPECT_EQ(ReadFile(out_ + "/pwd"), "/out\n");
  EXPECT_EQ(ReadFile(out_ + "/uid"), std::to_string(geteuid()) + "\n") << "the task's user";
  EXPECT_EQ(ReadFile(out_ + "/nnp"), "NoNewPrivs:\t1\n") << "a setuid program gains nothing";
  EXPECT_EQ(Lines(ReadFile(out_ + "/gpus")).size(), 2u) << ReadFile(out_ + "/gpus");
  const std::string env = ReadFile(out_ + "/env");
  EXPECT_TRUE(Contains(env, "SLURM_PROCID=0\n")) << env;
  EXPECT_TRUE(Contains(env, "SLURM_STEP_ID=0\n")) << env;
  EXPECT_TRUE(Contains(env, "CUDA_VISIBLE_DEVICES=GPU-")) << env;
  EXPECT_TRUE(Contains(env, "HANGAR_JOB_ID=" + std::to_string(id) + "\n")) << env;
  EXPECT_FALSE(Contains(env, "PATH=" + std::string(std::getenv("PATH")) + "\n"))
      << "the image's PATH, not the host's: " << env;
  EXPECT_EQ(ReadFile(out_ + "/refused.rc"), "rc=1\n");
  const std::string refused = ReadFile(out_ + "/refused.err");
  EXPECT_TRUE(Contains(refused, "/etc")) << refused;
  EXPECT_TRUE(Contains(refused, "containers.mounts_allowed")) << refused;
  EXPECT_FALSE(Contains(PodmanPs("node-1"), "-step-")) << PodmanPs("node-1");
  // The step's pins went with the task (named <task>.step-<session>).
  for (const auto& e : fs::directory_iterator(cluster_->dir() + "/agents/node-1/mounts", ec))
    EXPECT_FALSE(Contains(e.path().filename().string(), ".step-")) << e.path();
}

TEST_F(ContainerTest, ATwoNodeGangInContainersGetsTheTorchrunVariables) {
  StartCluster(2);
  const uint64_t id =
      Submit("name: gang\nimage: " + *image_ +
             "\ntasks:\n  - replicas: 2\n    gpus: 4\n    mounts: ['" + out_ +
             ":/out:rw']\n    command: ['/bin/sh', '-c', 'echo $MASTER_ADDR:$MASTER_PORT "
             "$WORLD_SIZE $NODE_RANK $HANGAR_TASK_ID > /out/rank.$RANK']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond)) << cluster_->Job(id).dump();
  const std::string r0 = ReadFile(out_ + "/rank.0"), r1 = ReadFile(out_ + "/rank.1");
  ASSERT_FALSE(r0.empty());
  ASSERT_FALSE(r1.empty());
  EXPECT_EQ(r0.substr(0, r0.find(' ')), r1.substr(0, r1.find(' ')))
      << "one master for both: " << r0 << r1;
  EXPECT_TRUE(Contains(r0, " 2 ")) << r0;
  EXPECT_NE(r0, r1);
  auto job = cluster_->Job(id);
  std::set<std::string> nodes;
  for (const auto& t : job["task_list"]) nodes.insert(t.value("node", ""));
  EXPECT_EQ(nodes.size(), 2u) << job.dump();
  // Both nodes were cold: the gang waited for both pulls, and the wait is on record.
  EXPECT_GT(job.value("staging_ms", 0), 0) << job.dump();
  EXPECT_GT(job.value("staging_gpu_ms", 0), 0) << job.dump();
}

TEST_F(ContainerTest, CheckpointSignalAndCheckpointDoneWorkFromInside) {
  StartCluster(1);
  // Each start notes itself; on SIGUSR1 the task reports its checkpoint with the in-container
  // `hangar`, which ends the 60 s grace at once. The note is written before the report: the
  // SIGTERM the report brings may run its trap before any command after the report.
  const uint64_t id =
      Submit("name: ckpt\nimage: " + *image_ +
             "\ncheckpoint: {signal: SIGUSR1, grace: 60s}\ntasks:\n  - gpus: 1\n"
             "    mounts: ['" +
             out_ +
             ":/out:rw']\n"
             "    command: ['/bin/sh', '-c', '"
             "trap \"echo reporting >> /out/ckpt; hangar checkpoint-done --step 7\" USR1; "
             "trap \"echo term >> /out/ckpt; exit 143\" TERM; echo start >> /out/starts; while "
             "true; do sleep 0.1; done']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 60 * kSecond)) << cluster_->Job(id).dump();
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return ReadFile(out_ + "/starts") == "start\n"; }, 20 * kSecond));
  int status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/requeue", "", &status);
  ASSERT_EQ(status, 200);
  // Well before the grace: released by the report, stopped by SIGTERM, started again.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return ReadFile(out_ + "/starts") == "start\nstart\n"; },
                                    30 * kSecond))
      << "ckpt: " << ReadFile(out_ + "/ckpt") << "\n"
      << cluster_->Job(id).dump() << "\n"
      << ReadFile(cluster_->dir() + "/agent-node-1.log");
  EXPECT_EQ(ReadFile(out_ + "/ckpt"), "reporting\nterm\n");
  bool said = false;
  for (const auto& e :
       cluster_->Get("/v1/events?limit=200").value("events", nlohmann::json::array())) {
    said |= Contains(e.value("message", ""), "checkpoint") &&
            Contains(e.value("message", ""), "step 7");
  }
  EXPECT_TRUE(said) << cluster_->Get("/v1/events?limit=200").dump();
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
}

TEST_F(ContainerTest, AnArtifactIsMountedReadOnlyInTheContainer) {
  StartCluster(1);
  const std::string weights = cluster_->dir() + "/weights.bin";
  std::ofstream(weights) << "test";  // sha256 of "test"
  const uint64_t id = Submit(
      "name: weights\nimage: " + *image_ + "\ntasks:\n  - gpus: 1\n    mounts: ['" + out_ +
      ":/out:rw']\n"
      "    artifacts: [{source: \"file://" +
      weights +
      "\", sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, size: 4, "
      "path: /models/w.bin}]\n"
      "    command: ['/bin/sh', '-c', 'cat /models/w.bin > /out/read; "
      "(echo x > /models/w.bin 2>/dev/null && echo writable || echo read-only) > /out/ro']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond)) << cluster_->Job(id).dump();
  EXPECT_EQ(ReadFile(out_ + "/read"), "test");
  EXPECT_EQ(ReadFile(out_ + "/ro"), "read-only\n") << "even as root in the container";
}

// A link inside an allowed folder that leads out of it (to /etc) passes the controller's check of
// the path as written; the agent resolves it, as the task's user, and refuses to mount it.
TEST_F(ContainerTest, AMountSourceLinkedOutOfTheAllowedFoldersIsRefusedByTheAgent) {
  StartCluster(1);
  const std::string link = cluster_->dir() + "/etc-link";
  fs::create_directory_symlink("/etc", link);
  const uint64_t id =
      Submit("name: escape\nimage: " + *image_ + "\ntasks:\n  - gpus: 1\n    mounts: ['" + link +
             ":/host-etc:rw', '" + out_ +
             ":/out:rw']\n    command: ['/bin/sh', '-c', "
             "'ls /host-etc > /out/seen']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "failed", 60 * kSecond)) << cluster_->Job(id).dump();
  const std::string why = cluster_->Job(id).dump();
  EXPECT_TRUE(Contains(why,
                       "resolves to /etc, which is not under a folder this cluster allows "
                       "(containers.mounts_allowed: /tmp)"))
      << why;
  EXPECT_FALSE(fs::exists(out_ + "/seen"))
      << "the task never ran, so never saw the host's /etc: " << ReadFile(out_ + "/seen");
  EXPECT_EQ(PodmanPs("node-1"), "");
  EXPECT_FALSE(fs::exists(cluster_->dir() + "/agents/node-1/mounts/" + std::to_string(id) + ".0.0"))
      << "no pin is left behind";
}

TEST_F(ContainerTest, CancelStopsTheContainer) {
  StartCluster(1);
  const uint64_t id =
      Submit("name: long\nimage: " + *image_ + "\ntasks: [{gpus: 1, command: ['sleep', '600']}]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 60 * kSecond)) << cluster_->Job(id).dump();
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Contains(PodmanPs("node-1"), "hangar-node-1-"); },
                                    10 * kSecond));
  int status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  ASSERT_EQ(status, 200);
  ASSERT_TRUE(cluster_->WaitForJobState(id, "cancelled", 10 * kSecond));
  // sleep is no init: catatonit passes SIGTERM on, so it ends within the stop grace.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/nodes/node-1").value("gpus_free", 0.0) == 4.0; },
      20 * kSecond));
  EXPECT_EQ(PodmanPs("node-1"), "") << "no container is left once its GPUs are free";
}

TEST_F(ContainerTest, AnAgentKilledAndRestartedLeavesNoOrphanAndStartsNothingTwice) {
  StartCluster(1);
  const uint64_t id = Submit(
      "name: survivor\nimage: " + *image_ + "\ntasks:\n  - gpus: 1\n    mounts: ['" + out_ +
      ":/out:rw']\n    command: ['/bin/sh', '-c', 'echo start >> /out/starts; sleep 600']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 60 * kSecond)) << cluster_->Job(id).dump();
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return ReadFile(out_ + "/starts") == "start\n"; }, 20 * kSecond));
  cluster_->KillAgent("node-1", SIGKILL);
  cluster_->StartAgent("node-1");
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/nodes/node-1").value("connected", false); }, 20 * kSecond));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(cluster_->Job(id).value("state", ""), "running")
      << "adopted, not lost: " << cluster_->Job(id).dump();
  EXPECT_EQ(ReadFile(out_ + "/starts"), "start\n") << "started once";
  EXPECT_EQ(Lines(PodmanPs("node-1")).size(), 1u) << PodmanPs("node-1");
  int status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return PodmanPs("node-1").empty(); }, 20 * kSecond))
      << PodmanPs("node-1");
}

// SIGKILL to every conmon whose command line names `dir` (a cluster's own storage: container
// names repeat across the clusters of tests run side by side). Returns how many it killed.
int KillConmonsUnder(const std::string& dir) {
  int killed = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadFile(e.path().string() + "/cmdline");
    const std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
    if (fs::path(argv0).filename() != "conmon" || cmdline.find(dir) == std::string::npos) continue;
    killed += kill(std::stoi(pid), SIGKILL) == 0;
  }
  return killed;
}

// Killing the agent for good leaves the fence keeper to stop its container task once the node's
// lease runs out, and then to remove the container from the node's store: nothing else would when
// conmon, whose exit command removes a `--rm` container, has gone with the agent (here: killed
// with it; a node's OOM killer or a cgroup kill does the same).
TEST_F(ContainerTest, AKilledAgentsContainerIsStoppedAndRemovedByTheFence) {
  controller_args_ = {"--heartbeat-interval", "250ms", "--heartbeat-timeout", "1s",
                      "--node-lease",         "3s"};
  StartCluster(1);
  const uint64_t id = Submit(
      "name: fenced\nimage: " + *image_ + "\ntasks:\n  - gpus: 1\n    mounts: ['" + out_ +
      ":/out:rw']\n    command: ['/bin/sh', '-c', 'echo start >> /out/starts; sleep 600']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 60 * kSecond)) << cluster_->Job(id).dump();
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return ReadFile(out_ + "/starts") == "start\n"; }, 20 * kSecond));
  ASSERT_EQ(Lines(PodmanPs("node-1")).size(), 1u) << PodmanPs("node-1");
  cluster_->KillAgent("node-1", SIGKILL);  // and it never comes back
  EXPECT_GE(KillConmonsUnder(cluster_->dir() + "/agents/node-1/"), 1);
  const std::string keeper_log = cluster_->dir() + "/agents/node-1/fence/keeper.log";
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return PodmanPs("node-1").empty(); }, 30 * kSecond))
      << PodmanPs("node-1") << "\n"
      << ReadFile(keeper_log);
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return Contains(ReadFile(keeper_log), "is done"); },
                                    10 * kSecond))
      << ReadFile(keeper_log);
}

TEST_F(ContainerTest, AMissingImageIsRefusedNamingTheImageAndTheRegistry) {
  StartCluster(1);
  int status = 0;
  const std::string missing = registry_->host() + "/test/nope:9";
  auto r = cluster_->Post(
      "/v1/jobs", "name: typo\nimage: " + missing + "\ntasks: [{gpus: 1, command: [true]}]\n",
      &status);
  EXPECT_EQ(status, 404) << r.dump();
  const std::string said = r.dump();
  EXPECT_TRUE(
      Contains(said, "image " + missing + " does not exist in registry " + registry_->host()))
      << said;
  auto bad_mount =
      cluster_->Post("/v1/jobs",
                     "name: m\nimage: " + *image_ +
                         "\ntasks: [{gpus: 1, mounts: ['/etc:/host-etc'], command: [true]}]\n",
                     &status);
  EXPECT_EQ(status, 403) << bad_mount.dump();
  EXPECT_TRUE(Contains(bad_mount.dump(), "not under a path this cluster allows (/tmp)"))
      << bad_mount.dump();
}

TEST_F(ContainerTest, ARegistryThatIsDownLeavesTheJobStagingAndRetrying) {
  StartCluster(1);
  const std::string ref = registry_->Push("test/later", "1");
  ASSERT_FALSE(ref.empty());
  const std::string job = "name: later\nimage: " + ref + "\ntasks: [{gpus: 1, command: [true]}]\n";
  // Pinned while the registry is up, held, then released once it is down.
  int status = 0;
  auto r = cluster_->Post("/v1/jobs", job, &status);
  ASSERT_EQ(status, 201) << r.dump();
  const uint64_t id = r["id"];
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/hold", "", &status);
  registry_->Stop();
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/release", "", &status);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(cluster_->Job(id).value("reason", ""), "staging: registry unreachable");
      },
      30 * kSecond))
      << cluster_->Job(id).dump();
  EXPECT_EQ(cluster_->Job(id).value("state", ""), "starting");
  registry_->Start();
  ASSERT_TRUE(registry_->ok());
  EXPECT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond)) << cluster_->Job(id).dump();
}

// A registry that is down at submission loses nothing: the job is accepted with its tag, waits
// unplaced with the reason, and runs the pinned digest once the registry answers; a tag that turns
// out not to exist then fails its job with the sentence that names it.
TEST_F(ContainerTest, ASubmissionWhileTheRegistryIsDownIsQueuedAndPinnedOnceItIsUp) {
  StartCluster(1);
  const std::string ref = registry_->Push("test/unpinned", "1");
  ASSERT_FALSE(ref.empty());
  registry_->Stop();
  int status = 0;
  auto r = cluster_->Post(
      "/v1/jobs", "name: unpinned\nimage: " + ref + "\ntasks: [{gpus: 1, command: [true]}]\n",
      &status);
  ASSERT_EQ(status, 201) << r.dump();
  EXPECT_TRUE(Contains(r.value("warning", ""), "did not answer")) << r.dump();
  const uint64_t id = r["id"];
  auto missing = cluster_->Post("/v1/jobs",
                                "name: missing\nimage: " + registry_->host() +
                                    "/test/unpinned:nope\ntasks: [{gpus: 1, command: [true]}]\n",
                                &status);
  ASSERT_EQ(status, 201) << missing.dump();
  const uint64_t gone = missing["id"];
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(cluster_->Job(id).value("reason", ""), "staging: registry unreachable");
      },
      20 * kSecond))
      << cluster_->Job(id).dump();
  EXPECT_EQ(cluster_->Job(id).value("state", ""), "pending")
      << "not placed while its image is a tag";
  registry_->Start();
  ASSERT_TRUE(registry_->ok());
  EXPECT_TRUE(cluster_->WaitForJobState(id, "succeeded", 90 * kSecond)) << cluster_->Job(id).dump();
  EXPECT_TRUE(Contains(cluster_->Job(id)["spec"]["tasks"][0].value("image", ""), "@sha256:"))
      << cluster_->Job(id).dump();
  EXPECT_TRUE(cluster_->WaitForJobState(gone, "failed", 60 * kSecond))
      << cluster_->Job(gone).dump();
  EXPECT_TRUE(Contains(cluster_->Job(gone).value("message", ""), "does not exist in registry"))
      << cluster_->Job(gone).dump();
}

// What README and docs say to do, as they say it: push-busybox.sh builds and pushes the example
// image; examples/containers/*.yaml and docs/job-format.md's example run (with the test
// registry's port in place of hangar dev's 8082).
TEST_F(ContainerTest, TheShippedContainerExamplesRunAsTheDocsSay) {
  StartCluster(2);
  auto pushed = RunCommand(
      {std::string(HANGAR_SOURCE_DIR) + "/examples/containers/push-busybox.sh", registry_->host()});
  ASSERT_TRUE(pushed.ok() && pushed->ok())
      << (pushed.ok() ? pushed->Describe() : pushed.status().message());
  EXPECT_TRUE(Contains(pushed->out, "pushed " + registry_->host() + "/examples/busybox:1"))
      << pushed->out;
  auto local = [&](std::string text) {
    for (size_t at; (at = text.find("127.0.0.1:8082")) != std::string::npos;)
      text.replace(at, 14, registry_->host());
    return text;
  };
  const std::string doc = ReadFile(std::string(HANGAR_SOURCE_DIR) + "/docs/job-format.md");
  const size_t section = doc.find("## Containers");
  ASSERT_NE(section, std::string::npos);
  const size_t from = doc.find("```yaml\n", section) + 8, to = doc.find("```", from);
  const std::string from_doc = doc.substr(from, to - from);
  const std::string hello =
      ReadFile(std::string(HANGAR_SOURCE_DIR) + "/examples/containers/hello.yaml");
  for (const std::string& spec : {hello, from_doc}) {
    const uint64_t id = Submit(local(spec));
    ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond))
        << cluster_->Job(id).dump();
    const std::string log = cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=0");
    EXPECT_TRUE(Contains(log, "rank 0 of 2 on node-")) << log;
    EXPECT_TRUE(Contains(log, "nvidia0")) << log;
  }
  const uint64_t ck = Submit(
      local(ReadFile(std::string(HANGAR_SOURCE_DIR) + "/examples/containers/checkpoint.yaml")));
  ASSERT_TRUE(cluster_->WaitForJobState(ck, "running", 60 * kSecond)) << cluster_->Job(ck).dump();
  // Its traps are set once it says it started (a signal before them would be ignored by the
  // container's PID 1, and the requeue would wait out the 5 min grace).
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(cluster_->GetText("/v1/jobs/" + std::to_string(ck) + "/logs?task=0"),
                        "attempt 0 started");
      },
      30 * kSecond))
      << cluster_->Job(ck).dump();
  int status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(ck) + "/requeue", "", &status);
  ASSERT_EQ(status, 200);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(cluster_->GetText("/v1/jobs/" + std::to_string(ck) + "/logs?task=0"),
                        "attempt 1 started");
      },
      30 * kSecond))
      << "requeued well within its 5 min grace: " << cluster_->Job(ck).dump();
  cluster_->Post("/v1/jobs/" + std::to_string(ck) + "/cancel", "", &status);
}

}  // namespace
// A disk that fills up evicts as a budget does: with a free-space floor this disk can never meet,
// the image a finished job used goes before the next pull, the one a job needs stays, and the
// node says its cache is full.
TEST_F(ContainerTest, ADiskBelowItsFreeSpaceFloorEvictsWhatNoJobNeedsAndShowsTheCacheFull) {
  const std::string a = registry_->Push("test/floor", "a", {{"/which", "a"}});
  const std::string b = registry_->Push("test/floor", "b", {{"/which", "b"}});
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  agent_args_ = {"--image-cache-min-free", "1000000Ti"};
  StartCluster(1);
  // Runs a job of `image`; the digest it was pinned to.
  auto run = [&](const std::string& image) -> std::string {
    const uint64_t id = Submit("name: floor\nimage: " + image +
                               "\ntasks:\n  - gpus: 1\n    command: ['/bin/true']\n");
    EXPECT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond))
        << cluster_->Job(id).dump();
    const std::string pinned = cluster_->Job(id)["spec"]["tasks"][0].value("image", "");
    return pinned.substr(pinned.find('@') + 1);
  };
  auto images = [&] {
    return NodePodman("node-1", {"images", "--digests", "--format", "{{.Digest}}"});
  };
  const std::string da = run(a);
  ASSERT_TRUE(Contains(da, "sha256:")) << da;
  EXPECT_TRUE(Contains(images(), da)) << images();
  const std::string db = run(b);
  ASSERT_NE(da, db);
  const std::string after = images();
  EXPECT_TRUE(Contains(after, db)) << after;
  EXPECT_FALSE(Contains(after, da)) << "evicted for the disk: " << after;
  std::string conditions;
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        conditions =
            cluster_->Get("/v1/nodes/node-1").value("conditions", nlohmann::json::array()).dump();
        return Contains(conditions, "ImageCacheFull") && Contains(conditions, "free space");
      },
      20 * kSecond))
      << conditions;
  EXPECT_TRUE(Contains(ReadFile(cluster_->dir() + "/agent-node-1.log"), "under its floor"));
}

}  // namespace hangar::testing
