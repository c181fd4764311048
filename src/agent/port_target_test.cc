#include "agent/port_target.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace hangar::agent {
namespace {

// A listening socket of this process on 127.0.0.1 (a free port).
struct Listener {
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd, 8), 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
  int fd = -1;
  uint16_t port = 0;
};

TEST(PortTargetTest, ParsesListenersOnLoopbackAndAllAddressesOnly) {
  const std::string tcp =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 0 111 1\n"
      "   1: 00000000:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 0 222 1\n"
      "   2: 0A00000A:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 0 333 1\n"
      "   3: 0100007F:22B8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000 0 444 1\n"
      "   4: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 0 555 1\n";
  auto v4 = ParseTcpListeners(tcp, false, 0x22B8);  // 8888
  ASSERT_EQ(v4.size(), 2u) << "10.0.0.10 is not the loopback; an established socket is no listener";
  EXPECT_EQ(v4[0].inode, 111u);
  EXPECT_TRUE(v4[0].loopback);
  EXPECT_EQ(v4[1].inode, 222u);
  EXPECT_TRUE(v4[1].any);

  const std::string tcp6 =
      "  sl  local_address                         remote_address                        st "
      "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000000000000000000001000000:22B8 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000  1000 0 666 1\n"
      "   1: 0000000000000000FFFF00000100007F:22B8 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000  1000 0 777 1\n"
      "   2: 20010DB8000000000000000000000001:22B8 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000  1000 0 888 1\n";
  auto v6 = ParseTcpListeners(tcp6, true, 8888);
  ASSERT_EQ(v6.size(), 2u);
  EXPECT_EQ(v6[0].inode, 666u) << "::1";
  EXPECT_EQ(v6[1].inode, 777u) << "::ffff:127.0.0.1";
}

TEST(PortTargetTest, FindsOnlyAListenerHeldByTheTasksOwnProcesses) {
  Listener l;
  EXPECT_TRUE(FindTaskListener(getpid(), {getpid()}, l.port).ok())
      << "this process holds the listening socket";

  // A process that is not this one (nor under it) does not own this listener.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t other = fork();
  if (other == 0) {
    close(l.fd);  // the child must not hold the socket either
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  auto refused = FindTaskListener(getpid(), {other}, l.port);
  kill(other, SIGKILL);
  waitpid(other, nullptr, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("nothing of the task's listens on port " +
                                            std::to_string(l.port)),
            std::string::npos)
      << refused.status().message();

  const uint16_t closed = l.port;
  close(l.fd);
  l.fd = -1;
  EXPECT_FALSE(FindTaskListener(getpid(), {getpid()}, closed).ok()) << "no one listens any more";
}

TEST(PortTargetTest, ProcessTreeHoldsChildrenButNotTheParent) {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  usleep(50 * 1000);
  const auto under_me = ProcessTree({getpid()});
  const auto under_child = ProcessTree({child});
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_NE(std::find(under_me.begin(), under_me.end(), child), under_me.end());
  EXPECT_EQ(std::find(under_child.begin(), under_child.end(), getpid()), under_child.end());
}

TEST(PortTargetTest, ConnectsToTheLoopbackOfTheProcesssNamespace) {
  Listener l;
  auto fd = ConnectInNamespace(getpid(), PortTarget{}, l.port);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  const int served = accept(l.fd, nullptr, nullptr);
  ASSERT_GE(served, 0);
  ASSERT_EQ(write(served, "hi", 2), 2);
  char buf[8] = {};
  for (int i = 0; i < 100 && read(*fd, buf, sizeof buf) <= 0; ++i) usleep(10 * 1000);
  EXPECT_STREQ(buf, "hi");
  close(served);
  close(*fd);
}

}  // namespace
}  // namespace hangar::agent
