// Issue 16: job environments are sealed in the store and open only with the controller's key.
#include "controller/state/secret_sealer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/store/state_store.h"
#include "job/job_spec.h"

namespace hangar::controller {
namespace {

namespace fs = std::filesystem;

const std::string kKey(32, 'k');
constexpr const char* kSpec =
    R"({"name":"j","tasks":[{"command":["x"],"env":{"API_KEY":"s3cret-value","MODE":"fast"},"gpus":1}]})";

TEST(SecretSealerTest, SealsEveryEnvValueAndOpensThemAgain) {
  auto sealer = SecretSealer::FromKey(kKey);
  const std::string stored = sealer->Seal(kSpec);
  EXPECT_EQ(stored.find("s3cret-value"), std::string::npos) << stored;
  EXPECT_EQ(stored.find("fast"), std::string::npos) << stored;
  EXPECT_NE(stored.find("\"API_KEY\":\"hangar-sealed:v1:" + sealer->key_id() + ":"),
            std::string::npos)
      << stored;
  EXPECT_TRUE(HasSealedValues(stored));
  auto plain = sealer->Unseal(stored);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*plain), nlohmann::json::parse(kSpec));
  // Sealing twice gives different text (a fresh nonce) that opens to the same spec.
  EXPECT_NE(sealer->Seal(kSpec), stored);
  // A spec with no environment is kept as it is, and plain stored values read as they are.
  const std::string none = R"({"name":"j","tasks":[{"command":["x"],"gpus":1}]})";
  EXPECT_EQ(sealer->Seal(none), none);
  EXPECT_EQ(*sealer->Unseal(kSpec), kSpec);
}

TEST(SecretSealerTest, AWrongKeyAMissingKeyAndAnAlteredValueAreEachNamed) {
  auto sealer = SecretSealer::FromKey(kKey, "/etc/hangar/a.key");
  const std::string stored = sealer->Seal(kSpec);
  auto other = SecretSealer::FromKey(std::string(32, 'o'), "/etc/hangar/b.key");
  auto wrong = other->Unseal(stored);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("was sealed with the secrets key " + sealer->key_id() +
                                          ", and this controller's key (/etc/hangar/b.key) is " +
                                          other->key_id()),
            std::string::npos)
      << wrong.status().message();
  auto none = UnsealSpec(nullptr, stored);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("give it --secrets-key FILE"), std::string::npos)
      << none.status().message();
  EXPECT_EQ(*UnsealSpec(nullptr, kSpec), kSpec);
  // One character of a value's ciphertext changed; and a value moved to another name.
  auto j = nlohmann::json::parse(stored);
  std::string v = j["tasks"][0]["env"]["API_KEY"];
  v[v.size() - 6] = v[v.size() - 6] == 'A' ? 'B' : 'A';
  j["tasks"][0]["env"]["API_KEY"] = v;
  auto altered = sealer->Unseal(j.dump());
  ASSERT_FALSE(altered.ok());
  EXPECT_NE(altered.status().message().find("it was altered in the store"), std::string::npos);
  auto moved = nlohmann::json::parse(stored);
  moved["tasks"][0]["env"]["MODE"] = moved["tasks"][0]["env"]["API_KEY"];
  EXPECT_FALSE(sealer->Unseal(moved.dump()).ok());
}

TEST(SecretSealerTest, AKeyFileIsMadeOnceWithMode0600AndAnOpenOneIsRefused) {
  const std::string dir = ::testing::TempDir() + "/sealer-" + std::to_string(::getpid());
  fs::create_directories(dir);
  const std::string path = dir + "/state.db.key";
  fs::remove(path);
  EXPECT_FALSE(SecretSealer::FromKeyFile(path, false).ok());
  auto made = SecretSealer::FromKeyFile(path, true);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = SecretSealer::FromKeyFile(path, true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->key_id(), (*made)->key_id());
  EXPECT_EQ(*(*again)->Unseal((*made)->Seal(kSpec)), (*made)->Unseal((*made)->Seal(kSpec)).value());
  ::chmod(path.c_str(), 0644);
  auto open = SecretSealer::FromKeyFile(path, false);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("is readable by others (mode 644); chmod 600"),
            std::string::npos)
      << open.status().message();
  std::ofstream(path) << "not hex\n";
  ::chmod(path.c_str(), 0600);
  EXPECT_NE(SecretSealer::FromKeyFile(path, false).status().message().find("is not 64 hex digits"),
            std::string::npos);
  fs::remove_all(dir);
}

std::shared_ptr<const cluster::Topology> OneNode() {
  auto t = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: "
      "[{name: a}]\n",
      "c.yaml");
  return t.ok() ? t->topology : nullptr;
}

std::unique_ptr<ClusterState> MakeState(std::shared_ptr<const SecretSealer> sealer) {
  ControllerOptions o;
  o.require_validation = false;
  o.sealer = std::move(sealer);
  return std::make_unique<ClusterState>(OneNode(), o,
                                        std::move(sched::Scheduler::Create({})).value());
}

// Through the controller's state: the store's rows hold no value, a restore with the key gives the
// job its environment back, and a restore without it (or with another) is refused with the reason.
TEST(SecretSealerTest, TheStoreNeverHoldsAValueAndARestoreNeedsTheKey) {
  auto sealer = SecretSealer::FromKey(kKey);
  auto state = MakeState(sealer);
  Effects fx;
  auto spec = job::ParseJobSpec(
      "name: j\ntasks:\n  - gpus: 1\n    command: [x]\n    env: {API_KEY: s3cret-value}\n", "test");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(state->Submit(*spec, 10, &fx).ok());
  ASSERT_TRUE(state->Submit(*spec, 11, &fx).ok());
  auto store = NewMemoryStore();
  ASSERT_TRUE(store->Commit(fx.batch).ok());
  auto contents = store->Load();
  ASSERT_TRUE(contents.ok());
  ASSERT_EQ(contents->jobs.size(), 2u);
  for (const auto& row : contents->jobs) {
    EXPECT_EQ(row.spec_text().find("s3cret-value"), std::string::npos) << row.spec_text();
    EXPECT_TRUE(HasSealedValues(row.spec_text()));
  }
  // The API's view (and the launch) has the plain value.
  EXPECT_EQ(state->GetJob(1)->spec["tasks"][0]["env"]["API_KEY"], "s3cret-value");

  auto again = MakeState(sealer);
  ASSERT_TRUE(again->Restore(*contents, 100).ok());
  EXPECT_EQ(again->GetJob(2)->spec["tasks"][0]["env"]["API_KEY"], "s3cret-value");
  Status none = MakeState(nullptr)->Restore(*contents, 100);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find("job 1: this store holds job environments sealed"),
            std::string::npos)
      << none.message();
  Status wrong = MakeState(SecretSealer::FromKey(std::string(32, 'w')))->Restore(*contents, 100);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("was sealed with the secrets key " + sealer->key_id()),
            std::string::npos);
}

}  // namespace
}  // namespace hangar::controller
