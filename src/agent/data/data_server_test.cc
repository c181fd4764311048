// The data port answers a range it cannot give with 416 and the object's size, never with 206 and
// no bytes, and never with 500.
#include "agent/data/data_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <fstream>

#include "agent/data/test_dir.h"

namespace hangar::agent::data {
namespace {

TEST(ParseRangeTest, OneRangeWithinTheObjectOrNothing) {
  using K = RangeAsked;
  EXPECT_EQ(ParseRange("", 100).kind, K::kWhole);
  RangeAsked r = ParseRange("bytes=10-19", 100);
  EXPECT_EQ(r.kind, K::kPart);
  EXPECT_EQ(r.first, 10);
  EXPECT_EQ(r.last, 19);
  EXPECT_EQ(ParseRange("bytes=90-200", 100).last, 99);
  EXPECT_EQ(ParseRange("bytes=95-", 100).last, 99);
  EXPECT_EQ(ParseRange("bytes=-5", 100).first, 95);
  EXPECT_EQ(ParseRange("bytes=-500", 100).first, 0);
  for (const char* bad :
       {"bytes=100-", "bytes=100-200", "bytes=20-10", "bytes=-0", "bytes=9223372036854775807-",
        "bytes=99999999999999999999-", "bytes=0-99999999999999999999", "bytes=1-2,5-6", "bytes=x-1",
        "items=0-1", "bytes=-"}) {
    EXPECT_EQ(ParseRange(bad, 100).kind, K::kUnsatisfiable) << bad;
  }
}

class DataServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cache_.Init(1).ok());
    content_ = std::string(100'000, 'a');
    for (size_t i = 0; i < content_.size(); ++i) content_[i] = static_cast<char>('a' + i % 26);
    const std::string tmp = dir_.path() + "/o";
    std::ofstream(tmp) << content_;
    const int fd = ::open(tmp.c_str(), O_RDONLY);
    digest_ = *Sha256OfFile(fd, 100'000);
    ::close(fd);
    auto p = cache_.Begin(digest_, 100'000, 1 << 20);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE((*p)->Write(0, content_).ok());
    ASSERT_TRUE(cache_.Commit(*p, 1).ok());
    ASSERT_TRUE(server_.Start("127.0.0.1:0").ok());
    server_.SetToken("s");
  }
  httplib::Result Get(const std::string& range, const std::string& query = "") {
    httplib::Client c(server_.url());
    httplib::Headers h{{"Authorization", "Bearer s"}};
    if (!range.empty()) h.emplace("Range", range);
    return c.Get("/v1/objects/" + digest_ + query, h);
  }
  TempDir dir_;
  ObjectCache cache_{dir_.path() + "/cache", 0};
  DataServer server_{&cache_};
  std::string content_, digest_;
};

TEST_F(DataServerTest, ARangePastTheEndIs416WithTheSize) {
  for (const char* range : {"bytes=100000-", "bytes=100000-100009", "bytes=200000-"}) {
    auto r = Get(range);
    ASSERT_TRUE(r) << range;
    EXPECT_EQ(r->status, 416) << range << ": " << r->body.size() << " bytes";
    EXPECT_EQ(r->get_header_value("Content-Range"), "bytes */100000") << range;
  }
}

TEST_F(DataServerTest, AnOverflowingOffsetIsRefusedNotA500) {
  for (const char* range :
       {"bytes=9223372036854775807-", "bytes=9223372036854775807-9223372036854775807",
        "bytes=99999999999999999999-"}) {
    auto r = Get(range);
    ASSERT_TRUE(r) << range;
    EXPECT_TRUE(r->status == 416 || r->status == 400) << range << ": " << r->status;
  }
  for (const char* query :
       {"?offset=9223372036854775807&length=10", "?offset=10&length=9223372036854775807",
        "?offset=99999999999999999999&length=1"}) {
    auto r = Get("", query);
    ASSERT_TRUE(r) << query;
    EXPECT_TRUE(r->status == 416 || r->status == 400) << query << ": " << r->status;
  }
}

TEST_F(DataServerTest, ARangeWithinIs206WithItsBytes) {
  auto r = Get("bytes=99990-200000");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 206);
  EXPECT_EQ(r->body, content_.substr(99990));
  EXPECT_EQ(r->get_header_value("Content-Range"), "bytes 99990-99999/100000");
  auto suffix = Get("bytes=-3");
  ASSERT_TRUE(suffix);
  EXPECT_EQ(suffix->status, 206);
  EXPECT_EQ(suffix->body, content_.substr(99997));
  auto whole = Get("");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(whole->body, content_);
}

}  // namespace
}  // namespace hangar::agent::data
