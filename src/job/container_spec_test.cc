#include "job/container_spec.h"

#include <gtest/gtest.h>

#include "job/job_spec.h"

namespace hangar::job {
namespace {

TEST(ImageRefTest, ReadsRegistryRepositoryTagAndDigest) {
  auto r = ParseImageRef("127.0.0.1:5000/team/train:1.2");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->registry, "127.0.0.1:5000");
  EXPECT_EQ(r->repository, "team/train");
  EXPECT_EQ(r->tag, "1.2");
  EXPECT_TRUE(r->OnLoopback());
  EXPECT_EQ(r->Reference(), "127.0.0.1:5000/team/train:1.2");
  const std::string d = "sha256:" + std::string(64, 'a');
  auto pinned = ParseImageRef("nvcr.io/nvidia/pytorch:24.05-py3@" + d);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->Reference(), "nvcr.io/nvidia/pytorch@" + d);
  EXPECT_FALSE(pinned->OnLoopback());
  auto bare = ParseImageRef("busybox");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->registry, "");
  EXPECT_EQ(bare->Reference(), "busybox:latest");
  EXPECT_TRUE(ParseImageRef("localhost/x:1")->OnLoopback());
}

TEST(ImageRefTest, RefusesMalformedReferencesSayingWhy) {
  auto upper = ParseImageRef("127.0.0.1:5000/Team/train");
  ASSERT_FALSE(upper.ok());
  EXPECT_NE(upper.status().message().find("repository 'Team/train'"), std::string::npos);
  auto digest = ParseImageRef("a/b@sha256:xyz");
  ASSERT_FALSE(digest.ok());
  EXPECT_NE(digest.status().message().find("64 lowercase hex"), std::string::npos);
  EXPECT_FALSE(ParseImageRef("").ok());
  EXPECT_FALSE(ParseImageRef("a/b:bad tag").ok());
}

TEST(MountTest, ReadsModesAndRefusesRelativePaths) {
  auto ro = ParseMount("/data/imagenet:/data");
  ASSERT_TRUE(ro.ok());
  EXPECT_TRUE(ro->read_only);
  auto rw = ParseMount("/scratch/run:/out:rw");
  ASSERT_TRUE(rw.ok());
  EXPECT_FALSE(rw->read_only);
  EXPECT_EQ(MountText(*rw), "/scratch/run:/out:rw");
  EXPECT_FALSE(ParseMount("data:/data").ok());
  EXPECT_FALSE(ParseMount("/data/../etc:/x").ok());
  auto mode = ParseMount("/a:/b:rx");
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("ro or rw"), std::string::npos);
}

TEST(MountTest, AllowListMatchesWholePathComponents) {
  std::vector<Mount> m = {*ParseMount("/data/set:/d")};
  EXPECT_TRUE(CheckMountsAllowed(m, {"/data"}).ok());
  EXPECT_TRUE(CheckMountsAllowed(m, {"/data/set"}).ok());
  Status sibling = CheckMountsAllowed({*ParseMount("/database:/d")}, {"/data"});
  ASSERT_FALSE(sibling.ok());
  EXPECT_NE(sibling.message().find("/database is not under a path this cluster allows (/data)"),
            std::string::npos);
  Status none = CheckMountsAllowed(m, {});
  EXPECT_NE(none.message().find("containers.mounts_allowed"), std::string::npos);
}

TEST(ContainerJobSpecTest, ParsesImageMountsAndShmAndRoundTrips) {
  auto spec = ParseJobSpec(R"(
name: train
image: 127.0.0.1:5000/team/train:1
tasks:
  - replicas: 2
    gpus: 1
    workdir: /workspace
    mounts: ["/data:/data", "/scratch:/out:rw"]
    shm_size: 1Gi
    command: [python, train.py]
)",
                           "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const TaskGroupSpec& g = spec->tasks[0];
  EXPECT_EQ(g.container.image, "127.0.0.1:5000/team/train:1");
  EXPECT_EQ(g.container.shm_size_mib, 1024);
  ASSERT_EQ(g.container.mounts.size(), 2u);
  EXPECT_FALSE(g.container.mounts[1].read_only);
  JobSpec copy = *spec;
  ResolveWorkdirs(&copy, "/somewhere");
  EXPECT_EQ(copy.tasks[0].workdir, "/workspace");
  auto back = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tasks[0].container.mounts, g.container.mounts);
  EXPECT_EQ(back->tasks[0].container.image, g.container.image);
}

TEST(ContainerJobSpecTest, RefusesContainerFieldsWithoutAnImageAndBadWorkdirs) {
  auto no_image = ParseJobSpec("name: j\ntasks: [{mounts: [\"/a:/a\"], command: [x]}]", "job.yaml");
  ASSERT_FALSE(no_image.ok());
  EXPECT_NE(no_image.status().message().find("add image:"), std::string::npos);
  auto rel =
      ParseJobSpec("name: j\ntasks: [{image: busybox, workdir: work, command: [x]}]", "job.yaml");
  ASSERT_FALSE(rel.ok());
  EXPECT_NE(rel.status().message().find("inside the container"), std::string::npos);
  auto bad = ParseJobSpec("name: j\ntasks: [{image: \"Bad/Name\", command: [x]}]", "job.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.yaml"), std::string::npos);
}

}  // namespace
}  // namespace hangar::job
