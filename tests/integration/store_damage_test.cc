// A damaged, emptied or shared store, and a full store disk, with the real binary: the controller
// refuses a damaged or 0-byte store with the restore command, `hangar restore --force` repairs it,
// a second controller on a hard link to the file is refused, a task the restored store does not
// know is held running until the operator decides, and a full disk is answered 503 and waited out.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

struct Ran {
  int rc = -1;
  std::string output;  // stdout and stderr together
};

Ran RunHangar(const std::vector<std::string>& args, const std::string& dir) {
  const std::string out = dir + "/command.out";
  pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(HANGAR_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ReadFile(out)};
}

std::vector<std::string> ControllerArgs(const LocalCluster& c, const std::string& store) {
  return {"controller",  "--cluster",  c.dir() + "/cluster.yaml",
          "--store",     store,        "--auth",
          "none",        "--insecure", "--api",
          "127.0.0.1:0", "--agents",   "127.0.0.1:0"};
}

int JobsRootPage(const std::string& path, int* page_size) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  int root = 0;
  sqlite3_exec(
      db, "SELECT rootpage FROM sqlite_master WHERE name='jobs'",
      [](void* r, int, char** v, char**) { return *static_cast<int*>(r) = std::atoi(v[0]), 0; },
      &root, nullptr);
  sqlite3_exec(
      db, "PRAGMA page_size",
      [](void* r, int, char** v, char**) { return *static_cast<int*>(r) = std::atoi(v[0]), 0; },
      page_size, nullptr);
  sqlite3_close(db);
  return root;
}

uint64_t Submit(LocalCluster& c, const std::string& yaml) {
  int status = 0;
  auto r = c.Post("/v1/jobs", yaml, &status);
  EXPECT_EQ(status, 201) << r.dump();
  return r.value("id", uint64_t{0});
}

// The attack's first step, replayed: one page of random bytes over the jobs table's root page.
TEST(StoreDamageTest, ADamagedOrEmptyStoreIsRefusedAndRestoreRepairsIt) {
  LocalCluster c(FourNodeTwoLeafCluster("damage"));
  c.StartController();
  for (int i = 0; i < 3; ++i)
    Submit(c,
           "name: j" + std::to_string(i) + "\ntasks:\n  - {gpus: 1, command: [sleep, \"60\"]}\n");
  c.KillController(SIGTERM);
  const std::string path = c.dir() + "/state.db", url = "sqlite://" + path,
                    backup = c.dir() + "/backup.jsonl";
  ASSERT_EQ(RunHangar({"backup", "--store", url, "--out", backup}, c.dir()).rc, 0);

  int page = 0;
  const int root = JobsRootPage(path, &page);
  ASSERT_GT(root, 0);
  std::mt19937 random(7);
  std::string noise(static_cast<size_t>(page), '\0');
  for (char& ch : noise) ch = static_cast<char>(random());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(root - 1) * page);
    f.write(noise.data(), static_cast<std::streamsize>(noise.size()));
  }
  Ran refused = RunHangar(ControllerArgs(c, url), c.dir());
  EXPECT_EQ(refused.rc, 2) << refused.output;
  EXPECT_TRUE(Contains(refused.output, "the store " + path + " is damaged (")) << refused.output;
  EXPECT_TRUE(
      Contains(refused.output, "hangar restore --store " + url + " --in BACKUP.jsonl --force"))
      << refused.output;
  EXPECT_FALSE(Contains(refused.output, "restored 0 jobs")) << refused.output;

  Ran unforced = RunHangar({"restore", "--store", url, "--in", backup}, c.dir());
  EXPECT_EQ(unforced.rc, 2);
  EXPECT_TRUE(Contains(unforced.output, "is damaged; add --force to move it aside"))
      << unforced.output;
  Ran restored = RunHangar({"restore", "--store", url, "--in", backup, "--force"}, c.dir());
  ASSERT_EQ(restored.rc, 0) << restored.output;
  EXPECT_TRUE(Contains(restored.output, ": 3 jobs, ")) << restored.output;
  c.StartController();
  EXPECT_EQ(c.Job(3)["name"], "j2") << "the restored store serves its jobs";
  c.KillController(SIGTERM);

  // A 0-byte store file is refused, not taken for a new store.
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  std::ofstream(path, std::ios::trunc).close();
  Ran empty = RunHangar(ControllerArgs(c, url), c.dir());
  EXPECT_EQ(empty.rc, 2);
  EXPECT_TRUE(Contains(empty.output, "the store " + path + " exists but is empty (0 bytes)"))
      << empty.output;
}

