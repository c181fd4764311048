#include "agent/preflight/gang_preflight.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

namespace hangar::agent::preflight {
namespace {

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A node's validation JSON as the fake backend prints it: `gpus` GPUs, GPU `slow` at `factor`.
nlohmann::json Check(int gpus, int slow = -1, double factor = 1.0) {
  nlohmann::json out = {{"gpus", nlohmann::json::array()}, {"driver", "fake"}};
  for (int i = 0; i < gpus; ++i) {
    const double f = i == slow ? factor : 1.0;
    out["gpus"].push_back({{"index", i}, {"gemm_tflops", 990 * f}, {"mem_bw_gbs", 3350 * f}});
  }
  return out;
}

// Runs `ranks` of a gang of `world` at once, each on its own thread, as the agents would; with
// `nccl`, each rank's all-reduce goes through that program, with GPUs `gpus[rank]`.
std::vector<PreflightResult> Gang(uint32_t world, const std::vector<uint32_t>& ranks,
                                  const std::vector<nlohmann::json>& checks, Duration budget,
                                  const std::string& nccl = "",
                                  const std::vector<std::string>& gpus = {}, int port = 0) {
  if (port == 0) port = FreePort();
  std::vector<PreflightResult> out(world);
  std::vector<std::thread> threads;
  for (uint32_t r : ranks) {
    threads.emplace_back([&, r] {
      PreflightOptions o;
      o.rank = r;
      o.world = world;
      o.store_host = "127.0.0.1";
      o.store_port = port;
      o.host = "127.0.0.1";
      o.budget = budget;
      o.allreduce_bytes = 1 << 20;
      o.node_check = checks[r];
      if (!nccl.empty()) {
        o.nccl_program = nccl;
        o.gpus = gpus[r];
        o.scratch_dir = ::testing::TempDir() + "/rank-" + std::to_string(r);
      }
      out[r] = RunPreflight(o);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(GangPreflightTest, HealthyNodesPassAndTheAllReduceSumsAcrossTheGang) {
  // Two tasks on the first node (only its first checks the node), one on the second.
  auto out = Gang(3, {0, 1, 2}, {Check(4), nullptr, Check(4)}, 20 * kSecond);
  for (uint32_t r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(out[r].ok) << out[r].summary;
    EXPECT_TRUE(out[r].failed_ranks.empty());
    EXPECT_GT(out[r].allreduce_busbw_gbs, 0);
    EXPECT_NE(out[r].summary.find("2 node check(s) passed"), std::string::npos) << out[r].summary;
    EXPECT_NE(out[r].summary.find("across 3 ranks"), std::string::npos) << out[r].summary;
    EXPECT_NE(out[r].summary.find("sum checked"), std::string::npos) << out[r].summary;
  }
}

TEST(GangPreflightTest, ASlowGpuFailsItsNodeAndEveryRankNamesIt) {
  auto out = Gang(3, {0, 1, 2}, {Check(4), Check(4), Check(4, 1, 0.7)}, 20 * kSecond);
  for (uint32_t r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(out[r].ok);
    EXPECT_EQ(out[r].failed_ranks, std::vector<uint32_t>{2});
    EXPECT_NE(out[r].summary.find("rank 2: GPU 1's gemm_tflops 693.0 is 70% of the gang's median"),
              std::string::npos)
        << out[r].summary;
    EXPECT_EQ(out[r].allreduce_busbw_gbs, 0);  // no all-reduce over a failed node
  }
}

TEST(GangPreflightTest, ANodeWhoseCheckFailedOrLostAGpuIsNamed) {
  nlohmann::json lost = Check(2);
  lost["gpus"][1] = {{"index", 1}, {"error", "GPU 1 has fallen off the bus"}};
  lost["nccl"] = "failed: GPU 1 is lost";
  auto why =
      JudgeNodeChecks({Check(2), lost, {{"error", "hangar-validate not found"}}, nullptr}, 0.85);
  ASSERT_EQ(why.size(), 4u);
  EXPECT_EQ(why[0], "");
  EXPECT_NE(why[1].find("GPU 1: GPU 1 has fallen off the bus"), std::string::npos) << why[1];
  EXPECT_NE(why[1].find("NCCL check failed: GPU 1 is lost"), std::string::npos) << why[1];
  EXPECT_NE(why[2].find("hangar-validate not found"), std::string::npos) << why[2];
  EXPECT_EQ(why[3], "");  // a rank that checked no node is not judged
}

TEST(GangPreflightTest, ARankThatNeverJoinsIsNamedByTheOthers) {
  auto out = Gang(3, {0, 1}, {Check(2), Check(2), Check(2)}, 3 * kSecond);
  for (uint32_t r : {0u, 1u}) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(out[r].ok);
    EXPECT_EQ(out[r].failed_ranks, std::vector<uint32_t>{2});
    EXPECT_NE(out[r].summary.find("rank 2: it did not join the gang's rendezvous"),
              std::string::npos)
        << out[r].summary;
    EXPECT_LT(out[r].seconds, 3.5);  // within its budget
  }
}

TEST(GangPreflightTest, ARankThatCannotReachTheRendezvousNamesNoOne) {
  // Rank 0 never comes: rank 1 cannot tell whose fault that is; rank 0's own report would say.
  auto out = Gang(2, {1}, {Check(1), Check(1)}, 1 * kSecond);
  EXPECT_FALSE(out[1].ok);
  EXPECT_TRUE(out[1].failed_ranks.empty());
  EXPECT_NE(out[1].summary.find("could not reach the gang's rendezvous at 127.0.0.1:"),
            std::string::npos)
      << out[1].summary;
}

// On GPU nodes the all-reduce is hangar-validate's NCCL gang form. This double of hangar-validate
// (as nvml_backend_test's) answers both forms and writes down how each rank ran it; the real
// program runs on a GPU in scripts/device-check.sh.
TEST(GangPreflightTest, OnGpusEveryRankJoinsItsGpusToOneNcclAllReduce) {
  const std::string dir = ::testing::TempDir() + "/nccl-double";
  std::filesystem::create_directories(dir);
  const std::string program = dir + "/hangar-validate";
  std::ofstream(program)
      << "#!/bin/sh\n"
         "echo \"$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER $*\" >> " +
             dir +
             "/calls\n"
             "case \"$1\" in\n"
             "  --nccl-id) echo '{\"nccl_id\": \"00ff\"}' ;;\n"
             "  --nccl-gang) echo '{\"nccl_gang_busbw_gbs\": 371.5, \"gpus\": 2}' ;;\n"
             "  *) echo '{\"error\": \"unexpected\"}'; exit 1 ;;\n"
             "esac\n";
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  std::filesystem::remove(dir + "/calls");
  auto out = Gang(3, {0, 1, 2}, {Check(2), Check(1), nullptr}, 20 * kSecond, program,
                  {"0,1", "3", "4,5,6"});
  for (uint32_t r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(out[r].ok) << out[r].summary;
    EXPECT_DOUBLE_EQ(out[r].allreduce_busbw_gbs, 371.5);
    EXPECT_NE(out[r].summary.find("NCCL all-reduce of 1 MiB across 6 GPUs (3 ranks): 371.50 GB/s"),
              std::string::npos)
        << out[r].summary;
  }
  std::ifstream in(dir + "/calls");
  std::set<std::string> calls;
  for (std::string line; std::getline(in, line);) calls.insert(line);
  // Rank 0 made the id once; each rank joined its GPUs after those of the ranks before it.
  EXPECT_EQ(calls, (std::set<std::string>{
                       "  --nccl-id",  // rank 0, with no GPUs of its own
                       "0,1 PCI_BUS_ID --nccl-gang 00ff --nranks 6 --first-rank 0 --nccl-mib 1 "
                       "--iterations 5",
                       "3 PCI_BUS_ID --nccl-gang 00ff --nranks 6 --first-rank 2 --nccl-mib 1 "
                       "--iterations 5",
                       "4,5,6 PCI_BUS_ID --nccl-gang 00ff --nranks 6 --first-rank 3 --nccl-mib 1 "
                       "--iterations 5"}));
}

TEST(GangPreflightTest, Rank0WaitsAMomentForItsPortHeldByAnEarlierPreflight) {
  // An earlier preflight of the same attempt (orphaned by an agent restart) still serves there.
  const int port = FreePort();
  auto earlier = RendezvousServer::Listen("127.0.0.1", port);
  ASSERT_TRUE(earlier.ok()) << earlier.status().message();
  std::thread ends([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    earlier->reset();
  });
  auto out = Gang(2, {0, 1}, {Check(1), Check(1)}, 10 * kSecond, "", {}, port);
  ends.join();
  for (uint32_t r = 0; r < 2; ++r) EXPECT_TRUE(out[r].ok) << out[r].summary;
}

TEST(GangPreflightTest, TheRendezvousKeepsTheFirstValueAndAnswersAbsentKeys) {
  const int port = FreePort();
  auto server = RendezvousServer::Listen("127.0.0.1", port);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const auto soon = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  auto a = RendezvousClient::Connect("127.0.0.1", port, soon);
  auto b = RendezvousClient::Connect("127.0.0.1", port, soon);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Set("k", std::string("one\0two", 7)).ok());
  ASSERT_TRUE((*b)->Set("k", "other").ok());
  auto v = (*b)->Get("k", soon);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::string("one\0two", 7));
  EXPECT_FALSE(*(*a)->Has("missing"));
  auto none =
      (*a)->Get("missing", std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  EXPECT_FALSE(none.ok());
  // A second server on the same port is refused, with the address in the words.
  auto twice = RendezvousServer::Listen("127.0.0.1", port);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
}

}  // namespace
}  // namespace hangar::agent::preflight
