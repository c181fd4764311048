#include "agent/step_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace hangar::agent {
namespace {

// What the socket handed to the "controller", as the agent's stream would take it.
struct Sent {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<v1::StepRequest> requests;
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return requests.size() >= n; });
  }
};

int Connect(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0)
      << std::strerror(errno);
  return fd;
}

// Everything the socket writes until it closes the connection.
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

class StepSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ =
        (std::filesystem::temp_directory_path() / ("steps-" + std::to_string(getpid()) + ".sock"))
            .string();
    auto s = StepSocket::Listen(
        path_,
        [](const std::string& task, int64_t) {
          return task == "7.0.0" ? Status::Ok()
                                 : Status::NotFound("task '" + task + "' does not run here");
        },
        [this](v1::StepRequest r) {
          std::lock_guard lock(sent_.mu);
          sent_.requests.push_back(std::move(r));
          sent_.cv.notify_all();
          return true;
        });
    ASSERT_TRUE(s.ok()) << s.status().message();
    socket_ = std::move(*s);
  }

  std::string path_;
  Sent sent_;
  std::unique_ptr<StepSocket> socket_;
};

TEST_F(StepSocketTest, ARequestGoesToTheControllerAndItsFramesComeBackToTheCaller) {
  const int fd = Connect(path_);
  const std::string request =
      R"({"op":"srun","task_id":"7.0.0","argv":["hostname"],"nodes":2,"nodelist":"node-1","kill_on_bad_exit":true})";
  ASSERT_EQ(write(fd, (request + "\n").data(), request.size() + 1),
            static_cast<ssize_t>(request.size() + 1));
  ASSERT_TRUE(sent_.WaitFor(1));
  const v1::StepRequest r = sent_.requests[0];
  EXPECT_EQ(r.task_id(), "7.0.0");
  EXPECT_EQ(r.argv(0), "hostname");
  EXPECT_EQ(r.nodes(), 2);
  EXPECT_EQ(r.nodelist(), "node-1");
  EXPECT_TRUE(r.kill_on_bad_exit());
  v1::StepOutput out;
  out.set_request_id(r.request_id());
  out.set_started(true);
  out.set_nodelist("node-[1-2]");
  socket_->Deliver(out);
  out.Clear();
  out.set_request_id(r.request_id());
  out.set_procid(1);
  out.set_stdout("node-2\n");
  socket_->Deliver(out);
  out.Clear();
  out.set_request_id(r.request_id());
  out.set_ended(true);
  out.set_exit_code(3);
  socket_->Deliver(out);
  const std::string got = ReadAll(fd);
  close(fd);
  EXPECT_NE(got.find(R"("nodelist":"node-[1-2]")"), std::string::npos) << got;
  EXPECT_NE(got.find(R"({"err":0,"out":7,"procid":1})"
                     "\nnode-2\n"),
            std::string::npos)
      << got;
  EXPECT_NE(got.find(R"("ended":true,"error":"","exit_code":3)"), std::string::npos) << got;
}

TEST_F(StepSocketTest, AnotherTasksCallerIsRefusedAndACallerWhoLeavesCancelsItsStep) {
  int fd = Connect(path_);
  const std::string foreign = R"({"op":"srun","task_id":"8.0.0","argv":["true"]})"
                              "\n";
  ASSERT_EQ(write(fd, foreign.data(), foreign.size()), static_cast<ssize_t>(foreign.size()));
  const std::string refused = ReadAll(fd);
  close(fd);
  EXPECT_NE(refused.find("task '8.0.0' does not run here"), std::string::npos) << refused;

  fd = Connect(path_);
  const std::string ok = R"({"op":"srun","task_id":"7.0.0","argv":["sleep","9"]})"
                         "\n";
  ASSERT_EQ(write(fd, ok.data(), ok.size()), static_cast<ssize_t>(ok.size()));
  ASSERT_TRUE(sent_.WaitFor(1));
  close(fd);  // srun was killed
  ASSERT_TRUE(sent_.WaitFor(2));
  EXPECT_TRUE(sent_.requests[1].cancel());
  EXPECT_EQ(sent_.requests[1].request_id(), sent_.requests[0].request_id());
}

}  // namespace
}  // namespace hangar::agent
