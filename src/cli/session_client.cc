#include "cli/session_client.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/client.h"
#include "common/mutex.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::cli {

namespace pb = ::hangar::agent::v1;

namespace {

// Self-pipe for the signals the session forwards (SIGWINCH; SIGINT and friends without a raw
// terminal): the handler writes the number, the input loop reads it.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  const int saved = errno;
  (void)!write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// The local terminal in raw mode for the session's life: every byte (Ctrl-C included) goes to
// the program; restored on every way out.
class RawTerminal {
 public:
  explicit RawTerminal(bool on) {
    if (!on || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

Status FromGrpc(const grpc::Status& s) {
  const std::string m = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status::PermissionDenied(m + " (403)");
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status::Unauthenticated(m + " (401)");
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(m);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(m);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(m);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(m);
    default:
      return Status::Unavailable("the session's connection to the controller failed: " + m);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The session port's channel: the API's host, the port the API names, the API's TLS.
StatusOr<std::shared_ptr<grpc::Channel>> SessionChannel(ApiClient& api) {
  HANGAR_ASSIGN_OR_RETURN(auto endpoint, api.Get("/v1/sessions/endpoint"));
  const std::string url = api.server();
  const bool tls = url.rfind("https://", 0) == 0;
  std::string hostport = url.substr(url.find("://") + 3);
  hostport = hostport.substr(0, hostport.find('/'));
  const size_t colon = hostport.rfind(':');
  std::string host = colon != std::string::npos && hostport.find(']') < colon
                         ? hostport.substr(0, colon)
                     : colon != std::string::npos && hostport.find('[') == std::string::npos
                         ? hostport.substr(0, colon)
                         : hostport;
  const std::string target = host + ":" + std::to_string(endpoint.value("port", 0));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30 * 1000);
  if (!tls) return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  grpc::SslCredentialsOptions o;
  if (const char* ca = std::getenv("HANGAR_CA"); ca && *ca) o.pem_root_certs = ReadFile(ca);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(o), args);
}

void WindowSize(uint32_t* rows, uint32_t* cols) {
  winsize ws{};
  if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
    *rows = ws.ws_row;
    *cols = ws.ws_col;
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

using Stream = grpc::ClientReaderWriter<pb::SessionClientFrame, pb::SessionOutput>;

// Reads stdin and forwarded signals and sends them, until `done` or the escape.
bool PumpInput(Stream* stream, Mutex* write_mu, const SessionOptions& o, int wake,
               const std::atomic<bool>& done) {
  EscapeDetector escape;
  bool stdin_open = o.forward_stdin;
  auto send = [&](pb::SessionInput in) {
    pb::SessionClientFrame f;
    *f.mutable_input() = std::move(in);
    MutexLock lock(*write_mu);
    return stream->Write(f);
  };
  if (!stdin_open) {
    pb::SessionInput eof;
    eof.set_eof(true);
    send(eof);
  }
  while (!done) {
    pollfd fds[3] = {{wake, POLLIN, 0},
                     {g_signal_pipe[0], POLLIN, 0},
                     {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0) continue;
    if (fds[0].revents) return false;
    if (fds[1].revents & POLLIN) {
      unsigned char sig = 0;
      if (read(g_signal_pipe[0], &sig, 1) == 1) {
        pb::SessionInput in;
        if (sig == SIGWINCH) {
          uint32_t rows = 0, cols = 0;
          WindowSize(&rows, &cols);
          in.set_rows(rows);
          in.set_cols(cols);
        } else {
          in.set_signal(sig);
        }
        send(in);
      }
    }
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[16 * 1024];
      const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
      pb::SessionInput in;
      if (n <= 0) {
        stdin_open = false;
        in.set_eof(true);
      } else if (o.raw) {
        std::string out;
        const bool detach = escape.Feed(buf, static_cast<size_t>(n), &out);
        in.set_data(out);
        if (detach) {
          if (!out.empty()) send(in);
          return true;
        }
      } else {
        in.set_data(std::string(buf, static_cast<size_t>(n)));
      }
      send(in);
    }
  }
  return false;
}

}  // namespace

bool EscapeDetector::Feed(const char* data, size_t n, std::string* out) {
  for (size_t i = 0; i < n; ++i) {
    const char c = data[i];
    if (state_ == State::kTilde) {
      if (c == '.') return true;
      state_ = State::kMiddle;
      if (c != '~') out->push_back('~');  // "~~" sends one '~'
      out->push_back(c);
      if (c == '\r' || c == '\n') state_ = State::kLineStart;
      continue;
    }
    if (state_ == State::kLineStart && c == '~') {
      state_ = State::kTilde;
      continue;
    }
    out->push_back(c);
    state_ = (c == '\r' || c == '\n') ? State::kLineStart : State::kMiddle;
  }
  return false;
}

Status ParseJobTask(const std::string& text, uint64_t* job, uint32_t* task) {
  const size_t dot = text.find('.');
  const std::string j = text.substr(0, dot),
                    t = dot == std::string::npos ? "0" : text.substr(dot + 1);
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(j) || !digits(t) || std::stoull(t) > 1'000'000) {
    return Status::InvalidArgument("'" + text +
                                   "' is not JOB or JOB.TASK (such as 42 or 42.1); `hangar jobs` "
                                   "lists the ids");
  }
  *job = std::stoull(j);
  *task = static_cast<uint32_t>(std::stoul(t));
  return Status::Ok();
}

StatusOr<std::shared_ptr<grpc::Channel>> OpenSessionChannel(const std::string& server) {
  ApiClient api(server);
  return SessionChannel(api);
}

void AddSessionCredentials(const std::string& server, grpc::ClientContext* ctx) {
  ApiClient api(server);
  const std::string token = TokenFor(api.server());
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  if (const char* user = std::getenv("USER"); user && *user)
    ctx->AddMetadata("x-hangar-user", user);
}

Status FromSessionStatus(const grpc::Status& s) { return FromGrpc(s); }

StatusOr<SessionEnd> RunSession(const SessionOptions& options) {
  HANGAR_ASSIGN_OR_RETURN(auto channel, OpenSessionChannel(options.server));
  auto stub = pb::Sessions::NewStub(channel);
  grpc::ClientContext ctx;
  AddSessionCredentials(options.server, &ctx);
  std::unique_ptr<Stream> stream = stub->Open(&ctx);
  pb::SessionClientFrame first;
  *first.mutable_start() = options.start;
  if (options.raw) {
    uint32_t rows = 0, cols = 0;
    WindowSize(&rows, &cols);
    first.mutable_start()->set_rows(rows);
    first.mutable_start()->set_cols(cols);
  }
  if (const char* term = std::getenv("TERM"); term && options.start.tty())
    first.mutable_start()->set_term(term);
  Mutex write_mu;  // the stream's writes
  stream->Write(first);

  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::Internal("cannot create a pipe");
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) return Status::Internal("cannot create a pipe");
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGWINCH, &sa, nullptr);
  if (!options.raw && options.forward_signals) {  // raw, they are bytes the program reads
    for (int sig : {SIGINT, SIGQUIT, SIGTSTP}) sigaction(sig, &sa, nullptr);
  }
  RawTerminal raw(options.raw);
  std::atomic<bool> done{false};
  SessionEnd end;
  std::string error;
  bool ended = false;
  std::thread reader([&] {
    pb::SessionOutput out;
    while (stream->Read(&out)) {
      if (!out.stdout().empty()) WriteAll(STDOUT_FILENO, out.stdout());
      if (!out.stderr().empty()) WriteAll(STDERR_FILENO, out.stderr());
      if (out.ended()) {
        end.exit_code = out.signal() > 0 ? 128 + out.signal() : out.exit_code();
        error = out.error();
        ended = true;
        break;
      }
    }
    done = true;
    (void)!write(wake[1], "x", 1);
  });
  end.detached = PumpInput(stream.get(), &write_mu, options, wake[0], done);
  if (end.detached) ctx.TryCancel();
  {
    MutexLock lock(write_mu);
    stream->WritesDone();
  }
  reader.join();
  const grpc::Status st = stream->Finish();
  sa.sa_handler = SIG_DFL;
  for (int sig : {SIGWINCH, SIGINT, SIGQUIT, SIGTSTP}) sigaction(sig, &sa, nullptr);
  for (int fd : {wake[0], wake[1], g_signal_pipe[0], g_signal_pipe[1]}) close(fd);
  if (end.detached) return end;
  if (!st.ok() && !ended) return FromGrpc(st);
  if (!error.empty()) return Status::FailedPrecondition(error);
  return end;
}

}  // namespace hangar::cli
