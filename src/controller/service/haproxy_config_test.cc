#include "controller/service/haproxy_config.h"

#include <gtest/gtest.h>

namespace hangar::controller::service {
namespace {

TEST(HaproxyConfigTest, LayoutsReadAndPrintTheSame) {
  auto l = ParseLbLayout("unix:/run/hangar/lb.sock@0.0.0.0:30000+16");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->admin, "unix:/run/hangar/lb.sock");
  EXPECT_EQ(l->host, "0.0.0.0");
  EXPECT_EQ(l->first_port, 30000);
  EXPECT_EQ(l->slots, 16);
  EXPECT_EQ(l->Endpoint(3), "0.0.0.0:30003");
  EXPECT_EQ(FormatLbLayout(*l), "unix:/run/hangar/lb.sock@0.0.0.0:30000+16");
  for (const char* bad :
       {"", "unix:/x", "unix:/x@h:1", "unix:/x@h:0+2", "@h:1+1", "unix:/x@h:65535+2"}) {
    EXPECT_FALSE(ParseLbLayout(bad).ok()) << bad;
  }
}

TEST(HaproxyConfigTest, TheConfigHasOneFrontendAndBackendPerSlotWithRetries) {
  LbLayout l{"unix:/tmp/a.sock", "127.0.0.1", 40000, 2};
  const std::string c = HaproxyConfig(l);
  EXPECT_NE(c.find("stats socket /tmp/a.sock mode 600 level admin"), std::string::npos);
  EXPECT_NE(c.find("bind 127.0.0.1:40001"), std::string::npos);
  EXPECT_NE(c.find("backend svc1"), std::string::npos);
  EXPECT_NE(c.find("option redispatch"), std::string::npos);
  EXPECT_NE(c.find("retry-on conn-failure empty-response"), std::string::npos);
  EXPECT_EQ(c.find("svc2"), std::string::npos);
}

TEST(HaproxyConfigTest, WithACertificateTheEndpointsServeTls) {
  LbLayout l{"unix:/tmp/a.sock", "0.0.0.0", 40000, 2};
  EXPECT_EQ(HaproxyConfig(l).find("ssl"), std::string::npos) << "plain HTTP unless asked";
  const std::string c = HaproxyConfig(l, {"/etc/hangar tls/controller.crt", ""});
  EXPECT_NE(c.find("    bind 0.0.0.0:40000 ssl crt \"/etc/hangar tls/controller.crt\" alpn "
                   "h2,http/1.1\n"),
            std::string::npos)
      << c;
  EXPECT_NE(c.find("bind 0.0.0.0:40001 ssl crt"), std::string::npos);
  EXPECT_NE(c.find("ssl-load-extra-del-ext"), std::string::npos) << "controller.key beside .crt";
  EXPECT_NE(c.find("ssl-min-ver TLSv1.2"), std::string::npos);
  EXPECT_EQ(c.find("verify required"), std::string::npos);
  const std::string mutual = HaproxyConfig(l, {"/d/controller.crt", "/d/ca.crt"});
  EXPECT_NE(mutual.find("alpn h2,http/1.1 verify required ca-file \"/d/ca.crt\"\n"),
            std::string::npos)
      << mutual;
}

TEST(HaproxyConfigTest, ChangesBecomeRuntimeCommands) {
  EXPECT_EQ(HaproxyCommands({1, 3, LbChange::Op::kEnable, "10.0.0.5", 24001}),
            (std::vector<std::string>{"set server svc1/r3 addr 10.0.0.5 port 24001",
                                      "set server svc1/r3 state ready"}));
  EXPECT_EQ(HaproxyCommands({0, 2, LbChange::Op::kDrain, "", 0}),
            std::vector<std::string>{"set server svc0/r2 state drain"});
  EXPECT_EQ(HaproxyCommands({0, 2, LbChange::Op::kDisable, "", 0}),
            std::vector<std::string>{"set server svc0/r2 state maint"});
}

TEST(HaproxyConfigTest, ReadsSessionsAndTrafficFromShowStat) {
  const std::string stat =
      "# "
      "pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,"
      "wredis,status,"
      "weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,"
      "type,rate,"
      "rate_lim,rate_max,check_status,check_code,check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_"
      "4xx,hrsp_5xx,"
      "hrsp_other,hanafail,req_rate,req_rate_max,req_tot\n"
      "svc0,FRONTEND,,,4,9,20000,120,,,,,,,,,,OPEN,,,,,,,,,,,,,,,0,,,,,,,0,118,0,0,2,0,,3,9,120\n"
      "svc0,r1,0,0,3,5,,60,,,,,,,,,,UP\n"
      "svc0,r2,0,0,1,5,,60,,,,,,,,,,DRAIN\n"
      "svc0,BACKEND,2,3,3,9,,120,,,,,,,,,,UP\n"
      "stats,FRONTEND,,,1,1\n";
  auto s = ParseSessions(stat);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ((s[{0, 1}]), 3);
  EXPECT_EQ((s[{0, 2}]), 1);
  auto t = ParseTraffic(stat);
  ASSERT_EQ(t.count(0), 1u);
  EXPECT_EQ(t[0].requests, 120);
  EXPECT_EQ(t[0].errors_5xx, 2);
  EXPECT_EQ(t[0].in_flight, 5) << "the backend's sessions and queue";
  EXPECT_EQ(t[0].rps, 3) << "the frontend's requests over the last second";
}

TEST(HaproxyConfigTest, TellsWhenTheServersDisagreeWithTheBook) {
  const std::string stat =
      "# "
      "pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,"
      "wredis,status\n"
      "svc0,r1,0,0,0,0,,0,,,,,,,,,,UP\n"
      "svc0,r2,0,0,0,0,,0,,,,,,,,,,DRAIN\n"
      "svc0,r3,0,0,0,0,,0,,,,,,,,,,MAINT\n";
  const auto status = ParseStatus(stat);
  EXPECT_EQ(status.at({0, 2}), "DRAIN");
  using Op = LbChange::Op;
  std::vector<LbChange> want = {
      {0, 1, Op::kEnable, "a", 1}, {0, 2, Op::kDrain, "", 0}, {0, 3, Op::kDisable, "", 0}};
  EXPECT_TRUE(LbAgrees(want, status));
  // HAProxy restarted: every server is in maintenance again, the ready replica's too.
  auto restarted = status;
  restarted[{0, 1}] = "MAINT";
  EXPECT_FALSE(LbAgrees(want, restarted));
  EXPECT_FALSE(LbAgrees({{0, 4, Op::kDisable, "", 0}}, status)) << "a server HAProxy does not have";
}

}  // namespace
}  // namespace hangar::controller::service
