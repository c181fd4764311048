#include "agent/pty.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace hangar::agent {

StatusOr<std::pair<int, int>> OpenTerminalPair() {
  const int leader = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (leader < 0) {
    return Status::Unavailable(std::string("cannot open a pseudo-terminal on this node: ") +
                               std::strerror(errno));
  }
  char name[128];
  if (grantpt(leader) != 0 || unlockpt(leader) != 0 || ptsname_r(leader, name, sizeof name) != 0) {
    const int e = errno;
    close(leader);
    return Status::Unavailable(std::string("cannot prepare a pseudo-terminal on this node: ") +
                               std::strerror(e));
  }
  const int follower = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (follower < 0) {
    const int e = errno;
    close(leader);
    return Status::Unavailable(std::string("cannot open ") + name + ": " + std::strerror(e));
  }
  fcntl(leader, F_SETFL, fcntl(leader, F_GETFL) | O_NONBLOCK);
  return std::make_pair(leader, follower);
}

void SetWindowSize(int leader, uint32_t rows, uint32_t cols) {
  if (leader < 0 || rows == 0 || cols == 0) return;
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(std::min<uint32_t>(rows, 10000));
  ws.ws_col = static_cast<unsigned short>(std::min<uint32_t>(cols, 10000));
  ioctl(leader, TIOCSWINSZ, &ws);
}

void SignalForeground(int leader, pid_t pgid, int sig) {
  const pid_t fg = leader >= 0 ? tcgetpgrp(leader) : -1;
  if (fg > 0) {
    kill(-fg, sig);
  } else if (pgid > 0) {
    kill(-pgid, sig);
  }
}

}  // namespace hangar::agent
