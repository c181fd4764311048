// Cached objects are readable by the agent and by the tasks that use them, through each task's
// own view, and by no other local account.
#include "agent/data/task_view.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/data/object_cache.h"
#include "agent/data/test_dir.h"

namespace hangar::agent::data {
namespace {

constexpr uid_t kAlice = 61001, kBob = 61002, kNobody = 65534;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// An object in `cache`, its digest.
std::string Cache(ObjectCache& cache, const std::string& content) {
  const std::string tmp = cache.dir() + "/../content";
  std::ofstream(tmp) << content;
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  const std::string digest = *Sha256OfFile(fd, static_cast<int64_t>(content.size()));
  ::close(fd);
  auto p = cache.Begin(digest, static_cast<int64_t>(content.size()), 1 << 20);
  EXPECT_TRUE(p.ok());
  EXPECT_TRUE((*p)->Write(0, content).ok());
  EXPECT_TRUE(cache.Commit(*p, 1).ok());
  return digest;
}

TEST(TaskViewTest, ACachedObjectIsNotReadableByOtherAccounts) {
  TempDir dir(0755);
  // An agent of before made its cache open to all: the next start closes it.
  std::filesystem::create_directories(dir.path() + "/cache/objects");
  ::chmod((dir.path() + "/cache/objects").c_str(), 0755);
  ObjectCache cache(dir.path() + "/cache", 0);
  ASSERT_TRUE(cache.Init(1).ok());
  const std::string digest = Cache(cache, "weights");
  ASSERT_TRUE(OpensAs(0, 0, cache.PathOf(digest)));
  EXPECT_FALSE(OpensAs(kNobody, kNobody, cache.PathOf(digest)))
      << "any local account read the cache";
  EXPECT_FALSE(OpensAs(kAlice, kAlice, cache.PathOf(digest)));
  EXPECT_EQ(ModeOf(cache.dir() + "/objects"), 0700u);
  EXPECT_EQ(ModeOf(cache.dir() + "/partial"), 0700u);
  EXPECT_EQ(ModeOf(cache.dir()), 0711u);
  EXPECT_EQ(ModeOf(cache.dir() + "/index.json"), 0600u)
      << "digests are what a job needs to be given an object";
}

TEST(TaskViewTest, ATaskSeesItsObjectsThroughAViewOnlyItsUserEnters) {
  TempDir dir(0755);
  ObjectCache cache(dir.path() + "/cache", 0);
  ASSERT_TRUE(cache.Init(1).ok());
  const std::string digest = Cache(cache, "weights");
  auto view = MakeTaskView(cache.views_dir(), "7.0.0", {{cache.PathOf(digest), "models/w.bin"}},
                           std::make_pair(kAlice, kAlice));
  ASSERT_TRUE(view.ok()) << view.status().message();
  const std::string seen = *view + "/models/w.bin";
  EXPECT_TRUE(OpensAs(kAlice, kAlice, seen));
  EXPECT_FALSE(OpensAs(kBob, kBob, seen));
  EXPECT_FALSE(OpensAs(kNobody, kNobody, seen));
  std::ifstream in(seen);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), "weights");
  EXPECT_EQ(ModeOf(seen), 0444u) << "read-only, as the cached object";
  struct stat st {};
  ASSERT_EQ(::stat(view->c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kAlice);
  EXPECT_EQ(st.st_mode & 0777, 0500u);
  EXPECT_EQ(TaskViews(cache.views_dir()), std::vector<std::string>{"7.0.0"});
  EXPECT_FALSE(MakeTaskView(cache.views_dir(), "../x", {}, std::nullopt).ok());
  EXPECT_FALSE(
      MakeTaskView(cache.views_dir(), "8.0.0", {{cache.PathOf(digest), "../../w"}}, std::nullopt)
          .ok());
}

TEST(TaskViewTest, RemovingAViewNeverFollowsALinkTheUserPutThere) {
  TempDir dir(0755);
  ObjectCache cache(dir.path() + "/cache", 0);
  ASSERT_TRUE(cache.Init(1).ok());
  const std::string outside = dir.path() + "/outside";
  std::filesystem::create_directories(outside);
  std::ofstream(outside + "/keep") << "not the view's";
  const std::string digest = Cache(cache, "w");
  auto view = MakeTaskView(cache.views_dir(), "7.0.0", {{cache.PathOf(digest), "w"}},
                           std::make_pair(kAlice, kAlice));
  ASSERT_TRUE(view.ok());
  // What the user may do in their own folder: a folder of theirs, holding a link out.
  std::filesystem::create_directories(*view + "/mine");
  ASSERT_EQ(::symlink(outside.c_str(), (*view + "/mine/evil").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (*view + "/evil").c_str()), 0);
  ASSERT_EQ(::chown((*view + "/mine").c_str(), kAlice, kAlice), 0);
  RemoveTaskView(cache.views_dir(), "7.0.0");
  EXPECT_FALSE(std::filesystem::exists(*view));
  EXPECT_TRUE(std::filesystem::exists(outside + "/keep"));
  EXPECT_TRUE(std::filesystem::exists(cache.PathOf(digest))) << "the cached object stays";
}

}  // namespace
}  // namespace hangar::agent::data
