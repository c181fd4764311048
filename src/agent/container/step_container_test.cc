// A step's task in an OCI image (srun --container-image): pyxis's mount forms read and refused with
// the entry named, the container's run built as the task's user with the step task's GPUs and
// environment (the image keeps its PATH), and a mount from outside containers.mounts_allowed
// refused before podman sees it.
#include "agent/container/step_container.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "agent/container/mount_source.h"
#include "agent/container/podman_env.h"
#include "agent/data/test_dir.h"

namespace hangar::agent {
namespace {

using ::testing::HasSubstr;

TEST(StepContainerTest, MountsReadAsPyxisWritesThem) {
  auto m = ParseStepMounts({"/data:/data:ro", "/scratch:/work", "/models", "/ckpt:/ckpt:rw"});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ((*m)[0].host, "/data");
  EXPECT_TRUE((*m)[0].read_only);
  EXPECT_EQ((*m)[1].path, "/work");
  EXPECT_FALSE((*m)[1].read_only) << "pyxis mounts read-write unless told";
  EXPECT_EQ((*m)[2].host, "/models");
  EXPECT_EQ((*m)[2].path, "/models");
  EXPECT_FALSE((*m)[3].read_only);
}

TEST(StepContainerTest, ABadMountNamesItsEntry) {
  EXPECT_THAT(ParseStepMounts({"data:/data"}).status().message(),
              HasSubstr("'data:/data' is not SRC:DST[:ro|rw] with absolute paths"));
  EXPECT_THAT(ParseStepMounts({"/data:/data:x-bind"}).status().message(),
              HasSubstr("flag 'x-bind' is not ro or rw"));
  EXPECT_THAT(ParseStepMounts({"/data:/"}).status().message(),
              HasSubstr("would cover the container's whole file system"));
}

StepContainerPlace Place(const std::string& state_dir) {
  StepContainerPlace at;
  at.node = "node-1";
  at.task_id = "7.0.1";
  at.state_dir = state_dir;
  at.job_id = 7;
  at.session = 42;
  at.user = CredentialsFromIds(getuid(), getgid(), {});
  at.gpus = {{2, "GPU-aaa"}, {3, "GPU-bbb"}};
  return at;
}

TEST(StepContainerTest, TheStepsGpusAreItsLayoutsElseTheTasks) {
  EXPECT_EQ(StepGpus({"A=1", "CUDA_VISIBLE_DEVICES=2,3"}, {0, 1, 2, 3}),
            (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(StepGpus({"A=1"}, {0, 1}), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(StepGpus({"CUDA_VISIBLE_DEVICES="}, {0, 1}), std::vector<uint32_t>{})
      << "an empty list: no GPU, not the task's";
  EXPECT_EQ(StepGpus({"CUDA_VISIBLE_DEVICES=4,x,,5"}, {}), (std::vector<uint32_t>{4, 5}))
      << "what is not an index is left out";
}

TEST(StepContainerTest, TheRunIsTheTasksUserWithTheStepTasksGpusAndEnvironment) {
  data::TempDir dir{0755};
  StepContainerAsk ask;
  ask.image = "registry.local/pytorch:24.01";
  ask.workdir = "/workspace";
  ask.env = {"PATH=/usr/bin:/bin",
             "SLURM_PROCID=1",
             "LR=0.1",
             "HOME=/home/ada",
             "CUDA_VISIBLE_DEVICES=2,3",
             "LR=0.2",
             "LD_PRELOAD=/tmp/x.so",
             "CONTAINERS_CONF=/tmp/evil.conf"};
  std::vector<std::pair<std::string, std::string>> values;
  auto run = StepContainerRun(ask, Place(dir.path()), {"python", "train.py"}, &values);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->image, "registry.local/pytorch:24.01");
  EXPECT_EQ(run->argv, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(run->workdir, "/workspace");
  EXPECT_EQ(run->name, "hangar-node-1-7.0.1-step-42");
  ASSERT_TRUE(run->user.has_value());
  EXPECT_EQ(run->user->first, getuid());
  EXPECT_EQ(run->gpus.size(), 2u);
  // Passed by name (podman copies the values from its own environment): PATH and HOME stay the
  // image's; the first of a name counts.
  EXPECT_EQ(run->env_names, (std::vector<std::string>{"SLURM_PROCID", "LR"}));
  EXPECT_EQ(values, (std::vector<std::pair<std::string, std::string>>{{"SLURM_PROCID", "1"},
                                                                      {"LR", "0.1"}}));
  // What podman would act on is never in its own environment: on its command line instead.
  EXPECT_EQ(run->env_set, (std::vector<std::pair<std::string, std::string>>{
                              {"LD_PRELOAD", "/tmp/x.so"},
                              {"CONTAINERS_CONF", "/tmp/evil.conf"},
                              {"CUDA_VISIBLE_DEVICES", "GPU-aaa,GPU-bbb"}}));
  const bool labelled = std::any_of(run->labels.begin(), run->labels.end(), [](const auto& l) {
    return l.first == "hangar.step-session" && l.second == "42";
  });
  EXPECT_TRUE(labelled);
  EXPECT_TRUE(run->mounts.empty());
}

TEST(PodmanEnvTest, WhatTheLoaderPodmanOrGoActOnIsNotInherited) {
  for (const char* name :
       {"LD_PRELOAD", "LD_LIBRARY_PATH", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
        "_CONTAINERS_USERNS_CONFIGURED", "PATH", "HOME", "TMPDIR", "XDG_CONFIG_HOME", "GODEBUG",
        "HTTPS_PROXY", "REGISTRY_AUTH_FILE", "STORAGE_DRIVER"}) {
    EXPECT_TRUE(PodmanMustNotInherit(name)) << name;
  }
  for (const char* name : {"LR", "SLURM_PROCID", "HANGAR_JOB_ID", "GOOGLE_APPLICATION_CREDENTIALS",
                           "NCCL_DEBUG", "WANDB_API_KEY"}) {
    EXPECT_FALSE(PodmanMustNotInherit(name)) << name;
  }
}

TEST(StepContainerTest, AMountFromOutsideTheAllowedFoldersIsRefusedAndNothingStaysPinned) {
  data::TempDir dir{0755};
  const std::string allowed = dir.path() + "/data";
  std::filesystem::create_directories(allowed);
  std::filesystem::create_directories(dir.path() + "/mounts");
  StepContainerAsk ask;
  ask.image = "busybox";
  ask.mounts = {allowed + ":/data:ro", "/etc:/host-etc"};
  ask.mounts_allowed = {allowed};
  std::vector<std::pair<std::string, std::string>> values;
  auto run = StepContainerRun(ask, Place(dir.path()), {"true"}, &values);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.status().message(), HasSubstr("/etc"));
  EXPECT_THAT(run.status().message(), HasSubstr("containers.mounts_allowed"));
  EXPECT_FALSE(std::filesystem::exists(StepPinsDir(dir.path(), "7.0.1", 42)));
}

TEST(StepContainerTest, AnAllowedMountIsPinnedAndReleasedWithTheTask) {
  data::TempDir dir{0755};
  const std::string allowed = dir.path() + "/data";
  std::filesystem::create_directories(allowed);
  StepContainerAsk ask;
  ask.image = "busybox";
  ask.mounts = {allowed + ":/data:ro"};
  ask.mounts_allowed = {allowed};
  std::vector<std::pair<std::string, std::string>> values;
  auto run = StepContainerRun(ask, Place(dir.path()), {"true"}, &values);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->mounts.size(), 1u);
  EXPECT_EQ(run->mounts[0].host, StepPinsDir(dir.path(), "7.0.1", 42) + "/0");
  EXPECT_EQ(run->mounts[0].path, "/data");
  EXPECT_TRUE(run->mounts[0].read_only);
  ReleaseStepContainers(nullptr, "node-1", dir.path(), "7.0.1");
  EXPECT_FALSE(std::filesystem::exists(StepPinsDir(dir.path(), "7.0.1", 42)));
}

TEST(StepContainerTest, NoImageOrARelativeWorkdirIsRefused) {
  data::TempDir dir{0755};
  std::vector<std::pair<std::string, std::string>> values;
  StepContainerAsk ask;
  EXPECT_THAT(StepContainerRun(ask, Place(dir.path()), {"true"}, &values).status().message(),
              HasSubstr("names no image"));
  ask.image = "busybox";
  ask.workdir = "work";
  EXPECT_THAT(StepContainerRun(ask, Place(dir.path()), {"true"}, &values).status().message(),
              HasSubstr("--container-workdir=work is not absolute"));
}

}  // namespace
}  // namespace hangar::agent