TEST(StoreDamageTest, ASecondControllerOnAHardLinkIsRefused) {
  LocalCluster c(FourNodeTwoLeafCluster("link"));
  c.StartController();
  const std::string linked = c.dir() + "/linked.db";
  ASSERT_EQ(::link((c.dir() + "/state.db").c_str(), linked.c_str()), 0);
  Ran second = RunHangar(ControllerArgs(c, "sqlite://" + linked), c.dir());
  EXPECT_EQ(second.rc, 2);
  EXPECT_TRUE(
      Contains(second.output, "the store " + linked + " is in use by another controller (pid "))
      << second.output;
}

// After a restore from a backup older than a running job, the agent's report of its task is held:
// the task keeps running, the node and an event say so, and the operator decides.
TEST(StoreDamageTest, ATaskTheRestoredStoreDoesNotKnowIsHeldUntilTheOperatorDecides) {
  LocalCluster c(FourNodeTwoLeafCluster("orphans"));
  c.StartController();
  c.StartAgent("node-1");
  ASSERT_TRUE(c.WaitForAgents(1));
  c.KillController(SIGTERM);
  const std::string url = "sqlite://" + c.dir() + "/state.db", old = c.dir() + "/old.jsonl";
  ASSERT_EQ(RunHangar({"backup", "--store", url, "--out", old}, c.dir()).rc, 0);
  c.StartController();
  ASSERT_TRUE(c.WaitForAgents(1));
  const std::string pid_file = c.dir() + "/task.pid";
  const uint64_t id = Submit(c, "name: long\ntasks:\n  - {gpus: 1, command: [sh, -c, 'echo $$ > " +
                                    pid_file + "; exec sleep 300']}\n");
  ASSERT_TRUE(c.WaitForJobState(id, "running", 20 * kSecond));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return !ReadFile(pid_file).empty(); }, 10 * kSecond));
  const pid_t task = std::atoi(ReadFile(pid_file).c_str());
  c.KillController(SIGTERM);
  Ran restored = RunHangar({"restore", "--store", url, "--in", old, "--force"}, c.dir());
  ASSERT_EQ(restored.rc, 0) << restored.output;
  c.StartController();
  nlohmann::json node;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        node = c.Get("/v1/nodes/node-1");
        return node.is_object() && node.value("state", "") == "orphans-held";
      },
      20 * kSecond))
      << node.dump();
  EXPECT_EQ(::kill(task, 0), 0) << "the task the store lost was stopped";
  EXPECT_TRUE(Contains(
      node["conditions"].dump(),
      "OrphansHeld: it runs 1 task(s) the store does not know (" + std::to_string(id) + ".0.0)"))
      << node.dump();
  EXPECT_TRUE(Contains(node["events"].dump(), "the store does not know (" + std::to_string(id) +
                                                  ".0.0): held, still running"))
      << node.dump();
  EXPECT_EQ(c.Job(id)["error"]["code"], "NOT_FOUND") << "the restored store does not have the job";

  Ran stop = RunHangar({"orphans", "node-1", "--stop", "--server",
                        "http://127.0.0.1:" + std::to_string(c.api_port())},
                       c.dir());
  ASSERT_EQ(stop.rc, 0) << stop.output;
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        return ::kill(task, 0) != 0 ||
               Contains(ReadFile("/proc/" + std::to_string(task) + "/stat"), ") Z ");
      },
      20 * kSecond))
      << "the operator's stop ends the task";
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return c.Get("/v1/nodes/node-1").value("state", "") == "ready"; }, 20 * kSecond));
}

