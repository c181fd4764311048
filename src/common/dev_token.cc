#include "common/dev_token.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace hangar::dev_token {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// `dir` and its missing parents made; `dir` itself 0700 and this account's.
Status MakePrivateDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create " + dir + ": " + ec.message());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return Status::FailedPrecondition(
        dir + " is not a folder of this account's; remove it and start again");
  }
  if ((st.st_mode & 0777) != 0700 && ::chmod(dir.c_str(), 0700) != 0) {
    return Status::Unavailable("cannot make " + dir +
                               " private (chmod 0700): " + std::strerror(errno));
  }
  return Status::Ok();
}

bool Alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// The port of a loopback `server` URL, or 0 when it is not one.
int LoopbackPort(std::string s) {
  if (const size_t scheme = s.find("://"); scheme != std::string::npos) s = s.substr(scheme + 3);
  s = s.substr(0, s.find('/'));
  std::string host, port;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos) return 0;
    host = s.substr(1, close - 1);
    if (close + 1 < s.size() && s[close + 1] == ':') port = s.substr(close + 2);
  } else {
    const size_t colon = s.rfind(':');
    host = s.substr(0, colon);
    if (colon != std::string::npos) port = s.substr(colon + 1);
  }
  const bool loopback =
      host == "localhost" || host == "::1" ||
      (host.rfind("127.", 0) == 0 && host.find_first_not_of("0123456789.") == std::string::npos);
  if (!loopback || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  const int p = std::stoi(port);
  return p > 0 && p < 65536 ? p : 0;
}

// The whole of `path` when it is a small regular file of this account's that no one else may read.
StatusOr<std::string> ReadPrivateText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return Status::FailedPrecondition("cannot read " + path + ": " + std::strerror(errno));
  struct stat st {};
  const bool private_file = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                            st.st_uid == ::geteuid() && (st.st_mode & 077) == 0 &&
                            st.st_size < 4096;
  std::string text;
  if (private_file) {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) text.assign(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!private_file) {
    return Status::FailedPrecondition(
        path + " must be a file of this account's that no one else may read (chmod 600 " + path +
        ")");
  }
  return text;
}

struct Record {
  std::string token;
  pid_t owner = 0;
};

// A record file: the token, then the pid of the `hangar dev` that wrote it.
std::optional<Record> ReadRecord(const std::string& path) {
  auto text = ReadPrivateText(path);
  if (!text.ok()) return std::nullopt;
  const size_t nl = text->find('\n');
  if (nl == std::string::npos || nl == 0) return std::nullopt;
  return Record{text->substr(0, nl), static_cast<pid_t>(std::atol(text->c_str() + nl + 1))};
}

}  // namespace

std::string Make() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();  // no entropy: there is nothing safe to hand out
    got += static_cast<size_t>(n);
  }
  std::string out = "hgr_dev_";
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

Status WritePrivateFile(const std::string& path, const std::string& text) {
  // Written beside and renamed over: a reader never sees half a token, and a link planted at
  // `path` is replaced, not followed.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + path + ": " + std::strerror(errno));
  const bool wrote = ::fchmod(fd, 0600) == 0 &&
                     ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!wrote || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::Unavailable("cannot write " + path + ": " + why);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadPrivateFile(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(std::string text, ReadPrivateText(path));
  return text.substr(0, text.find('\n'));
}

std::string RecordDir() {
  if (const std::string run = Env("XDG_RUNTIME_DIR"); !run.empty() && fs::is_directory(run)) {
    return run + "/hangar/dev";
  }
  if (const std::string home = Env("HOME"); !home.empty()) return home + "/.config/hangar/dev";
  return "";
}

Status WriteRecord(int port, const std::string& token, pid_t owner) {
  const std::string dir = RecordDir();
  if (dir.empty()) return Status::FailedPrecondition("neither $XDG_RUNTIME_DIR nor $HOME is set");
  HANGAR_RETURN_IF_ERROR(MakePrivateDir(dir));
  // Records of runs that ended without removing theirs (killed) go now.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".token") continue;
    auto r = ReadRecord(e.path().string());
    if (!r || !Alive(r->owner)) fs::remove(e.path(), ec);
  }
  return WritePrivateFile(dir + "/" + std::to_string(port) + ".token",
                          token + "\n" + std::to_string(owner) + "\n");
}

void RemoveRecord(int port, pid_t owner) {
  const std::string dir = RecordDir();
  if (dir.empty()) return;
  const std::string path = dir + "/" + std::to_string(port) + ".token";
  if (auto r = ReadRecord(path); r && r->owner == owner) ::unlink(path.c_str());
}

std::optional<std::string> FindForServer(const std::string& server) {
  const int port = LoopbackPort(server);
  if (port == 0) return std::nullopt;
  const std::string dir = RecordDir();
  if (dir.empty()) return std::nullopt;
  auto r = ReadRecord(dir + "/" + std::to_string(port) + ".token");
  if (r && Alive(r->owner)) return r->token;
  return std::nullopt;
}

}  // namespace hangar::dev_token
