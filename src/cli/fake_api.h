// For the CLI's tests: a fake Hangar API on loopback (a real HTTP server with the routes a test
// gives it), and a way to run `hangar ARGS --server FAKE` through the real command registration.
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_commands.h"
#include "common/mutex.h"

namespace hangar::cli::testing {

class FakeApi {
 public:
  FakeApi() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeApi() {
    server_.stop();
    thread_.join();
  }
  httplib::Server& server() { return server_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Remembers a request's path and query, for tests that check what a command asked for.
  void Record(const httplib::Request& req) HANGAR_EXCLUDES(mu_) {
    std::string params;
    for (const auto& [k, v] : req.params) params += (params.empty() ? "" : "&") + k + "=" + v;
    MutexLock l(mu_);
    requests_.push_back(req.path + (params.empty() ? "" : "?") + params);
  }
  std::vector<std::string> requests() HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    return requests_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  Mutex mu_;
  std::vector<std::string> requests_ HANGAR_GUARDED_BY(mu_);
};

// Runs `hangar ARGS --server FAKE` with every user command registered; returns the exit code.
inline int RunCli(const FakeApi& api, std::vector<std::string> args) {
  CLI::App app{"test"};
  int rc = 0;
  RegisterUserCommands(app, &rc);
  RegisterShareCommands(app, &rc);
  args.push_back("--server");
  args.push_back(api.address());
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes argv reversed
  app.parse(reversed);
  return rc;
}

}  // namespace hangar::cli::testing
