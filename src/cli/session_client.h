// The CLI's end of an interactive session (docs/interactive.md): Sessions.Open on the controller's
// session port (asked of the API: GET /v1/sessions/endpoint), with the same token, TLS and CA as
// every API call. Standard input goes up (raw, when the local terminal is one, so Ctrl-C and the
// rest reach the program on the node), output comes down, window changes follow (SIGWINCH), and
// Enter ~ . detaches. The answer is the program's exit status.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/agent.pb.h"

namespace grpc {
class Channel;
class ClientContext;
class Status;
}  // namespace grpc

namespace hangar::cli {

struct SessionOptions {
  std::string server;                     // as --server ("" : $HANGAR_URL or the default)
  hangar::agent::v1::SessionStart start;  // job, task, and exec or attach
  bool forward_stdin = true;              // send what stdin gives (else stdin is closed at once)
  bool raw = false;  // the local terminal goes raw (a tty session on a terminal)
  // Without `raw`: Ctrl-C and friends go to the program (else they act on this process).
  bool forward_signals = true;
};

// What became of a session.
struct SessionEnd {
  int exit_code = 0;  // the program's, or 128 + the signal that ended it
  bool detached = false;
};

// Runs the session until the program ends, the person detaches (Enter ~ .), or the connection
// fails. Errors are the controller's sentences (403 for another's job, ...).
StatusOr<SessionEnd> RunSession(const SessionOptions& options);

// The controller's session port, as the API at `server` names it, with the API's TLS; and a call's
// context carrying the token for `server`.
StatusOr<std::shared_ptr<grpc::Channel>> OpenSessionChannel(const std::string& server);
void AddSessionCredentials(const std::string& server, grpc::ClientContext* ctx);
// A refusal from the session port as the CLI reports it (403, 401, ...).
Status FromSessionStatus(const grpc::Status& s);

// "JOB" or "JOB.TASK" to a job id and task index; InvalidArgument, saying the form, otherwise.
Status ParseJobTask(const std::string& text, uint64_t* job, uint32_t* task);

// Detach on Enter ~ . (as ssh): fed the typed bytes, says whether they complete the escape.
// What it holds back (a '~' after Enter) is released by the next byte that is not '.'.
class EscapeDetector {
 public:
  // Appends to `out` what to send; true when the escape was typed (then nothing more is sent).
  bool Feed(const char* data, size_t n, std::string* out);

 private:
  enum class State { kLineStart, kMiddle, kTilde } state_ = State::kLineStart;
};

}  // namespace hangar::cli
