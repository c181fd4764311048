#include "job/job_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

#include "common/yaml_util.h"

namespace hangar::job {
namespace {

TEST(JobSpecTest, ParsesAFullSpec) {
  auto spec = ParseJobSpec(R"(
name: pretrain
queue: research
priority: 20
tier: guaranteed
time_limit: 72h
min_run_time: 30m
checkpoint: {signal: SIGUSR2, grace: 5m}
topology: {same: leaf, mode: required}
tasks:
  - name: worker
    replicas: 4
    gpus: 8
    gpu_models: [H100-SXM-80GB, H200]
    min_gpu_memory: 80Gi
    cpu_per_gpu: 7
    memory_per_gpu: 60Gi
    cpu: 2
    memory: 8Gi
    node_selector: {pool: training}
    env: {NCCL_DEBUG: WARN}
    command: [python3, train.py]
)",
                           "pretrain.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "pretrain");
  EXPECT_EQ(spec->queue, "research");
  EXPECT_EQ(spec->time_limit, 72 * kHour);
  EXPECT_EQ(spec->checkpoint.signal, SIGUSR2);
  EXPECT_EQ(spec->topology.same, cluster::Level::kLeaf);
  EXPECT_TRUE(spec->topology.required);
  const auto& t = spec->tasks[0];
  EXPECT_EQ(t.gpu.kind, GpuKind::kWhole);
  EXPECT_EQ(t.GpusPerReplica(), 8);
  EXPECT_EQ(t.ReplicaMilliCpu(), 58000);
  EXPECT_EQ(t.ReplicaMemoryMiB(), 488 * 1024);
  EXPECT_EQ(spec->TotalMilliGpu(), 32000);
  EXPECT_EQ(t.gpu_models.size(), 2u);
  EXPECT_EQ(t.command[1], "train.py");
}

TEST(JobSpecTest, FractionalAndMig) {
  auto frac = ParseJobSpec("name: f\ntasks:\n  - gpu_fraction: 0.25\n    gpu_memory: 20Gi\n", "f");
  ASSERT_TRUE(frac.ok()) << frac.status().ToString();
  EXPECT_EQ(frac->tasks[0].gpu.kind, GpuKind::kShared);
  EXPECT_EQ(frac->tasks[0].gpu.milli, 250);
  EXPECT_EQ(frac->tasks[0].ReplicaMilliGpu(), 250);
  auto mig = ParseJobSpec("name: m\ntasks:\n  - mig: 3g.40gb\n", "m");
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_EQ(mig->tasks[0].gpu.kind, GpuKind::kMig);
  EXPECT_EQ(mig->tasks[0].gpu.mig_slices, 3);
  EXPECT_EQ(mig->tasks[0].gpu.memory_mib, 40 * 1024);
  auto string_cmd = ParseJobSpec("name: s\ntasks:\n  - cpu: 1\n    command: echo hi\n", "s");
  ASSERT_TRUE(string_cmd.ok());
  EXPECT_EQ(string_cmd->tasks[0].command, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
}

TEST(JobSpecTest, ErrorsSayWhereAndWhatToWrite) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"tasks:\n  - gpus: 1\n", "job.yaml:1: 'name' is required"},
      {"name: x\ntasks:\n  - gpus: 1\n    gpu_fraction: 0.5\n", "in one form only"},
      {"name: x\ntasks:\n  - gpu_fraction: 0.5\n", "needs gpu_memory too"},
      {"name: x\ntasks:\n  - gpus: -1\n", "job.yaml:3: 'gpus' must be between 0 and 64"},
      {"name: x\ntasks:\n  - gpus: 1\n    cpu_per_gpus: 4\n",
       "job.yaml:4: unknown field 'cpu_per_gpus'"},
      {"name: x\ntier: gold\ntasks:\n  - gpus: 1\n",
       "job.yaml:2: tier must be guaranteed or opportunistic"},
      {"name: x\ntopology: {same: rack}\ntasks:\n  - gpus: 1\n",
       "topology.same must be nvlink_domain"},
      {"name: x\ntime_limit: soon\ntasks:\n  - gpus: 1\n", "job.yaml:2: time_limit:"},
      {"name: x\ncheckpoint: {signal: SIGKILL}\ntasks:\n  - gpus: 1\n", "cannot be SIGKILL"},
      {"name: x\non_node_failure: {wait_for_node: 2d}\ntasks:\n  - gpus: 1\n",
       "job.yaml:2: on_node_failure.wait_for_node must be from 0 (release the healthy nodes and "
       "requeue at once) to 24h"},
      {"name: x\non_node_failure: {wait: 5m}\ntasks:\n  - gpus: 1\n", "wait_for_node"},
      {"name: x\non_node_failure: 5m\ntasks:\n  - gpus: 1\n",
       "on_node_failure must be a map, such as {wait_for_node: 10m}"},
      {"name: x\ntasks:\n  - mig: 5g.50gb\n", "no 5-slice profile"},
      {"name: x\ntasks:\n  - mig: 3g.50gb\n",
       "job.yaml:3: '3g.50gb' is not a MIG profile of any GPU Hangar knows; use one of A100-40GB: "
       "1g.5gb"},
      {"name: x\ntasks: []\n", "'tasks' must be a non-empty list"},
      {"name: bad name!\ntasks:\n  - gpus: 1\n", "name 'bad name!' must be"},
      {"name: x\ntasks:\n  - {name: a, gpus: 1}\n  - {name: a, gpus: 1}\n",
       "two task groups are named 'a'"},
      {"name: x\ntasks:\n  - replicas: 2\n", "asks for no GPU and no CPU"},
      {"name: x\ntasks:\n  - gpus: 1\n    memory: 3 apples\n", "memory:"},
      {"name: [x\n", "job.yaml:2:1: not valid YAML"},
      {"- a\n- b\n", "a job file is a map"},
  };
  for (const auto& c : cases) {
    auto r = ParseJobSpec(c.text, "job.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << "got: " << r.status().message() << "\nwant: " << c.expect;
  }
}

// on_node_failure.wait_for_node: how long a gang holds its healthy nodes for a replacement; kept
// through the store's JSON round trip; absent by default (release and requeue).
TEST(JobSpecTest, NodeFailurePolicyRoundTrips) {
  auto s = ParseJobSpec(
      "name: x\non_node_failure: {wait_for_node: 10m}\ntasks:\n  - {replicas: 2, gpus: 1}\n",
      "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->on_node_failure.wait_for_node, 10 * kMinute);
  auto back = JobSpecFromJson(JobSpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->on_node_failure.wait_for_node, 10 * kMinute);
  auto plain = ParseJobSpec("name: x\ntasks:\n  - gpus: 1\n", "job.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->on_node_failure.wait_for_node, 0);
  EXPECT_FALSE(JobSpecToJson(*plain).contains("on_node_failure"));
}

TEST(JobSpecTest, EveryUnknownKeyInOneErrorWithTheClosestKnownOne) {
  auto r = ParseJobSpec(
      "name: x\n"
      "prority: 3\n"
      "checkpoint: {signl: SIGUSR1}\n"
      "tasks:\n"
      "  - gpus: 1\n"
      "    cpu_per_gpus: 4\n"
      "    colour: red\n"
      "  - gpus: 1\n"
      "    comand: [sleep, '1']\n",
      "job.yaml");
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  // One line per unknown key, in file order, each with where it is and the nearest known key.
  EXPECT_EQ(m.rfind("job.yaml:2: unknown field 'prority' in the job (did you mean 'priority'?); "
                    "the fields are: name,",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("\njob.yaml:3: unknown field 'signl' in checkpoint (did you mean 'signal'?); "
                   "the fields are: signal, grace"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("\njob.yaml:6: unknown field 'cpu_per_gpus' in a task group (did you mean "
                   "'cpu_per_gpu'?)"),
            std::string::npos)
      << m;
  // Nothing close: no guess, just the fields.
  EXPECT_NE(m.find("\njob.yaml:7: unknown field 'colour' in a task group; the fields are:"),
            std::string::npos)
      << m;
  EXPECT_NE(
      m.find("\njob.yaml:9: unknown field 'comand' in a task group (did you mean 'command'?)"),
      std::string::npos)
      << m;
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 4) << m;
}

TEST(JobSpecTest, ClosestKeyIsATypoOrNothing) {
  const std::string_view keys[] = {"gpus", "cpu", "memory", "gpu_memory"};
  EXPECT_EQ(ClosestKey("gpu", keys), "gpus");
  EXPECT_EQ(ClosestKey("memroy", keys), "memory");
  EXPECT_EQ(ClosestKey("gpu_memry", keys), "gpu_memory");
  EXPECT_EQ(ClosestKey("replicas", keys), "");
  EXPECT_EQ(ClosestKey("x", keys), "");
}

TEST(JobSpecTest, JsonRoundTrip) {
  auto spec = ParseJobSpec(R"(
name: rt
priority: -3
tier: opportunistic
time_limit: 90m
topology: {same: node, mode: preferred}
tasks:
  - name: a
    replicas: 2
    gpu_fraction: 0.5
    gpu_memory: 10Gi
    cpu: 1.5
    env: {A: "1"}
    command: [x, y]
  - name: b
    mig: 1g.10gb
)",
                           "rt.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto back = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobSpecToJson(*back), JobSpecToJson(*spec));
  EXPECT_EQ(back->time_limit, 90 * kMinute);
  EXPECT_FALSE(back->topology.required);
  EXPECT_EQ(back->tasks[0].cpu, 1500);
  EXPECT_EQ(back->tasks[1].gpu.mig_profile, "1g.10gb");
}

TEST(JobSpecTest, ShippedExamplesParse) {
  for (const char* name :
       {"notebook.yaml", "finetune-8gpu.yaml", "pretrain-4x8.yaml", "inference-fractional.yaml"}) {
    auto r = LoadJobFile(std::string(HANGAR_SOURCE_DIR) + "/examples/jobs/" + name);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
  }
  for (const char* name : {"inference-1g.yaml", "train-3g.yaml", "eval-7g.yaml"}) {
    auto r = LoadJobFile(std::string(HANGAR_SOURCE_DIR) + "/examples/mig/" + name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(r->tasks[0].gpu.kind, GpuKind::kMig) << name;
  }
}

TEST(SignalTest, Names) {
  EXPECT_EQ(*ParseSignal("SIGUSR1"), SIGUSR1);
  EXPECT_EQ(*ParseSignal("TERM"), SIGTERM);
  EXPECT_EQ(*ParseSignal("12"), 12);
  EXPECT_FALSE(ParseSignal("SIGNOPE").has_value());
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
}

}  // namespace
}  // namespace hangar::job

namespace hangar::job {
namespace {

// Issue 15, item 5: a job names where its command runs, so `python3 train.py` finds train.py.
TEST(JobSpecWorkdirTest, JobAndGroupWorkdirsAndTheirResolution) {
  auto spec = ParseJobSpec(
      "name: w\nworkdir: proj\ntasks:\n  - {name: a, gpus: 1, command: [python3, train.py]}\n"
      "  - {name: b, gpus: 1, workdir: /data/eval, command: [x]}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->tasks[0].workdir, "proj") << "the job's default";
  EXPECT_EQ(spec->tasks[1].workdir, "/data/eval");
  EXPECT_EQ(RequireAbsoluteWorkdirs(*spec).message(),
            "task group 'a': workdir 'proj' must be an absolute path on the nodes (`hangar submit` "
            "makes a relative "
            "one absolute against the job file's folder)");
  ResolveWorkdirs(&*spec, "/home/alice/jobs");
  EXPECT_EQ(spec->tasks[0].workdir, "/home/alice/jobs/proj");
  EXPECT_EQ(spec->tasks[1].workdir, "/data/eval");
  EXPECT_TRUE(RequireAbsoluteWorkdirs(*spec).ok());
  // Through the stored JSON and back.
  auto back = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->tasks[0].workdir, "/home/alice/jobs/proj");
  auto dot = ParseJobSpec("name: w\nworkdir: .\ntasks: [{gpus: 1, command: [x]}]\n", "job.yaml");
  ResolveWorkdirs(&*dot, "/home/alice/jobs");
  EXPECT_EQ(dot->tasks[0].workdir, "/home/alice/jobs");
  // `hangar submit job.yaml`: the job file's folder is the current one (this aborted the CLI).
  auto here = ParseJobSpec("name: w\nworkdir: .\ntasks: [{gpus: 1, command: [x]}]\n", "job.yaml");
  ResolveWorkdirs(&*here, "");
  EXPECT_EQ(here->tasks[0].workdir, std::filesystem::current_path().string());
}

// Issue 16: who a job's tasks run as, set by the controller from the token, kept with the job.
TEST(JobSpecRunAsTest, AccountsAndNumbersAndTheirStoredForm) {
  auto numbers =
      RunAs::FromJson(nlohmann::json::parse(R"({"uid": 61001, "groups": [61010, 61011]})"));
  ASSERT_TRUE(numbers.ok()) << numbers.status().ToString();
  EXPECT_EQ(numbers->gid, 61001u) << "the gid defaults to the uid";
  EXPECT_EQ(numbers->Describe(), "uid 61001 gid 61001 groups 61010,61011");
  EXPECT_FALSE(numbers->IsRoot());
  auto named = RunAs::FromJson(nlohmann::json::parse(R"({"account": "alice"})"));
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->Describe(), "account alice");
  EXPECT_TRUE(RunAs::FromJson(nlohmann::json::parse(R"({"account": "root"})"))->IsRoot());
  EXPECT_TRUE(RunAs::FromJson(nlohmann::json::parse(R"({"uid": 0, "gid": 100})"))->IsRoot());
  EXPECT_TRUE(RunAs().empty());
  EXPECT_EQ(RunAs().ToJson().dump(), "{}");
  struct Bad {
    const char* json;
    const char* says;
  } bad[] = {
      {R"({"account": "alice", "uid": 5})", "either an account"},
      {R"({"gid": 5})", "gid goes with a uid"},
      {R"({"account": "a", "groups": [1]})", "groups go with a uid"},
      {R"({"uid": -1})", "uid must be a number from 0 to 4294967294"},
      {R"({"uid": 4294967295})", "uid must be a number from 0 to 4294967294"},
      {R"({"uid": 1, "groups": ["x"]})", "groups must be numbers"},
      {R"({"user": "alice"})", "run_as has no field 'user'"},
  };
  for (const auto& b : bad) {
    auto r = RunAs::FromJson(nlohmann::json::parse(b.json));
    ASSERT_FALSE(r.ok()) << b.json;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(RunAs::CheckAccountName("svc-train.01").ok());
  EXPECT_FALSE(RunAs::CheckAccountName("-rf").ok());
  EXPECT_FALSE(RunAs::CheckAccountName("alice@corp").ok());

  // Kept with the job: through the stored JSON (a job spec) and back.
  auto spec = ParseJobSpec("name: r\ntasks: [{gpus: 1, command: [x]}]\n", "job.yaml");
  ASSERT_TRUE(spec.ok());
  spec->run_as = *numbers;
  const nlohmann::json stored = JobSpecToJson(*spec);
  EXPECT_EQ(stored["run_as"].dump(), R"({"gid":61001,"groups":[61010,61011],"uid":61001})");
  auto back = JobSpecFromJson(stored);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->run_as.Describe(), "uid 61001 gid 61001 groups 61010,61011");
  // A name the token API would refuse (it came from a token's user) still round-trips.
  spec->run_as = RunAs{"alice@corp", std::nullopt, 0, {}};
  auto odd = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  EXPECT_EQ(odd->run_as.account, "alice@corp");
  auto wrong = ParseJobSpec(
      "name: r\nrun_as: {uid: 1, account: x}\ntasks: [{gpus: 1, command: [x]}]\n", "job.yaml");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("job.yaml:2: give either an account"), std::string::npos)
      << wrong.status().message();
}

}  // namespace
}  // namespace hangar::job
