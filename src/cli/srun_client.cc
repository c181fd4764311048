#include "cli/srun_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/unix_socket.h"

namespace hangar::cli {

namespace {

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

StatusOr<StepFrame> RunStepRequest(const std::string& path, const std::string& request_json,
                                   const std::function<void(const StepFrame&)>& on_frame) {
  auto connected = unix_socket::Connect(path);
  if (!connected.ok()) {
    return Status::Unavailable("cannot reach the node's agent at " + path + ": " +
                               std::string(connected.status().message()));
  }
  const unix_socket::Fd conn(*connected);
  const int fd = conn.get();
  if (!unix_socket::WriteAll(fd, request_json + "\n").ok())
    return Status::Unavailable("the node's agent closed the step socket");
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
