// `hangar` inside a container task: a small static program the agent mounts at
// /.hangar/bin/hangar, since the real binary's shared libraries are not in the image. It does
// what a task asks of its agent -- today `hangar checkpoint-done [--path P] [--step N]` -- over
// the agent's socket (HANGAR_AGENT_SOCKET, mounted into the container), with the protocol of
// agent/checkpoint_socket.h. Only libc, so it links statically.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "hangar checkpoint-done: %s\n", why.c_str());
  return 2;
}

int CheckpointDone(int argc, char** argv) {
  std::string path, step, task = std::getenv("HANGAR_TASK_ID") ? std::getenv("HANGAR_TASK_ID") : "";
  std::string sock = std::getenv("HANGAR_AGENT_SOCKET") ? std::getenv("HANGAR_AGENT_SOCKET") : "";
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--path")
      path = v, ++i;
    else if (a == "--step")
      step = v, ++i;
    else if (a == "--task-id")
      task = v, ++i;
    else if (a == "--socket")
      sock = v, ++i;
    else if (a == "--timeout")
      ++i;
    else
      return Fail("unknown option '" + a + "'; use --path, --step, --task-id, --socket");
  }
  if (task.empty() || sock.empty())
    return Fail(
        "HANGAR_TASK_ID and HANGAR_AGENT_SOCKET are not set: run this inside a Hangar task");
  if (!step.empty() && step.find_first_not_of("0123456789") != std::string::npos)
    return Fail("--step must be a number");
  if (!path.empty() && path[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd)) path = std::string(cwd) + "/" + path;
  }
  std::string req = "{\"op\":\"checkpoint_done\",\"task_id\":" + Quote(task);
  if (!path.empty()) req += ",\"path\":" + Quote(path);
  if (!step.empty()) req += ",\"step\":" + step;
  req += "}\n";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (sock.size() >= sizeof addr.sun_path) return Fail("socket path too long: " + sock);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Fail("cannot reach the agent at " + sock + ": " + std::strerror(errno));
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size()))
    return Fail("cannot write to the agent");
  std::string answer;
  char buf[512];
  for (ssize_t n; answer.find('\n') == std::string::npos && (n = read(fd, buf, sizeof buf)) > 0;)
    answer.append(buf, n);
  close(fd);
  if (answer.find("\"ok\":true") == std::string::npos &&
      answer.find("\"ok\": true") == std::string::npos) {
    return Fail("the agent refused: " + (answer.empty() ? std::string("no answer") : answer));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "checkpoint-done") == 0) return CheckpointDone(argc, argv);
  std::fprintf(stderr,
               "inside a container task this 'hangar' only does: hangar checkpoint-done [--path P] "
               "[--step N]\n");
  return 2;
}
