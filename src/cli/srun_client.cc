#include "cli/srun_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace hangar::cli {

namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Reads from `fd` into `buf` until it holds at least `want` bytes; false at the end or an error.
bool Fill(int fd, std::string* buf, size_t want) {
  char chunk[65536];
  while (buf->size() < want) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf->append(chunk, static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string StepSocketPathFor(const std::string& agent_socket) {
  std::string base = agent_socket;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".sock") == 0)
    base.resize(base.size() - 5);
  std::string path = base + ".steps.sock";
  if (path.size() < sizeof(sockaddr_un{}.sun_path)) return path;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(Fnv1a(agent_socket)));
  return "/tmp/hangar-steps-" + std::to_string(getuid()) + "-" + hash + ".sock";
}

StatusOr<StepFrame> RunStepRequest(const std::string& path, const std::string& request_json,
                                   const std::function<void(const StepFrame&)>& on_frame) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return Status::Unavailable("the step socket path '" + path + "' is empty or too long");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::Unavailable("cannot reach the node's agent at " + path + ": " +
                               std::strerror(errno));
  }
  const std::string line = request_json + "\n";
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable("the node's agent closed the step socket");
    done += static_cast<size_t>(n);
  }
  std::string buf;
  for (;;) {
    size_t nl;
    while ((nl = buf.find('\n')) == std::string::npos) {
      if (!Fill(fd, &buf, buf.size() + 1)) {
        return Status::Unavailable("the node's agent went away before the step ended");
      }
    }
    auto h = nlohmann::json::parse(buf.substr(0, nl), nullptr, false);
    buf.erase(0, nl + 1);
    if (!h.is_object())
      return Status::Unavailable("the node's agent answered what is not a step frame");
    StepFrame f;
    const size_t out = h.value("out", size_t{0}), err = h.value("err", size_t{0});
    if (!Fill(fd, &buf, out + err))
      return Status::Unavailable("the node's agent went away mid-frame");
    f.out = buf.substr(0, out);
    f.err = buf.substr(out, err);
    buf.erase(0, out + err);
    f.started = h.value("started", false);
    f.ended = h.value("ended", false);
    f.procid = h.value("procid", -1);
    f.exit_code = h.value("exit_code", 0);
    f.error = h.value("error", "");
    f.nodelist = h.value("nodelist", "");
    f.step_id = h.value("step_id", -1);
    on_frame(f);
    if (f.ended) return f;
  }
}

}  // namespace hangar::cli
