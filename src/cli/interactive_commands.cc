// `hangar exec`, `hangar attach` and `hangar run` (docs/interactive.md): sessions on a job's
// tasks through the controller (session_client.h).
#include "cli/interactive_commands.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/port_forward.h"
#include "cli/session_client.h"
#include "common/time.h"
#include "job/job_spec.h"

namespace hangar::cli {
namespace {

struct ExecOptions {
  Common c;
  std::string target;
  bool stdin_open = false, tty = false;
  std::vector<std::string> argv;
};

struct AttachOptions {
  Common c;
  std::string target;
};

struct ForwardOptions {
  Common c;
  std::string target, ports, address = "127.0.0.1";
};

struct RunOptions {
  Common c;
  int gpus = 0;
  std::string time, image, queue, file, name;
  bool stdin_open = false, tty = false;
  std::vector<std::string> argv;
};

std::atomic<bool> g_interrupted{false};

// A session's end as the command's: the program's status, or a note on detaching.
void Finish(const SessionEnd& end, uint64_t job, int* rc) {
  if (end.detached) {
    std::fprintf(stderr, "\r\n[detached from job %llu; `hangar attach %llu` to come back]\r\n",
                 static_cast<unsigned long long>(job), static_cast<unsigned long long>(job));
    *rc = 0;
    return;
  }
  *rc = end.exit_code < 0 ? 1 : end.exit_code;
}

Status Exec(const ExecOptions& o, int* rc) {
  SessionOptions s;
  s.server = o.c.server;
  uint64_t job = 0;
  uint32_t task = 0;
  HANGAR_RETURN_IF_ERROR(ParseJobTask(o.target, &job, &task));
  if (o.argv.empty())
    return Status::InvalidArgument(
        "give the program to run after --, as in `hangar exec 42 -- bash`");
  s.start.set_job_id(job);
  s.start.set_task_index(task);
  for (const auto& a : o.argv) s.start.add_argv(a);
  s.start.set_tty(o.tty);
  s.forward_stdin = o.stdin_open;
  s.raw = o.tty && o.stdin_open && isatty(STDIN_FILENO);
  HANGAR_ASSIGN_OR_RETURN(SessionEnd end, RunSession(s));
  Finish(end, job, rc);
  return Status::Ok();
}

Status Attach(const std::string& server, uint64_t job, uint32_t task, int* rc) {
  SessionOptions s;
  s.server = server;
  s.start.set_job_id(job);
  s.start.set_task_index(task);
  s.start.set_attach(true);
  s.start.set_tty(true);
  s.raw = isatty(STDIN_FILENO);
  HANGAR_ASSIGN_OR_RETURN(SessionEnd end, RunSession(s));
  Finish(end, job, rc);
  return Status::Ok();
}

// The job `hangar run` submits: the file's, or one task of the command, marked interactive.
StatusOr<job::JobSpec> RunSpec(const RunOptions& o) {
  job::JobSpec spec;
  if (!o.file.empty()) {
    HANGAR_ASSIGN_OR_RETURN(spec, job::LoadJobFile(o.file));
    if (!o.argv.empty()) spec.tasks.front().command = o.argv;
    job::ResolveWorkdirs(&spec, std::filesystem::path(o.file).parent_path().string());
  } else {
    if (o.argv.empty())
      return Status::InvalidArgument("give the program after --, as in `hangar run -it -- bash`");
    spec.name = "run-" + std::filesystem::path(o.argv[0]).filename().string();
    job::TaskGroupSpec g;
    g.command = o.argv;
    if (o.gpus > 0) {
      g.gpu.kind = job::GpuKind::kWhole;
      g.gpu.count = o.gpus;
      g.gpu.milli = 1000;
    } else {
      g.cpu = 1000;
    }
    g.container.image = o.image;
    spec.tasks.push_back(std::move(g));
  }
  if (!o.name.empty()) spec.name = o.name;
  if (!o.queue.empty()) spec.queue = o.queue;
  if (!o.time.empty()) {
    HANGAR_ASSIGN_OR_RETURN(spec.time_limit, ParseDuration(o.time));
  }
  spec.interactive = true;
  spec.terminal = o.tty;
  spec.stdin_open = o.stdin_open && !o.tty;
  HANGAR_RETURN_IF_ERROR(job::ValidateJobSpec(spec));
  return spec;
}

// Waits until job `id` runs (or has ended), saying on stderr why it waits whenever that changes.
// Ctrl-C meanwhile cancels the job. The state it reached.
StatusOr<std::string> WaitForStart(ApiClient& api, uint64_t id) {
  const std::string path = "/v1/jobs/" + std::to_string(id);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = [](int) { g_interrupted = true; };
  sigaction(SIGINT, &sa, &old);
  std::string said;
  auto explained = std::chrono::steady_clock::time_point{};
  for (int round = 0;; ++round) {
    if (g_interrupted) {
      (void)api.Delete(path);
      sigaction(SIGINT, &old, nullptr);
      return Status::Aborted("interrupted: job " + std::to_string(id) + " was cancelled");
    }
    HANGAR_ASSIGN_OR_RETURN(auto job, api.Get(path));
    const std::string state = job.value("state", "");
    if (state != "pending") {
      sigaction(SIGINT, &old, nullptr);
      return state;
    }
    if (std::chrono::steady_clock::now() - explained >= std::chrono::seconds(1)) {
      explained = std::chrono::steady_clock::now();  // the reason, once a second
      auto why = api.Get(path + "/explain");
      const std::string reason = why.ok() ? why->value("reason", "") : "";
      if (!reason.empty() && reason != said) {
        std::fprintf(stderr, "job %llu waits: %s\n", static_cast<unsigned long long>(id),
                     reason.c_str());
        said = reason;
      }
    }
    // Quickly at first -- on an idle cluster a job starts within tens of milliseconds, and a
    // fixed 200 ms poll was half of `hangar run`'s latency there -- then every 200 ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200, 10 << std::min(round, 5))));
  }
}

// `hangar run -i` without a terminal: this process's stdin into the task's stdin pipe, its end
// the task's end of file. Ctrl-C stays this process's (as without -i).
void FeedStdin(const std::string& server, uint64_t job) {
  SessionOptions s;
  s.server = server;
  s.start.set_job_id(job);
  s.start.set_attach(true);
  s.forward_signals = false;
  auto end = RunSession(s);
  if (!end.ok()) {
    std::fprintf(stderr, "hangar: stdin did not reach job %llu: %s\n",
                 static_cast<unsigned long long>(job), end.status().message().c_str());
  }
}

// Without a terminal: the task's output as it comes (as `logs -f`), and its exit status.
Status FollowToEnd(ApiClient& api, uint64_t id, int* rc) {
  const std::string path = "/v1/jobs/" + std::to_string(id);
  HANGAR_RETURN_IF_ERROR(api.Stream(path + "/logs?follow=1", [](const char* d, size_t n) {
    return std::fwrite(d, 1, n, stdout) == n && std::fflush(stdout) == 0;
  }));
  for (;;) {
    HANGAR_ASSIGN_OR_RETURN(auto job, api.Get(path));
    const std::string state = job.value("state", "");
    if (state == "pending" || state == "running") {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    *rc = state == "succeeded" ? 0 : 1;
    if (job.contains("task_list") && job["task_list"].is_array() && !job["task_list"].empty()) {
      const auto& t = job["task_list"][0];
      const int sig = t.value("signal", 0);
      *rc = sig > 0 ? 128 + sig : t.value("exit_code", *rc);
    }
    return Status::Ok();
  }
}

Status Run(const RunOptions& o, int* rc) {
  HANGAR_ASSIGN_OR_RETURN(job::JobSpec spec, RunSpec(o));
  ApiClient api(o.c.server);
  HANGAR_ASSIGN_OR_RETURN(auto r, api.PostOnce("/v1/jobs", job::JobSpecToJson(spec).dump(),
                                               "application/json", NewIdempotencyKey()));
  const uint64_t id = r.value("id", uint64_t{0});
  std::fprintf(stderr, "submitted interactive job %llu (%s)\n", static_cast<unsigned long long>(id),
               spec.name.c_str());
  SessionIo io;
  io.tty = o.tty;
  io.stdin_open = o.stdin_open;
  return FollowSubmittedSession(o.c.server, id, io, rc);
}

}  // namespace

Status FollowSubmittedSession(const std::string& server, uint64_t id, SessionIo io, int* rc) {
  ApiClient api(server);
  HANGAR_ASSIGN_OR_RETURN(const std::string state, WaitForStart(api, id));
  if (!io.started.empty()) std::fprintf(stderr, "%s\n", io.started.c_str());
  if (!io.tty && !io.stdin_open) return FollowToEnd(api, id, rc);
  if (!io.tty) {  // stdin goes up through an attach session while the output is followed
    std::thread feed([&] { FeedStdin(server, id); });
    const Status followed = FollowToEnd(api, id, rc);
    feed.join();
    return followed;
  }
  (void)state;  // an ended job's terminal is kept a minute on its node: the attach shows its end
  return Attach(server, id, 0, rc);
}

void RegisterInteractiveCommands(CLI::App& app, int* rc) {
  auto e = std::make_shared<ExecOptions>();
  CLI::App* exec = app.add_subcommand("exec",
                                      "Run a program beside a running task, as its user, with its "
                                      "environment, GPUs and cgroup, or in its container");
  AddServer(exec, &e->c);
  exec->add_option("target", e->target, "JOB or JOB.TASK (task 0 by default)")->required();
  exec->add_flag("-i,--stdin", e->stdin_open, "Pass standard input to the program");
  exec->add_flag("-t,--tty", e->tty, "Run it on a terminal on the node (Enter ~ . detaches)");
  exec->add_option("command", e->argv, "The program and its arguments, after --");
  exec->callback([e, rc] { Guard(rc, [&] { return Exec(*e, rc); }); });

  auto a = std::make_shared<AttachOptions>();
  CLI::App* attach =
      app.add_subcommand("attach", "Attach to an interactive task's terminal (hangar run -t)");
  AddServer(attach, &a->c);
  attach->add_option("target", a->target, "JOB or JOB.TASK (task 0 by default)")->required();
  attach->callback([a, rc] {
    Guard(rc, [&] {
      uint64_t job = 0;
      uint32_t task = 0;
      HANGAR_RETURN_IF_ERROR(ParseJobTask(a->target, &job, &task));
      return Attach(a->c.server, job, task, rc);
    });
  });

  auto f = std::make_shared<ForwardOptions>();
  CLI::App* forward = app.add_subcommand(
      "port-forward",
      "Forward a local port to a port a task's own processes listen on (a notebook, TensorBoard)");
  AddServer(forward, &f->c);
  forward->add_option("target", f->target, "JOB or JOB.TASK (task 0 by default)")->required();
  forward->add_option("ports", f->ports, "PORT, or LOCAL:REMOTE (LOCAL 0: any free port)")
      ->required();
  forward->add_option("--address", f->address, "Local address to listen on (default 127.0.0.1)");
  forward->callback([f, rc] {
    Guard(rc, [&] {
      PortForwardOptions o;
      o.server = f->c.server;
      o.address = f->address;
      HANGAR_RETURN_IF_ERROR(ParseJobTask(f->target, &o.job, &o.task));
      HANGAR_RETURN_IF_ERROR(ParsePortPair(f->ports, &o.local, &o.remote));
      return RunPortForward(o);
    });
  });

  auto r = std::make_shared<RunOptions>();
  CLI::App* run =
      app.add_subcommand("run", "Submit an interactive job and attach to it when it starts");
  AddServer(run, &r->c);
  run->add_option("--gpus", r->gpus, "GPUs for the task (0: a CPU task)");
  run->add_option("--time", r->time, "Time limit, such as 2h (default: the queue's)");
  run->add_option("--image", r->image, "Run in this container image");
  run->add_option("--queue", r->queue, "The queue to submit to");
  run->add_option("--name", r->name, "The job's name (default: run-PROGRAM)");
  run->add_option("-f,--file", r->file,
                  "A job file for its shape (its first task group runs the command)");
  run->add_flag("-i,--stdin", r->stdin_open,
                "Pass standard input to the program (its end reaches it as end of file)");
  run->add_flag("-t,--tty", r->tty,
                "Run the program on a terminal and attach to it (Enter ~ . detaches)");
  run->add_option("command", r->argv, "The program and its arguments, after --");
  run->callback([r, rc] { Guard(rc, [&] { return Run(*r, rc); }); });
}

}  // namespace hangar::cli
