#include "job/gpu_proportions.h"

#include <gtest/gtest.h>

namespace hangar::job {
namespace {

// Two models: H100 nodes (192 cores, 2 TiB, 8 GPUs: 24 cores and 256 GiB per GPU) with every
// limit written, A100 nodes (64 cores and 512 GiB for 4 GPUs) with the defaults derived
// (16 cores and 128 GiB per GPU) and a CPU maximum; L4 nodes are not listed.
constexpr const char* kCluster = R"(
nodes:
  - {name: "h-[0-1]", gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 192, memory: 2Ti}
  - {name: "a-[0-1]", gpus: 4, gpu_model: A100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
  - {name: "l-0", gpus: 2, gpu_model: L4, gpu_memory: 24Gi, cpu: 96, memory: 256Gi}
gpu_models:
  H100: {default_cpu_per_gpu: 20, max_cpu_per_gpu: 24, default_memory_per_gpu: 200Gi, max_memory_per_gpu: 256Gi}
  A100: {max_cpu_per_gpu: 16}
)";

class GpuProportionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(kCluster, "cluster.yaml");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    file_ = std::move(*f);
  }
  StatusOr<JobSpec> Apply(const std::string& group) {
    auto spec =
        ParseJobSpec("name: j\ntasks:\n  - " + group + "\n    command: [true]\n", "job.yaml");
    if (!spec.ok()) return spec.status();
    HANGAR_RETURN_IF_ERROR(ApplyGpuModelLimits(file_.gpu_models, *file_.topology, &*spec));
    return spec;
  }
  cluster::ClusterFile file_;
};

TEST_F(GpuProportionsTest, DerivedDefaultsAreTheSmallestNodeShare) {
  ASSERT_EQ(file_.gpu_models.size(), 2u);
  const cluster::GpuModelLimits& a100 = file_.gpu_models[1];
  EXPECT_EQ(a100.model, "A100");
  EXPECT_EQ(a100.default_milli_cpu_per_gpu, 16000);
  EXPECT_EQ(a100.default_memory_mib_per_gpu, 128 * 1024);
  EXPECT_TRUE(a100.cpu_derived);
  EXPECT_TRUE(a100.memory_derived);
  EXPECT_FALSE(file_.gpu_models[0].cpu_derived);
}

TEST_F(GpuProportionsTest, JobThatAsksNothingGetsTheModelDefault) {
  auto s = Apply("gpus: 2\n    gpu_models: [H100]");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->tasks[0].cpu_per_gpu, 20000);
  EXPECT_EQ(s->tasks[0].memory_per_gpu, 200 * 1024);
  EXPECT_EQ(s->tasks[0].ReplicaMilliCpu(), 40000);
  // What it gets is in the spec the job view shows.
  EXPECT_EQ(JobSpecToJson(*s)["tasks"][0]["cpu_per_gpu"], "20000m");
}

TEST_F(GpuProportionsTest, CpuAndMemoryDefaultsApplyOnTheirOwn) {
  auto s = Apply("gpus: 1\n    gpu_models: [H100]\n    cpu_per_gpu: 4");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->tasks[0].cpu_per_gpu, 4000);  // as asked
  EXPECT_EQ(s->tasks[0].memory_per_gpu, 200 * 1024);
}

TEST_F(GpuProportionsTest, AShareGetsItsFractionOfTheDefault) {
  auto s = Apply("gpu_fraction: 0.25\n    gpu_memory: 10Gi\n    gpu_models: [H100]");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->tasks[0].cpu_per_gpu, 0);
  EXPECT_EQ(s->tasks[0].cpu, 5000);
  EXPECT_EQ(s->tasks[0].memory, 50 * 1024);
}

TEST_F(GpuProportionsTest, AboveTheMaximumIsRefusedWithWhatToDo) {
  auto s = Apply("gpus: 2\n    gpu_models: [H100]\n    cpu_per_gpu: 30");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  const std::string m = s.status().message();
  EXPECT_NE(m.find("asks for 30 cores of CPU per GPU"), std::string::npos) << m;
  EXPECT_NE(m.find("H100"), std::string::npos) << m;
  EXPECT_NE(m.find("at most 24 cores"), std::string::npos) << m;
  EXPECT_NE(m.find("or use more GPUs"), std::string::npos) << m;
  // cpu on top of cpu_per_gpu counts per GPU too: (8 + 2 x 20) / 2 = 24 is allowed, 26 is not.
  EXPECT_TRUE(Apply("gpus: 2\n    gpu_models: [H100]\n    cpu_per_gpu: 20\n    cpu: 8").ok());
  EXPECT_FALSE(Apply("gpus: 2\n    gpu_models: [H100]\n    cpu_per_gpu: 20\n    cpu: 12").ok());
  auto mem = Apply("gpus: 1\n    gpu_models: [H100]\n    memory_per_gpu: 300Gi");
  ASSERT_FALSE(mem.ok());
  EXPECT_NE(mem.status().message().find("300Gi of memory per GPU"), std::string::npos)
      << mem.status().message();
}

TEST_F(GpuProportionsTest, SeveralModelsTakeTheSmallestDefaultAndEveryMaximum) {
  // Any model: H100 (default 20) and A100 (16); L4 has no limits.
  auto s = Apply("gpus: 1");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->tasks[0].cpu_per_gpu, 16000);
  EXPECT_EQ(s->tasks[0].memory_per_gpu, 128 * 1024);
  // 20 cores per GPU is within H100's maximum but above A100's: refused, naming A100 and the
  // models that would take it.
  auto over = Apply("gpus: 1\n    cpu_per_gpu: 20");
  ASSERT_FALSE(over.ok());
  const std::string m = over.status().message();
  EXPECT_NE(m.find("A100 GPU"), std::string::npos) << m;
  EXPECT_NE(m.find("at most 16 cores"), std::string::npos) << m;
  EXPECT_NE(m.find("limit gpu_models to models that allow it (H100)"), std::string::npos) << m;
  EXPECT_TRUE(Apply("gpus: 1\n    gpu_models: [H100, L4]\n    cpu_per_gpu: 20").ok());
}

TEST_F(GpuProportionsTest, UnlistedModelsAndCpuOnlyTasksAreLeftAlone) {
  auto l4 = Apply("gpus: 1\n    gpu_models: [L4]");
  ASSERT_TRUE(l4.ok());
  EXPECT_EQ(l4->tasks[0].cpu_per_gpu, 0);
  EXPECT_EQ(l4->tasks[0].cpu, 0);
  auto cpu_only = Apply("cpu: 2");
  ASSERT_TRUE(cpu_only.ok());
  EXPECT_EQ(cpu_only->tasks[0].cpu, 2000);
  EXPECT_EQ(cpu_only->tasks[0].cpu_per_gpu, 0);
}

}  // namespace
}  // namespace hangar::job
