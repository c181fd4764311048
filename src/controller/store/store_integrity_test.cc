// A damaged or unexpectedly empty store is refused with a sentence and the restore command; the
// store lock follows the file; a full disk is a clear refusal that keeps what was committed.
#include "controller/store/store_integrity.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "controller/store/state_store.h"
#include "controller/store/store_disk.h"

namespace hangar::controller {
namespace {

class StoreIntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            ("integrity-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .lexically_normal()
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/state.db";
    url_ = "sqlite://" + path_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A store made through the store, with `jobs` jobs of 2 KB specs (many pages), then closed.
  void MakeStore(int jobs) {
    auto store = OpenStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    StoreBatch b;
    for (int i = 1; i <= jobs; ++i) {
      JobRow j;
      j.id = static_cast<uint64_t>(i);
      j.name = "job-" + std::to_string(i);
      j.queue = "default";
      j.user = "alice";
      j.state = "running";
      j.SetSpec(std::string(2000, 'x'));
      b.jobs.push_back(j);
    }
    b.nodes = {{"gpu-1", "{}"}};
    ASSERT_TRUE((*store)->Commit(b).ok());
  }
  // Runs SQL on the file behind the store's back.
  std::string Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    std::string out;
    char* err = nullptr;
    sqlite3_exec(
        db, sql.c_str(),
        [](void* o, int, char** v, char**) {
          *static_cast<std::string*>(o) += v[0] ? v[0] : "";
          return 0;
        },
        &out, &err);
    sqlite3_free(err);
    sqlite3_close(db);
    return out;
  }
  void Overwrite(int64_t offset, const std::string& bytes) {
    const int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), offset), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  void ExpectRefusedWithRestoreAdvice(const Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("hangar restore --store " + url_ + " --in BACKUP.jsonl --force"),
              std::string::npos)
        << s.message();
  }

  std::string dir_, path_, url_;
};

TEST_F(StoreIntegrityTest, RandomBytesOverTheJobsRootPageAreRefusedAtOpen) {
  MakeStore(200);
  const int root = std::stoi(Sql("SELECT rootpage FROM sqlite_master WHERE name='jobs'"));
  const int page = std::stoi(Sql("PRAGMA page_size"));
  std::mt19937 random(42);
  std::string noise(static_cast<size_t>(page), '\0');
  for (char& c : noise) c = static_cast<char>(random());
  Overwrite(static_cast<int64_t>(root - 1) * page, noise);
  auto store = OpenStore(url_);
  ASSERT_FALSE(store.ok())
      << "a store whose jobs table lost its root page served as if it held no jobs";
  ExpectRefusedWithRestoreAdvice(
      store.status(), "the store " + path_ + " is damaged (SQLite's integrity_check found");
}

TEST_F(StoreIntegrityTest, SixtyFourKiBZeroedAreRefusedAtOpen) {
  MakeStore(200);
  Overwrite(64 * 1024, std::string(64 * 1024, '\0'));
  auto store = OpenStore(url_);
  ASSERT_FALSE(store.ok()) << "a store that lost 64 KiB of rows served what was left";
  ExpectRefusedWithRestoreAdvice(store.status(), "is damaged");
}

TEST_F(StoreIntegrityTest, AZeroByteStoreFileIsRefusedAndStoreNewMovesItAside) {
  std::ofstream(path_).close();
  auto store = OpenStore(url_);
  ASSERT_FALSE(store.ok()) << "a 0-byte store file became a new store";
  ExpectRefusedWithRestoreAdvice(store.status(),
                                 "the store " + path_ + " exists but is empty (0 bytes)");
  StoreOpenOptions fresh;
  fresh.start_new = true;
  auto started = OpenStore(url_, fresh);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  bool kept = false;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    kept = kept || e.path().filename().string().rfind("state.db.damaged-", 0) == 0;
  }
  EXPECT_TRUE(kept) << "the empty file is kept aside";
}

TEST_F(StoreIntegrityTest, ANewStoreIsMadeAsBefore) {
  auto store = OpenStore(url_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto c = (*store)->Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->jobs.empty());
  EXPECT_TRUE(c->values.empty()) << "the high-water record is the wrapper's own row";
}

