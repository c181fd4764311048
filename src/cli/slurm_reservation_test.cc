#include "cli/slurm_reservation.h"

#include <gtest/gtest.h>

#include "cli/fake_api.h"
#include "cli/slurm_tools.h"

namespace hangar::cli {
namespace {

constexpr Time kNow = 1'799'056'800'000;  // 2027-01-04T10:00:00Z

nlohmann::json Body(const std::vector<std::string>& pairs) {
  auto b = slurm::ReservationFromScontrol(pairs, kNow);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? *b : nlohmann::json();
}

TEST(ScontrolReservationTest, SlurmsFormMapsOntoAReservation) {
  nlohmann::json maint = Body({"ReservationName=maint1", "StartTime=2027-01-05T10:00",
                               "Duration=90", "Nodes=node-[1-2]", "Users=root", "Flags=MAINT"});
  EXPECT_EQ(maint, nlohmann::json::parse(R"({"name": "maint1", "start": "2027-01-05T10:00:00Z",
      "end": "2027-01-05T11:30:00Z", "nodes": "node-[1-2]", "maintenance": true})"));
  nlohmann::json res =
      Body({"reservationname=demo", "starttime=now+2hours", "EndTime=2027-01-05T18:00:00",
            "NodeCnt=4", "Users=alice,bob", "Accounts=research"});
  EXPECT_EQ(res["start"], "2027-01-04T12:00:00Z");
  EXPECT_EQ(res["end"], "2027-01-05T18:00:00Z");
  EXPECT_EQ(res["count"], 4);
  EXPECT_EQ(res["selector"], "all");
  EXPECT_EQ(res["users"], nlohmann::json::array({"alice", "bob"}));
  EXPECT_EQ(res["queues"], nlohmann::json::array({"research"}));
  EXPECT_EQ(res["maintenance"], false);
  EXPECT_EQ(Body({"ReservationName=d", "StartTime=now", "Duration=1-02:30:00", "Nodes=n-1",
                  "Users=a"})["end"],
            "2027-01-05T12:30:00Z");
  EXPECT_EQ(Body({"ReservationName=d", "StartTime=now", "Duration=02:00:00", "Nodes=n-1",
                  "Users=a"})["end"],
            "2027-01-04T12:00:00Z");
}

TEST(ScontrolReservationTest, WhatHangarCannotHonourIsRefusedSayingWhat) {
  auto refuse = [](const std::vector<std::string>& pairs) {
    auto b = slurm::ReservationFromScontrol(pairs, kNow);
    return b.ok() ? std::string("accepted") : b.status().message();
  };
  EXPECT_EQ(refuse({"ReservationName=r", "StartTime=now", "Duration=UNLIMITED", "Nodes=n-1"}),
            "Duration=UNLIMITED: a reservation in Hangar ends; give its Duration or EndTime");
  EXPECT_EQ(
      refuse({"ReservationName=r", "StartTime=now", "Duration=60", "Nodes=n-1", "Flags=DAILY"}),
      "Flags=DAILY: hangar's reservations take MAINT (and IGNORE_JOBS, which they do "
      "anyway)");
  EXPECT_EQ(
      refuse({"ReservationName=r", "StartTime=now", "Duration=60", "Nodes=n-1", "TRES=cpu=4"}),
      "hangar's scontrol create reservation does not take tres=; it takes ReservationName, "
      "StartTime, EndTime or Duration, Nodes or NodeCnt, Users, Accounts, Flags=MAINT and "
      "PartitionName");
  EXPECT_EQ(refuse({"ReservationName=r", "StartTime=now", "Duration=60"}),
            "give Nodes= (a host list) or NodeCnt= (one of them)");
  EXPECT_EQ(refuse({"ReservationName=r", "StartTime=tomorrow", "Duration=60", "Nodes=n-1"}),
            "StartTime=tomorrow is not a time: write YYYY-MM-DDTHH:MM[:SS] (UTC) or now+N");
}

TEST(ScontrolReservationTest, CreateDeleteAndShowGoThroughTheReservationsApi) {
  testing::FakeApi api;
  std::string posted;
  std::vector<std::string> deleted;
  api.server().Post("/v1/reservations", [&](const httplib::Request& req, httplib::Response& res) {
    posted = req.body;
    res.set_content(R"({"name": "maint1"})", "application/json");
  });
  api.server().Delete(R"(/v1/reservations/(.+))",
                      [&](const httplib::Request& req, httplib::Response& res) {
                        deleted.push_back(req.matches[1]);
                        res.set_content(R"({"deleted": true})", "application/json");
                      });
  api.server().Get("/v1/reservations", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"reservations": [{"name": "maint1", "start": "2027-01-05T10:00:00Z",
        "end": "2027-01-05T11:00:00Z", "start_ms": 1799143200000, "end_ms": 1799146800000,
        "nodes": ["node-1", "node-2"], "users": [], "queues": [], "maintenance": true,
        "state": "scheduled"}]})",
                    "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunSlurmTool(
                "scontrol",
                {"create", "reservation", "ReservationName=maint1", "StartTime=2027-01-05T10:00:00",
                 "Duration=60", "Nodes=node-[1-2]", "Flags=MAINT"},
                api.address()),
            0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "Reservation created: maint1\n");
  EXPECT_EQ(nlohmann::json::parse(posted)["maintenance"], true);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunSlurmTool("scontrol", {"show", "reservation"}, api.address()), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            "ReservationName=maint1 StartTime=2027-01-05T10:00:00Z EndTime=2027-01-05T11:00:00Z "
            "Duration=1h\n   Nodes=node-[1-2] NodeCnt=2 Users=(null) Accounts=(null) Flags=MAINT "
            "State=INACTIVE\n\n");
  EXPECT_EQ(RunSlurmTool("scontrol", {"delete", "ReservationName=maint1"}, api.address()), 0);
  EXPECT_EQ(deleted, std::vector<std::string>{"maint1"});
}

}  // namespace
}  // namespace hangar::cli
