// The directives real batch scripts carry, honoured as far as a job file can say them: whole nodes,
// GPUs for the whole job, tasks that make the node count, GPU type names and constraints through
// the site's mapping, memory per CPU; and every problem of a script reported at once.
#include "cli/sbatch_shape.h"

#include <gtest/gtest.h>

#include "cli/sbatch.h"
#include "job/job_spec.h"

namespace hangar::cli::sbatch {
namespace {

using nlohmann::ordered_json;

SiteFacts Site() {
  auto site =
      ParseSiteFacts("a100=A100-SXM-80GB|A100-PCIE-40GB,v100=V100-SXM2-32GB,l40s=L40S-48GB", "8");
  EXPECT_TRUE(site.ok()) << site.status().message();
  return site.ok() ? *site : SiteFacts{};
}

StatusOr<BatchJob> Try(const std::string& directives, const SiteFacts& site = {},
                       std::map<std::string, std::string> env = {}) {
  return ConvertBatchScript({"#!/bin/bash\n" + directives + "srun python train.py\n",
                             "job.sbatch",
                             {},
                             "/home/ada",
                             site,
                             std::move(env)});
}

BatchJob Convert(const std::string& directives, const SiteFacts& site = {},
                 std::map<std::string, std::string> env = {}) {
  auto b = Try(directives, site, std::move(env));
  EXPECT_TRUE(b.ok()) << b.status().message();
  if (!b.ok()) return BatchJob{};
  // What comes out is a job file the controller's parser takes.
  auto parsed = job::ParseJobSpec(b->yaml, "converted");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << b->yaml;
  return *b;
}

const ordered_json& Group(const BatchJob& b) { return b.spec["tasks"][0]; }

TEST(SiteFactsTest, GpuTypesAndNodeGpusFromTheEnvironment) {
  const SiteFacts site = Site();
  EXPECT_EQ(site.node_gpus, 8);
  EXPECT_EQ(ModelsOfGpuType(site, "A100"),
            (std::vector<std::string>{"A100-SXM-80GB", "A100-PCIE-40GB"}));
  EXPECT_EQ(ModelsOfGpuType(site, "l40s-48gb"), std::vector<std::string>{"L40S-48GB"});
  EXPECT_FALSE(ModelsOfGpuType(site, "h100"));
  EXPECT_EQ(ParseSiteFacts(nullptr, "").value().node_gpus, 0);
  EXPECT_EQ(ParseSiteFacts("a100", nullptr).status().message(),
            "HANGAR_SBATCH_GPU_TYPES: 'a100' is not TYPE=MODEL[|MODEL]; write e.g. "
            "a100=A100-SXM-80GB|A100-PCIE-40GB,l40s=L40S-48GB");
  EXPECT_EQ(ParseSiteFacts(nullptr, "eight").status().message(),
            "HANGAR_SBATCH_NODE_GPUS='eight' is not a GPU count (1 to 64): set it to the GPUs of "
            "a whole node");
}

TEST(ConstraintTest, FeaturesAreLabelsAndGpuTypesAreModels) {
  NodeRequirements r = ConstraintToNodes("volta32gb&ib", {});
  EXPECT_EQ(r.labels, (std::vector<std::pair<std::string, std::string>>{{"ib", "true"},
                                                                        {"volta32gb", "true"}}));
  EXPECT_TRUE(r.models.empty());
  EXPECT_TRUE(r.dropped.empty());
  r = ConstraintToNodes("[a100|v100]&ib", Site());
  EXPECT_EQ(r.models,
            (std::vector<std::string>{"A100-SXM-80GB", "A100-PCIE-40GB", "V100-SXM2-32GB"}));
  EXPECT_EQ(r.labels, (std::vector<std::pair<std::string, std::string>>{{"ib", "true"}}));
  r = ConstraintToNodes("public&1v100|2v100", {});
  EXPECT_EQ(r.labels, (std::vector<std::pair<std::string, std::string>>{{"public", "true"}}));
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].rfind("'1v100|2v100' is a choice of features", 0), 0u) << r.dropped[0];
  EXPECT_EQ(ConstraintToNodes("rack1*2", {}).dropped.size(), 1u);
}