// The attack's full disk, on a real one: a 4 MiB tmpfs in a mount namespace of this test's own
// (its controllers, forked from it, share it).
TEST(StoreDamageTest, AFullDiskIsAnswered503AndARestartWaitsForRoom) {
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0)
      << "needs root (a private mount namespace): " << std::strerror(errno);
  ASSERT_EQ(::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
  const std::string small =
      (std::filesystem::path(::testing::TempDir()) / ("store-full-" + std::to_string(::getpid())))
          .lexically_normal()
          .string();
  std::filesystem::create_directories(small);
  ASSERT_EQ(::mount("hangar-store-full", small.c_str(), "tmpfs", 0, "size=4m"), 0)
      << std::strerror(errno);
  const std::string url = "sqlite://" + small + "/state.db";
  {
    LocalCluster c(FourNodeTwoLeafCluster("full"), {"--store", url});
    c.StartController();
    const uint64_t kept =
        Submit(c, "name: before\ntasks:\n  - {gpus: 1, command: [sleep, \"60\"]}\n");
    const std::string filler = small + "/filler";
    {
      const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const std::string block(4096, 'f');
      while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {
      }
      ::close(fd);
    }
    const std::string big =
        "name: big\ntasks:\n  - gpus: 1\n    command: [sleep, \"60\"]\n    env: {PAD: " +
        std::string(100 * 1024, 'p') + "}\n";
    int status = 201;
    nlohmann::json answer;
    for (int i = 0; i < 100 && status == 201; ++i) answer = c.Post("/v1/jobs", big, &status);
    EXPECT_EQ(status, 503) << "the in-flight request got an answer, not a reset: " << answer.dump();
    const std::string message = answer.is_object() ? answer["error"].value("message", "") : "";
    EXPECT_EQ(
        message.rfind(
            "the store's disk is full: free space on hangar-store-full (mounted at " + small, 0),
        0u)
        << answer.dump();
    EXPECT_TRUE(Contains(message, "; nothing was accepted")) << message;
    EXPECT_TRUE(LocalCluster::WaitFor(
        [&] {
          return Contains(ReadFile(c.dir() + "/controller.log"),
                          "hangar controller: the store's disk is full");
        },
        20 * kSecond))
        << "the controller stops once, with the sentence: "
        << ReadFile(c.dir() + "/controller.log");

    // Started again while the disk is still full: it waits for room, it does not exit again.
    const std::string log = c.dir() + "/again.log", ports = c.dir() + "/again.json";
    std::vector<std::string> args = {"hangar"};
    for (const auto& a : ControllerArgs(c, url)) args.push_back(a);
    args.insert(args.end(), {"--port-file", ports});
    const pid_t again = SpawnHangar(args, log);
    EXPECT_TRUE(LocalCluster::WaitFor(
        [&] {
          const std::string text = ReadFile(log);
          const size_t first = text.find("the controller waits for room before it serves");
          return first != std::string::npos &&
                 text.find("the controller waits for room before it serves", first + 1) !=
                     std::string::npos;
        },
        30 * kSecond))
        << ReadFile(log);
    EXPECT_EQ(::waitpid(again, nullptr, WNOHANG), 0)
        << "it exited while the disk was full: " << ReadFile(log);
    std::filesystem::remove(filler);
    EXPECT_TRUE(LocalCluster::WaitFor([&] { return !ReadFile(ports).empty(); }, 30 * kSecond))
        << ReadFile(log);
    const auto port = nlohmann::json::parse(ReadFile(ports), nullptr, false);
    if (port.is_object()) {
      httplib::Client api("127.0.0.1", port.value("api", 0));
      auto job = api.Get("/v1/jobs/" + std::to_string(kept));
      ASSERT_TRUE(job);
      EXPECT_EQ(job->status, 200) << "what was accepted before the disk filled is kept: "
                                  << job->body;
    }
    ::kill(again, SIGTERM);
    ::waitpid(again, nullptr, 0);
  }
  ::umount2(small.c_str(), MNT_DETACH);
  std::filesystem::remove_all(small);
}

}  // namespace
}  // namespace hangar::testing
