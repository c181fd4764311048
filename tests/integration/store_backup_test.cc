// Issue 18: `hangar controller --store postgres://...`, and `hangar backup` / `hangar restore`
// between a SQLite store and a PostgreSQL one, with the real binary and a PostgreSQL server of the
// test's own.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "controller/store/testing/shared_postgres.h"
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

uint64_t Submit(LocalCluster& c, const std::string& name) {
  int status = 0;
  auto r = c.Post("/v1/jobs",
                  "name: " + name + "\ntasks:\n  - {gpus: 1, command: [sleep, \"60\"]}\n", &status);
  EXPECT_EQ(status, 201) << r.dump();
  return r.value("id", uint64_t{0});
}

TEST(StoreBackupTest, SqliteToPostgresAndBackThroughTheCommands) {
  // A SQLite controller with no agents, a waiting job and a cancelled one.
  LocalCluster sqlite(FourNodeTwoLeafCluster("backup"));
  sqlite.StartController();
  const uint64_t waiting = Submit(sqlite, "waiting");
  const uint64_t cancelled = Submit(sqlite, "cancelled");
  // A job whose environment holds a secret (issue 16): sealed in the store and in the backup.
  int status = 0;
  const uint64_t secret =
      sqlite
          .Post("/v1/jobs",
                "name: secret\ntasks:\n  - gpus: 1\n    command: [sleep, \"60\"]\n"
                "    env: {API_KEY: tiger-lily-42}\n",
                &status)
          .value("id", uint64_t{0});
  ASSERT_EQ(status, 201);
  status = 0;
  sqlite.Post("/v1/jobs/" + std::to_string(cancelled) + "/cancel", "", &status);
  ASSERT_EQ(status, 200);
  const std::string db = "sqlite://" + sqlite.dir() + "/state.db",
                    file = sqlite.dir() + "/backup.jsonl";

  Ran busy = RunHangar({"backup", "--store", db, "--out", file}, sqlite.dir());
  EXPECT_EQ(busy.rc, 2);
  EXPECT_TRUE(Contains(busy.output, "is in use by another controller")) << busy.output;
  EXPECT_TRUE(
      Contains(busy.output,
               "a SQLite store has one owner: stop that controller, then back up (a PostgreSQL "
               "store can be backed up while its controllers run)"))
      << busy.output;
  EXPECT_FALSE(std::filesystem::exists(file));

  sqlite.KillController(SIGTERM);
  Ran backup = RunHangar({"backup", "--store", db, "--out", file}, sqlite.dir());
  ASSERT_EQ(backup.rc, 0) << backup.output;
  EXPECT_TRUE(Contains(backup.output, "backed up " + db + " to " + file + ": 3 jobs, "))
      << backup.output;
  EXPECT_FALSE(Contains(ReadFile(file), "tiger-lily-42"));
  EXPECT_TRUE(Contains(ReadFile(file), "hangar-sealed:v1:"));
  for (const char* f : {"/state.db", "/state.db-wal"})
    EXPECT_FALSE(Contains(ReadFile(sqlite.dir() + f), "tiger-lily-42")) << f;
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  const std::string pg = controller::testing::FreshDatabaseUrl();
  Ran restore = RunHangar({"restore", "--store", pg, "--in", file}, sqlite.dir());
  ASSERT_EQ(restore.rc, 0) << restore.output;
  EXPECT_TRUE(Contains(restore.output, "restored " + file + " into " + pg + ": 3 jobs, "))
      << restore.output;
  Ran again = RunHangar({"restore", "--store", pg, "--in", file}, sqlite.dir());
  EXPECT_EQ(again.rc, 2);
  EXPECT_TRUE(
      Contains(again.output,
               "the store " + pg + " is not empty; restore into an empty store, or add --force"))
      << again.output;
  Ran forced = RunHangar({"restore", "--store", pg, "--in", file, "--force"}, sqlite.dir());
  EXPECT_EQ(forced.rc, 0) << forced.output;

  // Without the SQLite store's secrets key, a controller cannot open the sealed environment: it
  // refuses to start and says what to give it.
  Ran keyless =
      RunHangar({"controller", "--cluster", sqlite.dir() + "/cluster.yaml", "--store", pg, "--auth",
                 "none", "--insecure", "--api", "127.0.0.1:0", "--agents", "127.0.0.1:0"},
                sqlite.dir());
  EXPECT_NE(keyless.rc, 0);
  EXPECT_TRUE(Contains(keyless.output,
                       "this store holds job environments sealed with a secrets key, and the "
                       "controller has none; give it --secrets-key FILE"))
      << keyless.output;
  // A controller on the PostgreSQL store, with the key, carries on where the SQLite one stopped.
  LocalCluster postgres(FourNodeTwoLeafCluster("backup"),
                        {"--store", pg, "--secrets-key", sqlite.dir() + "/state.db.key"});
  postgres.StartController();
  EXPECT_EQ(postgres.Job(secret)["spec"]["tasks"][0]["env"]["API_KEY"], "tiger-lily-42")
      << postgres.Job(secret).dump();
  EXPECT_EQ(postgres.Job(waiting)["state"], "pending") << postgres.Job(waiting).dump();
  EXPECT_EQ(postgres.Job(cancelled)["state"], "cancelled");
  const uint64_t next = Submit(postgres, "after");
  EXPECT_EQ(next, secret + 1) << "job ids go on from the restored store";
  postgres.KillController(SIGTERM);

  // And back into a new SQLite store, from a backup of the PostgreSQL one.
  const std::string file2 = sqlite.dir() + "/from-pg.jsonl",
                    db2 = "sqlite://" + sqlite.dir() + "/again.db";
  ASSERT_EQ(RunHangar({"backup", "--store", pg, "--out", file2}, sqlite.dir()).rc, 0);
  Ran back = RunHangar({"restore", "--store", db2, "--in", file2}, sqlite.dir());
  ASSERT_EQ(back.rc, 0) << back.output;
  EXPECT_TRUE(Contains(back.output, ": 4 jobs, ")) << back.output;
}

TEST(StoreBackupTest, BadInputIsExplained) {
  const std::string dir = ::testing::TempDir() + "/backup-bad-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  Ran missing = RunHangar(
      {"restore", "--store", "sqlite://" + dir + "/s.db", "--in", dir + "/nope.jsonl"}, dir);
  EXPECT_EQ(missing.rc, 2);
  EXPECT_TRUE(Contains(missing.output, "cannot read " + dir + "/nope.jsonl; check the path"))
      << missing.output;
  Ran unreachable = RunHangar(
      {"backup", "--store", "postgres://hangar:pw@127.0.0.1:1/hangar", "--out", dir + "/b"}, dir);
  EXPECT_EQ(unreachable.rc, 2);
  EXPECT_TRUE(
      Contains(unreachable.output, "cannot reach the store postgres://hangar@127.0.0.1:1/hangar"))
      << unreachable.output;
  EXPECT_FALSE(Contains(unreachable.output, "pw@"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hangar::testing