TEST(SbatchShapeTest, ExclusiveTakesWholeNodesGpus) {
  BatchJob b = Convert("#SBATCH -N 2 --exclusive\n", Site());
  EXPECT_EQ(Group(b)["replicas"], 2);
  EXPECT_EQ(Group(b)["gpus"], 8);
  EXPECT_TRUE(b.warnings.empty());
  // A count given is kept; without the node's size, the script is told what to give.
  EXPECT_EQ(Group(Convert("#SBATCH --exclusive --gres=gpu:4\n", Site()))["gpus"], 4);
  b = Convert("#SBATCH -N 2\n#SBATCH --exclusive\n");
  EXPECT_FALSE(Group(b).contains("gpus"));
  EXPECT_EQ(b.warnings, std::vector<std::string>{
                            "job.sbatch:3: --exclusive: the job asks no GPUs, since how many a "
                            "whole node has is not known here; give --gpus-per-node=N (or set "
                            "HANGAR_SBATCH_NODE_GPUS) to have them all"});
}

TEST(SbatchShapeTest, GpusForTheWholeJobAreSpreadOverTheNodes) {
  BatchJob b = Convert("#SBATCH -N 2 -G 16 --ntasks-per-node=8\n");
  EXPECT_EQ(Group(b)["replicas"], 2);
  EXPECT_EQ(Group(b)["gpus"], 8);
  // Without --nodes, as many whole nodes as the GPUs need.
  b = Convert("#SBATCH --gpus=16\n", Site());
  EXPECT_EQ(Group(b)["replicas"], 2);
  EXPECT_EQ(Group(b)["gpus"], 8);
  EXPECT_EQ(Group(Convert("#SBATCH --gpus=4\n", Site()))["replicas"], 1);
  EXPECT_EQ(Try("#SBATCH -N 2 --gpus=3\n").status().message(),
            "job.sbatch:2: --gpus=3 does not divide evenly among 2 nodes; Hangar gives every node "
            "the same GPUs: give --gpus-per-node");
}

TEST(SbatchShapeTest, TasksMakeTheNodeCountAsInSlurm) {
  BatchJob b = Convert("#SBATCH --ntasks=4 --ntasks-per-node=2 --gpus-per-task=1\n");
  EXPECT_EQ(Group(b)["replicas"], 2);
  EXPECT_EQ(Group(b)["gpus"], 2);
  EXPECT_EQ(Group(b)["env"]["SLURM_NTASKS"], "4");
  b = Convert("#SBATCH -N 2\n#SBATCH --tasks-per-node=4\n");  // Slurm's other spelling
  EXPECT_EQ(Group(b)["env"]["SLURM_NTASKS_PER_NODE"], "4");
  EXPECT_EQ(Group(b)["env"]["SLURM_NTASKS"], "8");
  EXPECT_EQ(Try("#SBATCH --ntasks=5 --ntasks-per-node=2\n").status().message(),
            "job.sbatch:2: --ntasks=5 at 2 per node (job.sbatch:2) leaves the last node fewer "
            "tasks; Hangar runs the same tasks on every node: give a multiple of "
            "--ntasks-per-node");
  // --ntasks-per-gpu: the tasks from the GPUs, or the GPUs from the tasks.
  EXPECT_EQ(Group(Convert("#SBATCH --gres=gpu:4 --ntasks-per-gpu=2\n"))["env"]["SLURM_NTASKS"],
            "8");
  EXPECT_EQ(Group(Convert("#SBATCH -n 4 --ntasks-per-gpu=1\n"))["gpus"], 4);
}

