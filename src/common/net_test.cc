#include "common/net.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hangar {
namespace {

int Listen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ExclusiveServerSocketOptions(fd);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 4) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(NetPortProbe, ListeningPortIsTaken) {
  const int port = PickFreePort("127.0.0.1");
  ASSERT_GT(port, 0);
  const int fd = Listen(port);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(PortIsFree("127.0.0.1", port));
  close(fd);
  EXPECT_TRUE(PortIsFree("127.0.0.1", port));
}

// A server that closed its connections first leaves them in TIME_WAIT for a minute; restarting
// it on the same port works (SO_REUSEADDR), so the probe must not call the port taken.
TEST(NetPortProbe, TimeWaitDoesNotMakeAPortTaken) {
  const int port = PickFreePort("127.0.0.1");
  ASSERT_GT(port, 0);
  const int listener = Listen(port);
  ASSERT_GE(listener, 0);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int served = accept(listener, nullptr, nullptr);
  ASSERT_GE(served, 0);
  close(served);  // the server closes first: its end goes to TIME_WAIT
  char buf[1];
  EXPECT_EQ(read(client, buf, 1), 0);  // the client sees the close
  close(client);
  close(listener);
  EXPECT_TRUE(PortIsFree("127.0.0.1", port));
  const int again = Listen(port);  // and a server really can bind it again
  EXPECT_GE(again, 0);
  if (again >= 0) close(again);
}

}  // namespace
}  // namespace hangar
