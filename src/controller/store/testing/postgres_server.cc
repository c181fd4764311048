#include "controller/store/testing/postgres_server.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/net.h"
#include "common/time.h"

namespace hangar::controller::testing {
namespace {

namespace fs = std::filesystem;

// The newest Debian PostgreSQL with initdb, unless $HANGAR_POSTGRES_BIN names the folder.
std::string FindBinaries() {
  if (const char* env = std::getenv("HANGAR_POSTGRES_BIN"); env && *env) return env;
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    if (fs::exists(e.path() / "bin" / "initdb")) found.push_back((e.path() / "bin").string());
  }
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return std::atoi(fs::path(a).parent_path().filename().c_str()) <
           std::atoi(fs::path(b).parent_path().filename().c_str());
  });
  return found.empty() ? "" : found.back();
}

// Forks and execs `argv` with output to `log`, as uid/gid when `drop`; in its own process group so
// that a stop reaches the server's children too. Returns the child's pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log, bool drop, uid_t uid,
            gid_t gid) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  if (drop && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0))
    ::_exit(126);
  ::setenv("LC_ALL", "C", 1);
  ::execv(args[0], args.data());
  ::_exit(127);
}

bool Exited(pid_t pid, int* status) { return ::waitpid(pid, status, WNOHANG) == pid; }

}  // namespace

StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(const Options& options) {
  std::unique_ptr<PostgresServer> s(new PostgresServer());
  s->options_ = options;
  HANGAR_RETURN_IF_ERROR(s->Init(options));
  // The port was free when picked; another process may take it before postgres binds it.
  Status launched;
  for (int attempt = 0; attempt < 3; ++attempt) {
    launched = s->Launch(options);
    if (launched.ok()) break;
  }
  HANGAR_RETURN_IF_ERROR(launched);
  HANGAR_RETURN_IF_ERROR(s->CreateDatabase("hangar"));
  return s;
}

Status PostgresServer::Init(const Options&) {
  bin_ = FindBinaries();
  if (bin_.empty()) {
    return Status::Unavailable(
        "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin; install them with "
        "scripts/install-deps.sh --test (Debian's postgresql), or set HANGAR_POSTGRES_BIN");
  }
  char tmpl[] = "/tmp/hangar-pg-XXXXXX";
  if (!::mkdtemp(tmpl))
    return Status::Unavailable(std::string("cannot make a folder in /tmp: ") +
                               std::strerror(errno));
  dir_ = tmpl;
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam("nobody");
    if (!pw)
      return Status::Unavailable(
          "running as root, PostgreSQL needs another user, and there is no 'nobody'");
    drop_privileges_ = true;
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    if (::chown(dir_.c_str(), uid_, gid_) != 0) {
      return Status::Unavailable("cannot give " + dir_ + " to nobody: " + std::strerror(errno));
    }
  }
  const pid_t pid = Spawn({bin_ + "/initdb", "-D", dir_ + "/data", "-U", "hangar", "-A", "trust",
                           "-E", "UTF8", "--locale=C", "--no-sync"},
                          dir_ + "/initdb.log", drop_privileges_, uid_, gid_);
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::ifstream in(dir_ + "/initdb.log");
    std::stringstream log;
    log << in.rdbuf();
    return Status::Unavailable("initdb failed in " + dir_ + ": " + log.str());
  }
  return Status::Ok();
}

Status PostgresServer::Launch(const Options& options, int port) {
  port_ = port > 0 ? port : PickFreePort("127.0.0.1");
  pid_ = Spawn({bin_ + "/postgres", "-D", dir_ + "/data", "-p", std::to_string(port_), "-k", dir_,
                "-c", "listen_addresses=127.0.0.1", "-c",
                std::string("fsync=") + (options.fsync ? "on" : "off"), "-c", "max_connections=40"},
               dir_ + "/postgres.log", drop_privileges_, uid_, gid_);
  if (pid_ < 0)
    return Status::Unavailable(std::string("cannot fork postgres: ") + std::strerror(errno));
  Status ready = WaitReady();
  if (!ready.ok() && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  return ready;
}

Status PostgresServer::WaitReady() {
  const std::string conninfo =
      "host=127.0.0.1 port=" + std::to_string(port_) + " user=hangar dbname=postgres";
  const int64_t until = MonotonicNanos() + 60'000'000'000LL;
  while (MonotonicNanos() < until) {
    int status = 0;
    if (Exited(pid_, &status)) {
      pid_ = -1;
      return Status::Unavailable("postgres exited at start (port " + std::to_string(port_) +
                                 "): " + LogTail());
    }
    if (PQping(conninfo.c_str()) == PQPING_OK) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("postgres did not accept connections within 60 s: " + LogTail());
}

std::string PostgresServer::LogTail() const {
  std::ifstream in(dir_ + "/postgres.log");
  std::stringstream all;
  all << in.rdbuf();
  const std::string s = all.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

std::string PostgresServer::Url(const std::string& database) const {
  return "postgres://hangar@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

Status PostgresServer::CreateDatabase(const std::string& name) {
  PGconn* c = PQconnectdb(Url("postgres").c_str());
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);  // "does not exist, skipping"
  Status s;
  if (PQstatus(c) != CONNECTION_OK)
    s = Status::Unavailable(std::string("cannot reach the test server: ") + PQerrorMessage(c));
  for (const std::string& sql :
       {"DROP DATABASE IF EXISTS \"" + name + "\"", "CREATE DATABASE \"" + name + "\""}) {
    if (!s.ok()) break;
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
      s = Status::Unavailable(sql + ": " + PQresultErrorMessage(r));
    PQclear(r);
  }
  PQfinish(c);
  return s;
}

Status PostgresServer::Restart() {
  Shutdown();
  return Launch(options_, port_);
}

PostgresServer::~PostgresServer() {
  Shutdown();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

void PostgresServer::Shutdown() {
  if (pid_ > 0) {
    ::kill(pid_, SIGINT);  // fast shutdown: ends sessions, checkpoints, exits
    int status = 0;
    const int64_t until = MonotonicNanos() + 20'000'000'000LL;
    while (!Exited(pid_, &status) && MonotonicNanos() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(-pid_, SIGKILL);  // whatever is left of its process group (nothing, normally)
    ::waitpid(pid_, nullptr, WNOHANG);
    pid_ = -1;
  }
}

}  // namespace hangar::controller::testing
