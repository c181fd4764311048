// Draining node-local checkpoints to the shared store (issue 19, item 5): atomic publication
// behind a link, a failed drain keeps the previous checkpoint, restores pick the newest, and the
// drains of a gang's nodes merge.
#include "agent/checkpoint_drain.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CheckpointDrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hangar-drain-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = dir_ + "/shared/job-7";
    a_ = dir_ + "/node-a/checkpoints/job-7";
    b_ = dir_ + "/node-b/checkpoints/job-7";
    fs::create_directories(dir_ + "/shared");
    fs::create_directories(a_);
    fs::create_directories(b_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return in ? s.str() : "<missing>";
  }
  // Every name in the store's folder, sorted.
  std::vector<std::string> StoreNames() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_ + "/shared"))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string Link() const {
    return fs::is_symlink(store_) ? fs::read_symlink(store_).string() : "<not a link>";
  }

  std::string dir_, store_, a_, b_;
};

TEST_F(CheckpointDrainTest, PublishesEachDrainAsANewGenerationBehindTheLink) {
  Write(a_ + "/model.pt", "step 1");
  Write(a_ + "/opt/state.pt", "adam 1");
  auto first = DrainCheckpoint(a_, store_, std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->generation, ".job-7.gen-0000000001");
  EXPECT_EQ(first->files_copied, 2);
  EXPECT_EQ(first->bytes_copied, 12);
  EXPECT_EQ(Link(), ".job-7.gen-0000000001");
  EXPECT_EQ(Read(store_ + "/model.pt"), "step 1");
  EXPECT_EQ(Read(store_ + "/opt/state.pt"), "adam 1");

  // The second drain copies only what changed; the unchanged file is a hard link to the first
  // generation's, which is gone afterwards, as is every temporary name.
  Write(a_ + "/model.pt", "step 2!");
  auto second = DrainCheckpoint(a_, store_, std::nullopt);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->generation, ".job-7.gen-0000000002");
  EXPECT_EQ(second->files_copied, 1);
  EXPECT_EQ(second->files_linked, 1);
  EXPECT_EQ(Read(store_ + "/model.pt"), "step 2!");
  EXPECT_EQ(Read(store_ + "/opt/state.pt"), "adam 1");
  EXPECT_EQ(StoreNames(),
            (std::vector<std::string>{".job-7.gen-0000000002", ".job-7.lock", "job-7"}));
  // Agents without scratch dirs open the generation through the link.
  EXPECT_EQ(ResolveStoreLink(store_), dir_ + "/shared/.job-7.gen-0000000002");
}

TEST_F(CheckpointDrainTest, AFailedDrainKeepsThePreviousCheckpointWhole) {
  Write(a_ + "/model.pt", "step 1");
  ASSERT_TRUE(DrainCheckpoint(a_, store_, std::nullopt).ok());
  Write(a_ + "/model.pt", "step 2, half of it");
  ASSERT_EQ(mkfifo((a_ + "/zz-pipe").c_str(), 0600),
            0);  // no checkpoint data: the drain refuses it
  auto failed = DrainCheckpoint(a_, store_, std::nullopt);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(),
              HasSubstr("zz-pipe is neither a file, a folder nor a symbolic link"));
  EXPECT_THAT(failed.status().message(), HasSubstr("the store keeps its previous checkpoint"));
  EXPECT_EQ(Link(), ".job-7.gen-0000000001");
  EXPECT_EQ(Read(store_ + "/model.pt"), "step 1");
  EXPECT_EQ(StoreNames(),
            (std::vector<std::string>{".job-7.gen-0000000001", ".job-7.lock", "job-7"}));

  // A drain that died half way (its .tmp) is never read and goes with the next drain.
  fs::remove(a_ + "/zz-pipe");
  Write(dir_ + "/shared/.job-7.gen-0000000002.tmp/model.pt", "torn");
  auto next = DrainCheckpoint(a_, store_, std::nullopt);
  ASSERT_TRUE(next.ok()) << next.status().message();
  EXPECT_EQ(Read(store_ + "/model.pt"), "step 2, half of it");
  EXPECT_EQ(StoreNames(),
            (std::vector<std::string>{".job-7.gen-0000000002", ".job-7.lock", "job-7"}));
}