TEST_F(StoreIntegrityTest, AStoreWhoseJobsVanishedIsRefusedAsUnexpectedlyEmpty) {
  MakeStore(30);
  Sql("DELETE FROM jobs; DELETE FROM nodes");
  auto store = OpenStore(url_);
  ASSERT_TRUE(store.ok()) << "the file itself is sound: " << store.status().ToString();
  auto c = (*store)->Load();
  ASSERT_FALSE(c.ok()) << "a store whose jobs were deleted loaded as an empty cluster";
  ExpectRefusedWithRestoreAdvice(c.status(),
                                 "the store " + url_ +
                                     " is unexpectedly empty: it holds no jobs, but it should "
                                     "hold 30 (its job ids went up to 30)");
  store->reset();
  StoreOpenOptions fresh;
  fresh.start_new = true;
  auto accepted = OpenStore(url_, fresh);
  ASSERT_TRUE(accepted.ok());
  ASSERT_TRUE((*accepted)->Load().ok()) << "--store-new goes on with what is there";
  accepted->reset();
  auto again = OpenStore(url_);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->Load().ok()) << "and from then on the record follows what is there";
}

TEST_F(StoreIntegrityTest, LostTailJobsAreRefused) {
  MakeStore(30);
  Sql("DELETE FROM jobs WHERE id > 20");
  auto store = OpenStore(url_);
  ASSERT_TRUE(store.ok());
  auto c = (*store)->Load();
  ASSERT_FALSE(c.ok());
  ExpectRefusedWithRestoreAdvice(
      c.status(), "it holds 20 jobs, but it should hold 30 (its job ids went up to 30)");
}

// The record counts rows, not commits: updates of jobs it holds leave it as it is, new ones raise
// it, across restarts.
TEST_F(StoreIntegrityTest, TheRecordFollowsUpdatesAndNewJobsAcrossRestarts) {
  MakeStore(30);
  {
    auto store = OpenStore(url_);
    ASSERT_TRUE(store.ok());
    auto c = (*store)->Load();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    StoreBatch b;
    b.jobs = {c->jobs[4], c->jobs[29], c->jobs[29]};
    b.jobs[0].state = "succeeded";
    b.jobs[2].id = 31;  // a new job, in the same batch as an update of job 30
    ASSERT_TRUE((*store)->Commit(b).ok());
  }
  {
    auto store = OpenStore(url_);
    ASSERT_TRUE(store.ok());
    auto c = (*store)->Load();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->jobs.size(), 31u);
  }
  Sql("DELETE FROM jobs WHERE id = 3");
  auto store = OpenStore(url_);
  ASSERT_TRUE(store.ok());
  auto c = (*store)->Load();
  ASSERT_FALSE(c.ok()) << "one lost row is a lost row";
  ExpectRefusedWithRestoreAdvice(
      c.status(), "it holds 30 jobs, but it should hold 31 (its job ids went up to 31)");
}

TEST_F(StoreIntegrityTest, UncheckedOpensReadWhatIsLeft) {
  MakeStore(30);
  Sql("DELETE FROM jobs WHERE id > 20");
  StoreOpenOptions unchecked;
  unchecked.check = false;
  auto store = OpenStore(url_, unchecked);
  ASSERT_TRUE(store.ok());
  auto c = (*store)->Load();
  ASSERT_TRUE(c.ok()) << "hangar backup saves what is left";
  EXPECT_EQ(c->jobs.size(), 20u);
}

TEST_F(StoreIntegrityTest, ASecondControllerOnAHardLinkIsRefused) {
  auto first = OpenStore(url_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string link = dir_ + "/linked.db";
  ASSERT_EQ(::link(path_.c_str(), link.c_str()), 0);
  auto second = OpenStore("sqlite://" + link);
  ASSERT_FALSE(second.ok()) << "two controllers ran on one file through a hard link";
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            "the store " + link + " is in use by another controller (pid " +
                std::to_string(::getpid()) +
                "); stop it first, or give this controller a store of its own (--store)");
  first->reset();
  EXPECT_TRUE(OpenStore("sqlite://" + link).ok()) << "the lock goes with its owner";
}

