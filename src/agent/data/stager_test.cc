#include "agent/data/stager.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "agent/data/data_server.h"
#include "agent/data/test_dir.h"

namespace hangar::agent::data {
namespace {

using ::testing::HasSubstr;

struct Origin {
  std::string content;
  std::string path;
  std::string digest;
};

Origin MakeOrigin(const std::string& dir, int64_t bytes, uint32_t seed = 7) {
  Origin o;
  std::mt19937 rng(seed);
  o.content.resize(static_cast<size_t>(bytes));
  for (auto& c : o.content) c = static_cast<char>(rng());
  o.path = dir + "/origin.bin";
  std::ofstream(o.path, std::ios::binary) << o.content;
  const int fd = ::open(o.path.c_str(), O_RDONLY);
  o.digest = *Sha256OfFile(fd, bytes);
  ::close(fd);
  return o;
}

pb::ArtifactStage Plan(const Origin& o, const std::string& source, int64_t chunk,
                       const std::vector<std::string>& peers, int32_t each_chunk_from) {
  pb::ArtifactStage s;
  s.set_digest(o.digest);
  s.set_source(source);
  s.set_bytes(static_cast<int64_t>(o.content.size()));
  s.set_chunk_bytes(chunk);
  for (const auto& p : peers) s.add_peers(p);
  s.add_file_roots(std::filesystem::path(o.path).parent_path().string());  // the test's folder
  for (int64_t c = 0; c < (s.bytes() + chunk - 1) / chunk; ++c) s.add_chunk_source(each_chunk_from);
  return s;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class StagerTest : public ::testing::Test {
 protected:
  TempDir dir_;
  SystemClock clock_;
  std::atomic<bool> stop_{false};
};

TEST_F(StagerTest, StagesFromAFileOriginAndVerifies) {
  Origin o = MakeOrigin(dir_.path(), 3'000'001);
  ObjectCache cache(dir_.path() + "/a", 0);
  ASSERT_TRUE(cache.Init(1).ok());
  Stager st(
      &cache, [] { return "t"; }, &clock_);
  StageOutcome out = st.Stage(Plan(o, "file://" + o.path, 1 << 20, {}, -1), std::nullopt, &stop_);
  ASSERT_TRUE(out.ok) << out.message;
  EXPECT_EQ(out.origin_bytes, 3'000'001);
  EXPECT_EQ(Read(cache.PathOf(o.digest)), o.content);
  // Held: staging again reads nothing.
  StageOutcome again = st.Stage(Plan(o, "file://" + o.path, 1 << 20, {}, -1), std::nullopt, &stop_);
  EXPECT_TRUE(again.ok);
  EXPECT_EQ(again.origin_bytes, 0);
}

TEST_F(StagerTest, ACorruptedOriginFailsWithWhatItHashedTo) {
  Origin o = MakeOrigin(dir_.path(), 100'000);
  std::string bad = o.content;
  bad[5000] ^= 1;
  std::ofstream(o.path, std::ios::binary) << bad;
  ObjectCache cache(dir_.path() + "/a", 0);
  ASSERT_TRUE(cache.Init(1).ok());
  Stager st(
      &cache, [] { return "t"; }, &clock_);
  StageOutcome out = st.Stage(Plan(o, "file://" + o.path, 1 << 16, {}, -1), std::nullopt, &stop_);
  ASSERT_FALSE(out.ok);
  EXPECT_THAT(out.message, HasSubstr("hashes to sha256:"));
  EXPECT_THAT(out.message, HasSubstr("not " + o.digest));
  EXPECT_THAT(out.message, HasSubstr("origin copy is not what the job names"));
  EXPECT_FALSE(cache.Holds(o.digest));
  // A size that is not the file's is named too.
  pb::ArtifactStage wrong = Plan(o, "file://" + o.path, 1 << 16, {}, -1);
  wrong.set_bytes(99'999);
  StageOutcome sized = st.Stage(wrong, std::nullopt, &stop_);
  EXPECT_THAT(sized.message, HasSubstr("is 100000 bytes, not the 99999"));
}

TEST_F(StagerTest, StagesOverHttpWithRangeRequests) {
  Origin o = MakeOrigin(dir_.path(), 2'500'000);
  httplib::Server origin;
  std::atomic<int> ranged{0};
  origin.Get("/w.bin", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Range")) ++ranged;
    res.set_content(o.content, "application/octet-stream");
  });
  const int port = origin.bind_to_any_port("127.0.0.1");
  std::thread t([&] { origin.listen_after_bind(); });
  ObjectCache cache(dir_.path() + "/a", 0);
  ASSERT_TRUE(cache.Init(1).ok());
  Stager st(
      &cache, [] { return "t"; }, &clock_);
  StageOutcome out =
      st.Stage(Plan(o, "http://127.0.0.1:" + std::to_string(port) + "/w.bin", 1 << 20, {}, -1),
               std::nullopt, &stop_);
  origin.stop();
  t.join();
  ASSERT_TRUE(out.ok) << out.message;
  EXPECT_EQ(ranged.load(), 3);
  EXPECT_EQ(Read(cache.PathOf(o.digest)), o.content);
}

TEST_F(StagerTest, APeerPassesChunksOnWhileItIsStillStagingThem) {
  Origin o = MakeOrigin(dir_.path(), 4'000'000);
  ObjectCache a(dir_.path() + "/a", 0), b(dir_.path() + "/b", 0);
  ASSERT_TRUE(a.Init(1).ok());
  ASSERT_TRUE(b.Init(1).ok());
  DataServer server(&a);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  server.SetToken("secret");
  // A stages from the origin slowly: chunk by chunk, by hand.
  auto p = a.Begin(o.digest, 4'000'000, 1 << 20);
  ASSERT_TRUE(p.ok());
  Stager sb(
      &b, [] { return "secret"; }, &clock_);
  StageOutcome out;
  std::thread t([&] {
    out = sb.Stage(Plan(o, "http://127.0.0.1:1/never-read", 1 << 20, {server.url()}, 0),
                   std::nullopt, &stop_);
  });
  for (int64_t c = 0; c < 4; ++c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    auto [off, len] = (*p)->ChunkRange(c);
    ASSERT_TRUE((*p)->Write(c, o.content.substr(off, len)).ok());
  }
  t.join();
  ASSERT_TRUE(out.ok) << out.message;
  EXPECT_EQ(out.peer_bytes, 4'000'000);
  EXPECT_EQ(out.origin_bytes, 0);
  EXPECT_EQ(Read(b.PathOf(o.digest)), o.content);
  EXPECT_EQ(server.bytes_served(), 4'000'000);
}

TEST_F(StagerTest, AChunkAPeerCannotGiveComesFromTheOrigin) {
  Origin o = MakeOrigin(dir_.path(), 2'000'000);
  ObjectCache a(dir_.path() + "/a", 0), b(dir_.path() + "/b", 0);
  ASSERT_TRUE(a.Init(1).ok());
  ASSERT_TRUE(b.Init(1).ok());
  DataServer server(&a);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  server.SetToken("secret");
  // The peer holds nothing; and a wrong token is refused like a missing object.
  Stager sb(
      &b, [] { return "wrong"; }, &clock_);
  StageOutcome out =
      sb.Stage(Plan(o, "file://" + o.path, 1 << 20, {server.url()}, 0), std::nullopt, &stop_);
  ASSERT_TRUE(out.ok) << out.message;
  EXPECT_EQ(out.origin_bytes, 2'000'000);
  EXPECT_EQ(out.peer_bytes, 0);
  httplib::Client c(server.url());
  auto unauth = c.Get("/v1/objects/" + o.digest);
  ASSERT_TRUE(unauth);
  EXPECT_EQ(unauth->status, 401);
}

TEST_F(StagerTest, APeerThatServesBadBytesCannotFailTheStaging) {
  Origin o = MakeOrigin(dir_.path(), 1'000'000);
  ObjectCache a(dir_.path() + "/a", 0), b(dir_.path() + "/b", 0);
  ASSERT_TRUE(a.Init(1).ok());
  ASSERT_TRUE(b.Init(1).ok());
  // A bad peer: it holds other bytes under this digest (a disk that flipped bits).
  auto p = a.Begin(o.digest, 1'000'000, 1'000'000);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Write(0, std::string(1'000'000, 'x')).ok());
  DataServer server(&a);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  server.SetToken("s");
  Stager sb(
      &b, [] { return "s"; }, &clock_);
  StageOutcome out =
      sb.Stage(Plan(o, "file://" + o.path, 1 << 18, {server.url()}, 0), std::nullopt, &stop_);
  ASSERT_TRUE(out.ok) << out.message;
  EXPECT_EQ(out.peer_bytes, 1'000'000);
  EXPECT_EQ(out.origin_bytes, 1'000'000);  // staged again from the origin alone
  EXPECT_EQ(Read(b.PathOf(o.digest)), o.content);
}

TEST_F(StagerTest, WholeObjectsHonourRange) {
  Origin o = MakeOrigin(dir_.path(), 100'000);
  ObjectCache a(dir_.path() + "/a", 0);
  ASSERT_TRUE(a.Init(1).ok());
  Stager sa(
      &a, [] { return "s"; }, &clock_);
  ASSERT_TRUE(sa.Stage(Plan(o, "file://" + o.path, 1 << 20, {}, -1), std::nullopt, &stop_).ok);
  DataServer server(&a);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  server.SetToken("s");
  httplib::Client c(server.url());
  auto r =
      c.Get("/v1/objects/" + o.digest, {{"Authorization", "Bearer s"}, {"Range", "bytes=10-19"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 206);
  EXPECT_EQ(r->body, o.content.substr(10, 10));
  auto whole = c.Get("/v1/objects/" + o.digest, {{"Authorization", "Bearer s"}});
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->body, o.content);
  auto missing =
      c.Get("/v1/objects/sha256:" + std::string(64, '0'), {{"Authorization", "Bearer s"}});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(SplitHostPortTest, ReadsHostAndPort) {
  EXPECT_EQ(SplitHostPort("10.0.0.1:7071")->second, 7071);
  EXPECT_EQ(SplitHostPort("[::1]:0")->first, "::1");
  EXPECT_FALSE(SplitHostPort("10.0.0.1").ok());
  EXPECT_FALSE(SplitHostPort("h:99999").ok());
}

}  // namespace
}  // namespace hangar::agent::data
