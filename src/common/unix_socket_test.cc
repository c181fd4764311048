#include "common/unix_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/time.h"

namespace hangar::unix_socket {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/unix-socket-test-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(UnixSocketTest, APathTooLongForAnAddressBecomesAShortOneDerivedFromItsKey) {
  EXPECT_EQ(FitPath("/run/a.sock", "k", "p"), "/run/a.sock");
  const std::string deep = "/" + std::string(120, 'd') + "/agent.sock";
  const std::string fit = FitPath(deep, "/state", "hangar-agent");
  EXPECT_EQ(fit.rfind("/tmp/hangar-agent-" + std::to_string(getuid()) + "-", 0), 0u) << fit;
  EXPECT_LT(fit.size(), 108u);
  EXPECT_EQ(fit, FitPath(deep, "/state", "hangar-agent"));  // every caller finds the same one
  EXPECT_NE(fit, FitPath(deep, "/other", "hangar-agent"));
  EXPECT_EQ(StepSocketPath("/var/lib/hangar/agent.sock"), "/var/lib/hangar/agent.steps.sock");
  EXPECT_EQ(StepSocketPath(deep).rfind("/tmp/hangar-steps-", 0), 0u);
}

TEST(UnixSocketTest, ListenReplacesAStaleSocketButNoOtherFileAndAllowsEveryUser) {
  const std::string dir = TempDir();
  const std::string path = dir + "/a.sock";
  {
    auto first = Listen(path);
    ASSERT_TRUE(first.ok()) << first.status().message();
    Fd keep(*first);
    auto second = Listen(path);  // an earlier agent's socket is replaced
    ASSERT_TRUE(second.ok()) << second.status().message();
    Fd keep2(*second);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666u);
  }
  const std::string file = dir + "/plain";
  std::ofstream(file) << "not a socket";
  auto refused = Listen(file);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "a file that is not a socket is there");
  EXPECT_TRUE(std::filesystem::exists(file));
  EXPECT_FALSE(Listen("/" + std::string(200, 'x')).ok());
  auto nobody = Connect(dir + "/none.sock");
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable);
  std::filesystem::remove_all(dir);
}

TEST(UnixSocketTest, LinesGoAcrossWithWhatFollowsThemAndWithLimits) {
  const std::string dir = TempDir();
  const std::string path = dir + "/b.sock";
  auto listening = Listen(path);
  ASSERT_TRUE(listening.ok());
  Fd server(*listening);
  std::thread client([&] {
    auto c = Connect(path);
    ASSERT_TRUE(c.ok());
    Fd fd(*c);
    ASSERT_TRUE(WriteAll(fd.get(), "{\"op\":1}\nrest").ok());
  });
  Fd conn(accept(server.get(), nullptr, nullptr));
  ASSERT_GE(conn.get(), 0);
  std::string rest;
  auto line = ReadLine(conn.get(), MonotonicNanos() + 5'000'000'000, 1024, &rest);
  client.join();
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_EQ(*line, "{\"op\":1}");
  EXPECT_EQ(rest.substr(0, 4), "rest");
  // The end of the stream gives what came before it; nothing more comes in time -> Unavailable.
  auto tail = ReadLine(conn.get(), MonotonicNanos() + 1'000'000'000, 1024);
  ASSERT_TRUE(tail.ok());
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  Fd a(pair[0]), b(pair[1]);
  auto silent = ReadLine(a.get(), MonotonicNanos() + 50'000'000, 1024);
  EXPECT_EQ(silent.status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(WriteAll(b.get(), std::string(3000, 'z')).ok());
  auto big = ReadLine(a.get(), MonotonicNanos() + 1'000'000'000, 1024);
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hangar::unix_socket
