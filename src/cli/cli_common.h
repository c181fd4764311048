// What every user command shares: the server and output flags, the error guard, JSON output.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::cli {

struct Common {
  std::string server;
  std::string output = "table";
};

// --server and --ca.
inline void AddServer(CLI::App* c, Common* common) {
  c->add_option("--server", common->server,
                "API address, or several controllers' as a comma-separated list (the leader is "
                "found) (default: $HANGAR_URL or "
                "http://127.0.0.1:8080)");
  // The client reads $HANGAR_CA; the flag sets it for this run.
  c->add_option_function<std::string>(
      "--ca", [](const std::string& path) { ::setenv("HANGAR_CA", path.c_str(), 1); },
      "For an https:// server: the cluster CA's certificate (default: $HANGAR_CA, else the "
      "system's CAs)");
}

// --server, --ca and -o/--output (one of `formats`).
inline void AddCommon(CLI::App* c, Common* common,
                      std::vector<std::string> formats = {"table", "json"}) {
  AddServer(c, common);
  std::string help;
  for (const auto& f : formats)
    help += (help.empty() ? "" : (&f == &formats.back() ? " or " : ", ")) + f;
  c->add_option("-o,--output", common->output, help)->check(CLI::IsMember(formats));
}

// Runs `body`; prints its error as one line on stderr and sets the exit code.
inline void Guard(int* rc, const std::function<Status()>& body) {
  Status s = body();
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    *rc = s.code() == StatusCode::kUnavailable ? 3 : 1;
  }
}

inline void PrintJson(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

}  // namespace hangar::cli