TEST_F(StoreIntegrityTest, AScheduledCheckStopsCommitsToADamagedFile) {
  MakeStore(200);
  StoreOpenOptions often;
  often.integrity_every = 20;  // ms: this test's schedule
  auto store = OpenStore(url_, often);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Load().ok());
  const int64_t failures = StoreIntegrityFailures();
  const int root = std::stoi(Sql("SELECT rootpage FROM sqlite_master WHERE name='jobs'"));
  const int page = std::stoi(Sql("PRAGMA page_size"));
  Overwrite(static_cast<int64_t>(root - 1) * page, std::string(static_cast<size_t>(page), '\x5a'));
  StoreBatch b;
  b.values = {{"meta", "x", "1", false}};
  Status s;
  for (int i = 0; i < 500 && s.ok(); ++i) {  // until the check has run (at most 10 s)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = (*store)->Commit(b);
  }
  ASSERT_FALSE(s.ok()) << "commits went on into a damaged file";
  ExpectRefusedWithRestoreAdvice(
      s, "failed its scheduled integrity check, so the controller writes nothing more to it");
  EXPECT_EQ(StoreIntegrityFailures(), failures + 1);
}

// A real full filesystem: a 1 MiB tmpfs in a mount namespace of this test process's own.
TEST_F(StoreIntegrityTest, AFullDiskIsRefusedWithTheDeviceAndKeepsWhatWasCommitted) {
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0)
      << "needs root (a private mount namespace): " << std::strerror(errno);
  ASSERT_EQ(::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
  const std::string small = dir_ + "/small";
  std::filesystem::create_directories(small);
  ASSERT_EQ(::mount("hangar-full", small.c_str(), "tmpfs", 0, "size=1m"), 0)
      << std::strerror(errno);
  const std::string url = "sqlite://" + small + "/state.db";
  Status full;
  uint64_t committed = 0;
  {
    auto store = OpenStore(url);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (uint64_t id = 1; id < 2000 && full.ok(); ++id) {
      StoreBatch b;
      JobRow j;
      j.id = id;
      j.name = "j";
      j.queue = "default";
      j.user = "alice";
      j.state = "pending";
      j.SetSpec(std::string(16 * 1024, 'y'));
      b.jobs = {j};
      full = (*store)->Commit(b);
      if (full.ok()) committed = id;
    }
    ASSERT_FALSE(full.ok()) << "1 MiB never filled";
    EXPECT_TRUE(IsStoreDiskFull(full)) << full.ToString();
    EXPECT_EQ(full.message(), "the store's disk is full: free space on hangar-full (mounted at " +
                                  small + ", holding " + small +
                                  "/state.db); nothing was accepted");
    auto c = (*store)->Load();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->jobs.size(), committed)
        << "what was committed is kept, and nothing of the failed commit";
  }
  ::umount2(small.c_str(), MNT_DETACH);
}

// Fills the filesystem holding `dir` with a file of its own; returns the file.
std::string FillDisk(const std::string& dir) {
  const std::string filler = dir + "/filler";
  const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const std::string block(4096, 'f');
  while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {
  }
  ::close(fd);
  return filler;
}

// A controller started while its store's disk is full waits for room instead of starting, failing
// its first commit, exiting and being restarted again and again.
TEST_F(StoreIntegrityTest, AStartOnAFullDiskWaitsForRoom) {
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0)
      << "needs root (a private mount namespace): " << std::strerror(errno);
  ASSERT_EQ(::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
  const std::string small = dir_ + "/small";
  std::filesystem::create_directories(small);
  ASSERT_EQ(::mount("hangar-full", small.c_str(), "tmpfs", 0, "size=1m"), 0)
      << std::strerror(errno);
  {
    auto store = OpenStore("sqlite://" + small + "/state.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Load().ok());
    const std::string filler = FillDisk(small);
    std::atomic<bool> stop{false}, done{false};
    std::atomic<int> said{0};
    std::string sentence;
    std::mutex mu;
    Status result;
    std::thread start([&] {
      result = AwaitRoomToCommit(**store, 1234, stop, 20, [&](const Status& s) {
        std::lock_guard<std::mutex> l(mu);
        sentence = s.message();
        said++;
      });
      done = true;
    });
    for (int i = 0; i < 1000 && said < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_GE(said.load(), 3) << "it tried again, and said why each time";
    EXPECT_FALSE(done) << "it returned while the disk was still full";
    {
      std::lock_guard<std::mutex> l(mu);
      EXPECT_EQ(sentence.rfind(
                    "the store's disk is full: free space on hangar-full (mounted at " + small, 0),
                0u)
          << sentence;
    }
    std::filesystem::remove(filler);
    start.join();
    EXPECT_TRUE(result.ok()) << result.ToString();
  }
  ::umount2(small.c_str(), MNT_DETACH);
}

}  // namespace
}  // namespace hangar::controller