TEST(SbatchShapeTest, GpuTypesBecomeModelsThroughTheSitesMappingOrGoToTheController) {
  BatchJob b = Convert("#SBATCH --gpus-per-task=l40s:1\n", Site());
  EXPECT_EQ(Group(b)["gpu_models"], ordered_json({"L40S-48GB"}));
  EXPECT_TRUE(b.warnings.empty());
  // Unmapped here, a type goes to the controller as written, which maps it through
  // cluster.yaml's gpu_types (or refuses it); a dry run says so.
  b = Convert("#SBATCH -N 1\n#SBATCH --gres=gpu:A100_40GB:1\n");
  EXPECT_EQ(Group(b)["gpus"], 1);
  EXPECT_EQ(Group(b)["gpu_models"], ordered_json({"A100_40GB"}));
  EXPECT_EQ(b.warnings, std::vector<std::string>{"job.sbatch:3: the GPU type 'A100_40GB' is kept "
                                                 "as written (gpu_models: [A100_40GB]): the "
                                                 "controller maps Slurm's GPU types to its models "
                                                 "through cluster.yaml's gpu_types when the job is "
                                                 "submitted, and refuses a type it does not know"});
  SiteFacts to_controller;
  to_controller.controller_maps_types = true;
  b = Convert("#SBATCH --gpus-per-task=l40s:1\n", to_controller);
  EXPECT_EQ(Group(b)["gpu_models"], ordered_json({"l40s"}));
  EXPECT_TRUE(b.warnings.empty());
  // -C names features: node labels; GPU types among them: models.
  b = Convert("#SBATCH --gres=gpu:2\n#SBATCH -C 'a100&ib'\n", Site());
  EXPECT_EQ(Group(b)["gpu_models"], ordered_json({"A100-SXM-80GB", "A100-PCIE-40GB"}));
  EXPECT_EQ(Group(b)["node_selector"], ordered_json({{"ib", "true"}}));
  b = Convert("#SBATCH --gres=gpu:2\n#SBATCH -C volta32gb\n");
  EXPECT_EQ(Group(b)["node_selector"], ordered_json({{"volta32gb", "true"}}));
  EXPECT_NE(b.yaml.find("node_selector:\n      volta32gb: \"true\"\n"), std::string::npos)
      << b.yaml;
  EXPECT_EQ(b.warnings, std::vector<std::string>{
                            "job.sbatch:3: --constraint=volta32gb: the job runs only on nodes "
                            "labelled volta32gb: \"true\" (labels: in cluster.yaml; `hangar "
                            "explain ID` says when none has them)"});
}

TEST(SbatchShapeTest, MemoryPerCpuAccountAndExportedNames) {
  BatchJob b = Convert("#SBATCH -c 8 --ntasks-per-node=2 --mem-per-cpu=2G\n");
  EXPECT_EQ(Group(b)["memory"], "32Gi");
  EXPECT_EQ(Group(Convert("#SBATCH -n 3 --mem-per-cpu=1000\n"))["memory"], "3000Mi");
  EXPECT_EQ(Try("#SBATCH --mem-per-cpu=2G\n#SBATCH --mem=10G\n").status().message(),
            "job.sbatch:2: --mem-per-cpu and --mem (job.sbatch:3) both ask memory, which sbatch "
            "refuses too; give one of them");
  b = Convert("#SBATCH -A research --export=WANDB_API_KEY,UNSET,A=1\n", {},
              {{"WANDB_API_KEY", "k"}, {"HOME", "/home/ada"}});
  EXPECT_EQ(Group(b)["env"]["SLURM_JOB_ACCOUNT"], "research");
  EXPECT_EQ(b.spec["account"], "research");
  EXPECT_EQ(Group(b)["env"]["WANDB_API_KEY"], "k");
  EXPECT_EQ(Group(b)["env"]["A"], "1");
  EXPECT_FALSE(Group(b)["env"].contains("UNSET"));
  EXPECT_FALSE(Group(b)["env"].contains("HOME"));
}

// Every problem at once, each naming its line, in the order of the script's lines.
TEST(SbatchShapeTest, EveryProblemOfAScriptIsReportedAtOnce) {
  auto b =
      Try("#SBATCH --begin=whenever\n"
          "#SBATCH --mail-type=ALL\n"
          "#SBATCH --time=soon\n"
          "#SBATCH -N 2 -n 5\n"
          "#SBATCH --test-only\n"
          "#SBATCH -o out-%y\n");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "job.sbatch:2: #SBATCH --begin=whenever: 'whenever' is not a time sbatch reads: write "
            "now+30minutes, 22:00, 10:00pm, tomorrow, midnight, 2026-12-24 or "
            "2026-12-24T18:00:00\n"
            "job.sbatch:4: #SBATCH --time=soon: 'soon' is not a Slurm time; write minutes, MM:SS, "
            "HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS\n"
            "job.sbatch:5: --ntasks=5 does not divide evenly among 2 nodes; Hangar runs the same "
            "tasks on every node: give --ntasks-per-node\n"
            "job.sbatch:6: #SBATCH --test-only cannot be honoured by hangar sbatch; use `hangar "
            "sbatch --dry-run`\n"
            "job.sbatch:7: --output=out-%y: '%y' in 'out-%y' is not a pattern sbatch fills (%j %A "
            "%a %x %N %n %u %t %s %J and %%); write %% for a percent sign");
}

}  // namespace
}  // namespace hangar::cli::sbatch
