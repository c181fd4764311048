// SessionHost's work on its own thread: starting programs, moving bytes, ending sessions.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/pty.h"
#include "agent/session_host.h"
#include "agent/session_host_parts.h"
#include "common/time.h"

namespace hangar::agent {

namespace {

constexpr size_t kReadChunk = 16 * 1024;
constexpr int64_t kKillAfterHangup = 5'000'000'000;     // ns
constexpr int64_t kKeepEndedTerminal = 60'000'000'000;  // ns

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

void SessionHost::StartExec(uint64_t id, SpawnRequest spawn, bool tty, uint32_t rows,
                            uint32_t cols) {
  auto s = std::make_unique<Session>();
  s->id = id;
  s->tty = tty;
  int child[3] = {-1, -1, -1};
  if (tty) {
    auto ends = OpenTerminalPair();
    if (!ends.ok()) return EndSession(id, EndedFrame(id, -1, 0, ends.status().message()));
    s->in = s->out = ends->first;
    child[0] = child[1] = child[2] = ends->second;
    if (spawn.credentials)
      (void)!fchown(ends->second, spawn.credentials->uid, static_cast<gid_t>(-1));
    SetWindowSize(s->in, rows, cols);
    spawn.controlling_terminal = true;
  } else {
    int fds[3][2];
    for (auto& p : fds) {
      if (pipe2(p, O_CLOEXEC) != 0)
        return EndSession(id, EndedFrame(id, -1, 0, "cannot create a pipe"));
    }
    child[0] = fds[0][0], s->in = fds[0][1];
    s->out = fds[1][0], child[1] = fds[1][1];
    s->err = fds[2][0], child[2] = fds[2][1];
    for (int fd : {s->in, s->out, s->err}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  spawn.stdin_fd = child[0], spawn.stdout_fd = child[1], spawn.stderr_fd = child[2];
  StatusOr<SpawnedProcess> spawned = SpawnProcess(spawn);
  for (int i = 0; i < 3; ++i) {
    if (i == 0 || child[i] != child[0]) close(child[i]);
  }
  if (!spawned.ok()) {
    CloseFd(&s->in);
    if (!tty) CloseFd(&s->out);
    CloseFd(&s->err);
    return EndSession(id, EndedFrame(id, 127, 0, spawned.status().message()));
  }
  s->pid = spawned->pid;
  s->pidfd = static_cast<int>(syscall(SYS_pidfd_open, s->pid, 0));
  if (s->pidfd >= 0) fcntl(s->pidfd, F_SETFD, FD_CLOEXEC);
  Session& ref = *s;
  sessions_[id] = std::move(s);
  for (int fd : {ref.in, ref.out, ref.err, ref.pidfd}) {
    if (fd >= 0 && !watches_.count(fd)) Watch(fd, {false, id, ""});
  }
  UpdateInterest(ref);
  v1::SessionOutput opened;
  opened.set_session_id(id);
  opened.set_opened(true);
  send_(opened);
}

void SessionHost::StartAttach(uint64_t id, const std::string& task_id, uint32_t rows,
                              uint32_t cols) {
  auto t = terminals_.find(task_id);
  if (t == terminals_.end()) {
    return EndSession(id, EndedFrame(id, -1, 0,
                                     "task " + task_id +
                                         " has no terminal on this node; it was not started with "
                                         "-t (use `hangar exec` to run a program beside it)"));
  }
  Terminal& term = *t->second;
  auto s = std::make_unique<Session>();
  s->id = id;
  s->attach = true;
  s->tty = true;
  s->task_id = task_id;
  Session& ref = *s;
  sessions_[id] = std::move(s);
  v1::SessionOutput opened;
  opened.set_session_id(id);
  opened.set_opened(true);
  send_(opened);
  if (!term.backlog.empty()) SendTo(ref, term.backlog, false);
  if (term.ended) return EndSession(id, EndedFrame(id, term.exit_code, term.signal, ""));
  term.attached.push_back(id);
  SetWindowSize(term.leader, rows, cols);
  UpdateInterest(term);
}

void SessionHost::StartPort(uint64_t id, int socket) {
  auto s = std::make_unique<Session>();
  s->id = id;
  s->socket = true;
  s->in = s->out = socket;
  Session& ref = *s;
  sessions_[id] = std::move(s);
  Watch(socket, {false, id, ""});
  UpdateInterest(ref);
  v1::SessionOutput opened;
  opened.set_session_id(id);
  opened.set_opened(true);
  send_(opened);
}

void SessionHost::TakeInput(const v1::SessionInput& in) {
  auto it = sessions_.find(in.session_id());
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  Terminal* term = nullptr;
  if (s.attach) {
    auto t = terminals_.find(s.task_id);
    if (t != terminals_.end()) term = t->second.get();
  }
  if (in.ack() > s.acked) s.acked = std::min<uint64_t>(in.ack(), s.sent);
  if (in.close()) {
    if (s.attach || s.pid <= 0) {
      if (term) std::erase(term->attached, s.id);
      Unwatch(s.in), Unwatch(s.out), Unwatch(s.err), Unwatch(s.pidfd);
      if (s.socket) CloseFd(&s.in);
      sessions_.erase(it);
      if (term) UpdateInterest(*term);
      return;
    }
    s.client_gone = true;  // a hang-up, as a closed terminal gives; reaped when it exits
    kill(-s.pid, SIGHUP);
    kill(-s.pid, SIGCONT);
    s.kill_at = MonotonicNanos() + kKillAfterHangup;
    return;
  }
  const int terminal_fd = term ? term->leader : (s.tty ? s.in : -1);
  if (in.rows() > 0 && in.cols() > 0 && terminal_fd >= 0)
    SetWindowSize(terminal_fd, in.rows(), in.cols());
  if (in.signal() > 0 && in.signal() < NSIG && !s.socket) {
    SignalForeground(terminal_fd, s.pid, in.signal());
    if (term) term->last_input_ns = MonotonicNanos();  // Ctrl-C is someone at the terminal too
  }
  std::string& pending = term ? term->pending : s.pending;
  if (!in.data().empty()) {
    if (pending.size() + in.data().size() > kMaxPendingInput) {
      return EndSession(s.id,
                        EndedFrame(s.id, -1, 0,
                                   "input arrives faster than the program reads it (over 1 MiB "
                                   "waiting); the session was ended"));
    }
    pending += in.data();
    if (term) term->last_input_ns = MonotonicNanos();
  }
  if (in.eof()) {
    if (term && term->input_only)
      term->eof_pending = true;
    else if (s.tty)
      pending.push_back('\x04');  // a terminal's end of file: its VEOF character
    else
      s.eof_pending = true;
  }
  if (term) {
    FlushTerminal(*term);
    UpdateInterest(*term);
  } else {
    FlushInput(s);
  }
  if (auto again = sessions_.find(in.session_id()); again != sessions_.end())
    UpdateInterest(*again->second);
}

void SessionHost::FlushInput(Session& s) {
  if (s.in < 0) return;
  while (!s.pending.empty()) {
    // A socket whose peer left must not raise SIGPIPE in the agent.
    const ssize_t n = s.socket ? send(s.in, s.pending.data(), s.pending.size(), MSG_NOSIGNAL)
                               : write(s.in, s.pending.data(), s.pending.size());
    if (n > 0) {
      s.pending.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EAGAIN) return;
    s.pending.clear();  // the program closed its stdin: what it will not read is dropped
    break;
  }
  if (s.eof_pending && s.socket) {
    if (s.pending.empty()) {  // the server reads its end; its replies still come
      shutdown(s.in, SHUT_WR);
      s.eof_pending = false;
    }
  } else if (s.eof_pending && !s.tty) {
    Unwatch(s.in);
    CloseFd(&s.in);
  }
}

void SessionHost::ReadSession(Session& s, int fd, bool drain) {
  char buf[kReadChunk];
  while (drain || s.credit()) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      SendTo(s, std::string(buf, static_cast<size_t>(n)), fd == s.err);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // End of file (a pipe's writers closed) or EIO (a terminal with no follower open any more).
    if (s.socket) {  // the server closed (or reset) the connection: nothing more comes either way
      return EndSession(s.id, EndedFrame(s.id, 0, 0, ""));
    }
    if (fd == s.err) {
      Unwatch(s.err);
      CloseFd(&s.err);
    } else if (!s.tty) {
      Unwatch(s.out);
      CloseFd(&s.out);
    } else {
      Unwatch(s.out);  // the leader stays open for the exit's drain; it has nothing more
    }
    return;
  }
}

void SessionHost::FlushTerminal(Terminal& t) {
  if (t.leader < 0 || !watches_.count(t.leader)) return;  // closed, or its reader is gone
  while (!t.pending.empty()) {
    const ssize_t n = write(t.leader, t.pending.data(), t.pending.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    t.pending.erase(0, static_cast<size_t>(n));
  }
  if (t.input_only && t.eof_pending && t.pending.empty()) {  // the task reads its end of file
    Unwatch(t.leader);
    CloseFd(&t.leader);
  }
}

void SessionHost::ReadTerminal(Terminal& t, bool drain) {
  if (t.input_only) return;  // a pipe's write end: nothing comes back
  char buf[kReadChunk];
  while (t.leader >= 0 && (drain || !TerminalPaused(t))) {
    const ssize_t n = read(t.leader, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0 && errno == EAGAIN) return;
      Unwatch(t.leader);  // every follower closed: the task and its children let go of it
      return;
    }
    const std::string_view data(buf, static_cast<size_t>(n));
    if (t.log >= 0) (void)!write(t.log, data.data(), data.size());
    t.backlog.append(data);
    if (t.backlog.size() > kBacklog) t.backlog.erase(0, t.backlog.size() - kBacklog);
    for (uint64_t id : t.attached) {
      if (auto s = sessions_.find(id); s != sessions_.end())
        SendTo(*s->second, std::string(data), false);
    }
  }
}

void SessionHost::ProgramExited(Session& s) {
  int status = 0;
  const pid_t reaped = waitpid(s.pid, &status, WNOHANG);
  if (reaped == 0) return;  // still running
  const uint64_t id = s.id;
  if (!s.client_gone) {
    if (s.out >= 0) ReadSession(s, s.out, /*drain=*/true);
    if (s.err >= 0) ReadSession(s, s.err, /*drain=*/true);
  }
  kill(-s.pid, SIGHUP);  // what it left behind on its terminal or pipes, as a hang-up would
  s.pid = -1;
  const int code = reaped > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const int sig = reaped > 0 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  EndSession(id, EndedFrame(id, code, sig, ""));
}

void SessionHost::EndSession(uint64_t id, v1::SessionOutput last) {
  auto it = sessions_.find(id);
  bool tell = true;
  if (it != sessions_.end()) {
    Session& s = *it->second;
    tell = !s.client_gone;
    if (s.pid > 0) {  // ended early (over a limit): the program goes too
      kill(-s.pid, SIGHUP);
      kill(-s.pid, SIGKILL);
      waitpid(s.pid, nullptr, 0);
    }
    if (s.attach) {
      if (auto t = terminals_.find(s.task_id); t != terminals_.end()) {
        std::erase(t->second->attached, id);
        PublishActivity(*t->second);
      }
    } else {
      for (int* fd : {&s.err, &s.pidfd, &s.in, &s.out}) {
        Unwatch(*fd);
        if (fd == &s.out && s.one_fd()) break;  // the same descriptor as `in`, closed already
        CloseFd(fd);
      }
    }
    sessions_.erase(it);
  }
  if (tell) send_(std::move(last));
}

void SessionHost::EndTerminal(Terminal& t) {
  const std::vector<uint64_t> attached = t.attached;
  for (uint64_t id : attached) EndSession(id, EndedFrame(id, t.exit_code, t.signal, ""));
  t.attached.clear();
  Unwatch(t.leader);
  CloseFd(&t.leader);
  CloseFd(&t.log);
  t.ended = true;
  t.ended_at = MonotonicNanos();
  PublishActivity(t);
}

void SessionHost::PublishActivity(const Terminal& t) {
  MutexLock lock(mu_);
  if (t.ended || t.input_only) {
    activity_.erase(t.task_id);
    return;
  }
  activity_[t.task_id] = {t.last_input_ns, static_cast<uint32_t>(t.attached.size())};
}

std::vector<SessionHost::Activity> SessionHost::TerminalActivity() const {
  const int64_t now = MonotonicNanos();
  MutexLock lock(mu_);
  std::vector<Activity> out;
  out.reserve(activity_.size());
  for (const auto& [task, a] : activity_)
    out.push_back({task, std::max<int64_t>(0, (now - a.last_input_ns) / 1'000'000), a.attached});
  return out;
}

void SessionHost::Notice(const std::string& task_id, const std::string& text) {
  Post([=, this] {
    auto t = terminals_.find(task_id);
    if (t == terminals_.end() || t->second->ended) return;
    for (uint64_t id : t->second->attached) {
      if (auto s = sessions_.find(id); s != sessions_.end()) SendTo(*s->second, text, false);
    }
  });
}

void SessionHost::DropOldTerminals() {
  const int64_t now = MonotonicNanos();
  for (auto it = terminals_.begin(); it != terminals_.end();) {
    if (it->second->ended && now - it->second->ended_at > kKeepEndedTerminal) {
      it = terminals_.erase(it);
    } else {
      ++it;
    }
  }
}

v1::SessionOutput SessionHost::EndedFrame(uint64_t id, int exit_code, int signal,
                                          const std::string& error) {
  v1::SessionOutput o;
  o.set_session_id(id);
  o.set_ended(true);
  o.set_exit_code(exit_code);
  o.set_signal(signal);
  o.set_error(error);
  return o;
}

void SessionHost::SendTo(Session& s, std::string out, bool err) {
  v1::SessionOutput o;
  o.set_session_id(s.id);
  s.sent += out.size();
  if (err)
    o.set_stderr(std::move(out));
  else
    o.set_stdout(std::move(out));
  send_(std::move(o));
}

bool SessionHost::TerminalPaused(const Terminal& t) const {
  return std::any_of(t.attached.begin(), t.attached.end(), [&](uint64_t id) {
    auto s = sessions_.find(id);
    return s != sessions_.end() && !s->second->credit();
  });
}

// What each descriptor waits for, from the session's state: output while it has credit, input's
// room while input waits. A descriptor that waits for nothing leaves the epoll set (so that a
// hang-up on it cannot wake the loop over and over).
void SessionHost::UpdateInterest(Session& s) {
  if (s.attach) return;
  const auto set = [&](int fd, uint32_t events) {
    auto w = watches_.find(fd);
    if (fd < 0 || w == watches_.end()) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (events == 0) {
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    } else if (epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev) != 0) {
      epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
    }
  };
  const uint32_t read = s.credit() ? uint32_t{EPOLLIN} : 0u;
  const uint32_t write = s.pending.empty() ? 0u : uint32_t{EPOLLOUT};
  if (s.one_fd()) {
    set(s.in, read | write);
  } else {
    set(s.in, write);
    set(s.out, read);
    set(s.err, read);
  }
  set(s.pidfd, EPOLLIN);
}

void SessionHost::UpdateInterest(Terminal& t) {
  PublishActivity(t);
  auto w = watches_.find(t.leader);
  if (t.leader < 0 || w == watches_.end()) return;
  epoll_event ev{};
  ev.events = (TerminalPaused(t) || t.input_only ? 0u : uint32_t{EPOLLIN}) |
              (t.pending.empty() ? 0u : uint32_t{EPOLLOUT});
  ev.data.fd = t.leader;
  if (ev.events == 0) {
    epoll_ctl(epoll_, EPOLL_CTL_DEL, t.leader, nullptr);
  } else if (epoll_ctl(epoll_, EPOLL_CTL_MOD, t.leader, &ev) != 0) {
    epoll_ctl(epoll_, EPOLL_CTL_ADD, t.leader, &ev);
  }
}

void SessionHost::Watch(int fd, struct Watch w) {
  if (fd < 0) return;
  watches_[fd] = std::move(w);
}

void SessionHost::Unwatch(int fd) {
  if (fd < 0 || !watches_.erase(fd)) return;
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
}

}  // namespace hangar::agent
