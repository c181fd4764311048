#include "agent/session_host.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/pty.h"
#include "agent/session_host_parts.h"
#include "common/time.h"

namespace hangar::agent {

SessionHost::SessionHost(Send send) : send_(std::move(send)) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  thread_ = std::thread([this] { Loop(); });
}

SessionHost::~SessionHost() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);
  thread_.join();
  for (auto& [id, s] : sessions_) {
    if (s->pid > 0) {
      kill(-s->pid, SIGHUP);
      kill(-s->pid, SIGKILL);
      waitpid(s->pid, nullptr, 0);
    }
    for (int* fd : {&s->in, &s->out, &s->err, &s->pidfd}) {
      if (*fd >= 0 && !(fd == &s->out && s->one_fd())) close(*fd);
    }
  }
  for (auto& [id, t] : terminals_) {
    if (t->leader >= 0) close(t->leader);
    if (t->log >= 0) close(t->log);
  }
  close(epoll_);
  close(wake_);
}

void SessionHost::Post(std::function<void()> work) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(work));
  }
  uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);
}

void SessionHost::OpenExec(uint64_t id, SpawnRequest spawn, bool tty, uint32_t rows,
                           uint32_t cols) {
  Post([=, this, spawn = std::move(spawn)]() mutable {
    StartExec(id, std::move(spawn), tty, rows, cols);
  });
}

void SessionHost::OpenAttach(uint64_t id, const std::string& task_id, uint32_t rows,
                             uint32_t cols) {
  Post([=, this] { StartAttach(id, task_id, rows, cols); });
}

void SessionHost::OpenPort(uint64_t id, int socket) {
  Post([=, this] { StartPort(id, socket); });
}

void SessionHost::Input(const v1::SessionInput& in) {
  Post([this, in] { TakeInput(in); });
}

void SessionHost::CloseSessions() {
  Post([this] {
    std::vector<uint64_t> ids;
    for (const auto& [id, s] : sessions_) ids.push_back(id);
    for (uint64_t id : ids) {
      v1::SessionInput close;
      close.set_session_id(id);
      close.set_close(true);
      TakeInput(close);
    }
  });
}

StatusOr<int> SessionHost::CreateTerminal(const std::string& task_id, const std::string& log_path,
                                          uid_t owner) {
  HANGAR_ASSIGN_OR_RETURN(auto ends, OpenTerminalPair());
  auto [leader, follower] = ends;
  if (owner != static_cast<uid_t>(-1)) (void)!fchown(follower, owner, static_cast<gid_t>(-1));
  SetWindowSize(leader, 24, 80);
  auto t = std::make_shared<Terminal>();
  t->task_id = task_id;
  t->leader = leader;
  t->last_input_ns = MonotonicNanos();
  t->log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  Post([this, t] {
    auto owned = std::make_unique<Terminal>(std::move(*t));
    Terminal& term = *owned;
    if (auto old = terminals_.find(term.task_id); old != terminals_.end())
      EndTerminal(*old->second);  // a relaunch
    terminals_[term.task_id] = std::move(owned);
    Watch(term.leader, {true, 0, term.task_id});
    UpdateInterest(term);
  });
  return follower;
}

StatusOr<int> SessionHost::CreateStdinPipe(const std::string& task_id) {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0)
    return Status::Unavailable(std::string("cannot create the task's stdin pipe: ") +
                               std::strerror(errno));
  fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK);
  auto t = std::make_shared<Terminal>();
  t->task_id = task_id;
  t->leader = ends[1];
  t->input_only = true;
  Post([this, t] {
    auto owned = std::make_unique<Terminal>(std::move(*t));
    Terminal& term = *owned;
    if (auto old = terminals_.find(term.task_id); old != terminals_.end())
      EndTerminal(*old->second);  // a relaunch
    terminals_[term.task_id] = std::move(owned);
    Watch(term.leader, {true, 0, term.task_id});
    UpdateInterest(term);
  });
  return ends[0];
}

void SessionHost::TaskEnded(const std::string& task_id, int exit_code, int signal) {
  Post([=, this] {
    auto it = terminals_.find(task_id);
    if (it == terminals_.end() || it->second->ended) return;
    Terminal& t = *it->second;
    ReadTerminal(t, /*drain=*/true);
    t.ended = true;
    t.exit_code = exit_code;
    t.signal = signal;
    EndTerminal(t);
  });
}

void SessionHost::Loop() {
  epoll_event events[64];
  for (;;) {
    const int n = epoll_wait(epoll_, events, 64, 200);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_) {
        uint64_t count;
        (void)!read(wake_, &count, sizeof count);
        continue;
      }
      OnReady(events[i].data.fd, events[i].events);
    }
    RunQueued();
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    const int64_t now = MonotonicNanos();
    std::vector<Session*> exited;
    for (auto& [id, s] : sessions_) {
      if (s->pid > 0 && s->pidfd < 0) exited.push_back(s.get());  // no pidfd: look every 200 ms
      if (s->kill_at <= now && s->pid > 0) {
        kill(-s->pid, SIGKILL);
        s->kill_at = kNever;
      }
    }
    for (Session* s : exited) ProgramExited(*s);
    DropOldTerminals();
  }
}

void SessionHost::RunQueued() {
  std::deque<std::function<void()>> work;
  {
    MutexLock lock(mu_);
    work.swap(queue_);
  }
  for (auto& w : work) w();
}

void SessionHost::OnReady(int fd, uint32_t events) {
  auto w = watches_.find(fd);
  if (w == watches_.end()) return;
  const struct Watch watch = w->second;
  if (watch.terminal) {
    auto t = terminals_.find(watch.task_id);
    if (t == terminals_.end()) return;
    Terminal& term = *t->second;
    if (term.input_only && (events & (EPOLLHUP | EPOLLERR))) {
      term.pending.clear();  // the task closed its stdin: what it will not read is dropped
      Unwatch(term.leader);
      return;
    }
    if (events & EPOLLOUT) FlushTerminal(term);
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ReadTerminal(term, false);
    if (auto again = terminals_.find(watch.task_id); again != terminals_.end())
      UpdateInterest(*again->second);
    return;
  }
  auto it = sessions_.find(watch.session);
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  if (fd == s.pidfd) return ProgramExited(s);
  if ((events & EPOLLOUT) || (fd == s.in && (events & EPOLLERR))) FlushInput(s);
  const bool output = fd != s.in || s.one_fd();  // a tty's leader carries both ways, a socket too
  if (sessions_.count(watch.session) && output && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
    ReadSession(s, fd, false);
  }
  if (auto again = sessions_.find(watch.session); again != sessions_.end())
    UpdateInterest(*again->second);
}

}  // namespace hangar::agent