TEST_F(CheckpointDrainTest, ADrainWaitsForTheStoreLockAndSaysWhenItGivesUp) {
  Write(a_ + "/model.pt", "step 1");
  ASSERT_TRUE(DrainCheckpoint(a_, store_, std::nullopt).ok());
  const int fd = open((dir_ + "/shared/.job-7.lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);  // another node's drain
  Write(a_ + "/model.pt", "step 2");
  auto blocked = DrainCheckpoint(a_, store_, std::nullopt, 200);
  close(fd);
  ASSERT_FALSE(blocked.ok());
  EXPECT_THAT(blocked.status().message(),
              HasSubstr("another drain or restore of this job has held"));
  EXPECT_EQ(Read(store_ + "/model.pt"), "step 1");
}

TEST_F(CheckpointDrainTest, ARestorePicksTheNewestCheckpoint) {
  // Nothing anywhere: an empty local folder.
  auto none = RestoreCheckpoint(store_, b_, std::nullopt);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->restored);
  EXPECT_TRUE(fs::is_directory(b_));

  // Node A drains; node B (the job moved there) restores it.
  Write(a_ + "/model.pt", "step 1");
  ASSERT_TRUE(DrainCheckpoint(a_, store_, std::nullopt).ok());
  auto moved = RestoreCheckpoint(store_, b_, std::nullopt);
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  EXPECT_TRUE(moved->restored);
  EXPECT_EQ(moved->generation, ".job-7.gen-0000000001");
  EXPECT_EQ(Read(b_ + "/model.pt"), "step 1");

  // B holds that generation: kept, with what its task wrote after (not copied over again).
  Write(b_ + "/model.pt", "step 1 and more, not reported");
  auto kept = RestoreCheckpoint(store_, b_, std::nullopt);
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->restored);
  EXPECT_THAT(kept->why, HasSubstr("holds the store's generation .job-7.gen-0000000001 already"));
  EXPECT_EQ(Read(b_ + "/model.pt"), "step 1 and more, not reported");

  // A newer generation in the store (from A again) replaces B's copy whole.
  Write(a_ + "/model.pt", "step 3");
  Write(a_ + "/extra", "x");
  ASSERT_TRUE(DrainCheckpoint(a_, store_, std::nullopt).ok());
  auto newer = RestoreCheckpoint(store_, b_, std::nullopt);
  ASSERT_TRUE(newer.ok());
  EXPECT_TRUE(newer->restored);
  EXPECT_EQ(Read(b_ + "/model.pt"), "step 3");
  EXPECT_EQ(Read(b_ + "/extra"), "x");
  EXPECT_FALSE(fs::exists(b_ + ".restore"));
  EXPECT_FALSE(fs::exists(b_ + ".old"));

  // A wiped scratch disk is restored even though its marker names the store's generation.
  fs::remove_all(b_);
  auto wiped = RestoreCheckpoint(store_, b_, std::nullopt);
  ASSERT_TRUE(wiped.ok());
  EXPECT_TRUE(wiped->restored);
  EXPECT_EQ(Read(b_ + "/model.pt"), "step 3");
}

TEST_F(CheckpointDrainTest, AGangsNodesMergeTheirFilesAndRemovalsPropagate) {
  Write(a_ + "/rank0.pt", "r0 step 1");
  ASSERT_TRUE(DrainCheckpoint(a_, store_, std::nullopt).ok());
  Write(b_ + "/rank1.pt", "r1 step 1");
  ASSERT_TRUE(DrainCheckpoint(b_, store_, std::nullopt).ok());
  EXPECT_EQ(Read(store_ + "/rank0.pt"), "r0 step 1");  // B's drain kept A's file
  EXPECT_EQ(Read(store_ + "/rank1.pt"), "r1 step 1");

  // A rotates: its old file goes, a new one comes; B's stays.
  fs::remove(a_ + "/rank0.pt");
  Write(a_ + "/rank0-step2.pt", "r0 step 2");
  ASSERT_TRUE(DrainCheckpoint(a_, store_, std::nullopt).ok());
  EXPECT_FALSE(fs::exists(store_ + "/rank0.pt"));
  EXPECT_EQ(Read(store_ + "/rank0-step2.pt"), "r0 step 2");
  EXPECT_EQ(Read(store_ + "/rank1.pt"), "r1 step 1");

  // B drains again without touching A's old file (it never had it): it does not come back.
  Write(b_ + "/rank1.pt", "r1 step 2");
  ASSERT_TRUE(DrainCheckpoint(b_, store_, std::nullopt).ok());
  EXPECT_FALSE(fs::exists(store_ + "/rank0.pt"));
  EXPECT_EQ(Read(store_ + "/rank0-step2.pt"), "r0 step 2");
  EXPECT_EQ(Read(store_ + "/rank1.pt"), "r1 step 2");
}

