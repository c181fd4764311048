// Small socket helpers.
#pragma once

#include <string>

namespace hangar {

// True when a server could bind `host:port` right now: the probe binds with SO_REUSEADDR like the
// servers do, so sockets in TIME_WAIT (a server just stopped) do not count, and without
// SO_REUSEPORT, so a port another server listens on -- even with SO_REUSEPORT -- counts as taken.
// The probe socket is closed.
bool PortIsFree(const std::string& host, int port);
// A port on `host` that was free a moment ago (bound to port 0 and closed).
int PickFreePort(const std::string& host);
// Socket options for servers: SO_REUSEADDR only. (cpp-httplib's default adds SO_REUSEPORT, which
// lets a second server silently share a port with the first.)
void ExclusiveServerSocketOptions(int fd);

}  // namespace hangar