TEST_F(CheckpointDrainTest, APlainStoreFolderIsRestoredAndBecomesGenerationZero) {
  // Written by an agent without a scratch dir.
  Write(store_ + "/model.pt", "plain step 5");
  auto restored = RestoreCheckpoint(store_, a_, std::nullopt);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_TRUE(restored->restored);
  EXPECT_EQ(restored->generation, "plain");
  EXPECT_EQ(Read(a_ + "/model.pt"), "plain step 5");
  Write(a_ + "/model.pt", "step 6");
  auto drained = DrainCheckpoint(a_, store_, std::nullopt);
  ASSERT_TRUE(drained.ok()) << drained.status().message();
  EXPECT_EQ(Link(), ".job-7.gen-0000000001");
  EXPECT_EQ(Read(store_ + "/model.pt"), "step 6");
  EXPECT_EQ(StoreNames(),
            (std::vector<std::string>{".job-7.gen-0000000001", ".job-7.lock", "job-7"}));
}

// The agent runs as root and copies for the task's user: the copies are theirs, and it copies only
// their files.
TEST_F(CheckpointDrainTest, CopiesBelongToTheTasksUserAndOnlyTheirFilesAreCopied) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to give files to another uid)";
  const FileOwner user{61001, 61002};
  Write(a_ + "/model.pt", "step 1");
  ASSERT_EQ(chown(a_.c_str(), user.uid, user.gid), 0);
  ASSERT_EQ(chown((a_ + "/model.pt").c_str(), user.uid, user.gid), 0);
  ASSERT_TRUE(DrainCheckpoint(a_, store_, user).ok());
  struct stat st {};
  ASSERT_EQ(stat((store_ + "/model.pt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user.uid);
  EXPECT_EQ(st.st_gid, user.gid);
  ASSERT_EQ(stat(ResolveStoreLink(store_).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user.uid);
  auto restored = RestoreCheckpoint(store_, b_, user);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  ASSERT_EQ(stat((b_ + "/model.pt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user.uid);
  ASSERT_EQ(stat(b_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user.uid);

  Write(a_ + "/shadow", "root's");  // say, a link swapped for a folder mid-drain
  auto refused = DrainCheckpoint(a_, store_, user);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("shadow is not a file of uid 61001"));
  EXPECT_FALSE(fs::exists(store_ + "/shadow"));
}

TEST_F(CheckpointDrainTest, TheDrainerDrainsInTheBackgroundInOrder) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, bool>> done;
  {
    CheckpointDrainer drainer(
        [&](const CheckpointDrainer::Request& q, const StatusOr<DrainResult>& r) {
          std::lock_guard<std::mutex> l(mu);
          done.emplace_back(q.task_id, r.ok());
          cv.notify_all();
        });
    Write(a_ + "/model.pt", "step 1");
    CheckpointDrainer::Request q;
    q.job_id = 7;
    q.task_id = "7.0.0";
    q.local_dir = a_;
    q.store_dir = store_;
    drainer.Enqueue(q);
    q.task_id = "7.0.1";
    q.local_dir = dir_ + "/node-a/missing";
    drainer.Enqueue(q);
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(10), [&] { return done.size() == 2; }));
  }
  EXPECT_EQ(done, (std::vector<std::pair<std::string, bool>>{{"7.0.0", true}, {"7.0.1", false}}));
  EXPECT_EQ(Read(store_ + "/model.pt"), "step 1");
}

}  // namespace
}  // namespace hangar::agent
