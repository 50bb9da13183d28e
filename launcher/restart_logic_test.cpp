#include "restart_logic.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

FailureReport Report(int rank, double detected, int exit_status = 1) {
  FailureReport r;
  r.generation = 2;
  r.rank = rank;
  r.node = "node3";
  r.exit_status = exit_status;
  r.run_s = 12.5;
  r.detected = detected;
  return r;
}

std::string Line(const std::string& token, const PeerMessage& m) {
  std::string line = EncodePeerMessage(token, m);
  EXPECT_EQ(line.back(), '\n');
  line.pop_back();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  return line;
}

TEST(RestartLogic, ANoticeCarriesTheReportAndNeedsTheToken) {
  const std::string line = Line("s3cret", StopNotice(Report(5, 1796164710.25, 137), 7));
  auto m = DecodePeerMessage(line, "s3cret");
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->kind, PeerKind::kStop);
  EXPECT_EQ(m->from, 7);  // the step's rank; the program's is 5 (a spare took a node's place)
  auto back = FailureOf(*m);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->rank, 5);
  EXPECT_EQ(back->generation, 2);
  EXPECT_EQ(back->exit_status, 137);
  EXPECT_EQ(back->node, "node3");
  EXPECT_DOUBLE_EQ(back->detected, 1796164710.25);
  EXPECT_DOUBLE_EQ(back->run_s, 12.5);
  EXPECT_FALSE(DecodePeerMessage(line, "other").ok());
  EXPECT_FALSE(DecodePeerMessage(line, "").ok());
  EXPECT_FALSE(DecodePeerMessage("GET / HTTP/1.0", "s3cret").ok());
  EXPECT_FALSE(DecodePeerMessage("autopar-stop token=s3cret from=x generation=0", "s3cret").ok());
  EXPECT_FALSE(DecodePeerMessage("autopar-stop", "s3cret").ok());
  // A sender cannot pass itself off as another rank through a field of its own.
  PeerMessage forged{PeerKind::kReport, 3, 1, {{"rank", "0"}, {"state", "stopped"}}};
  auto decoded = DecodePeerMessage(Line("t", forged), "t");
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->from, 3);
}

TEST(RestartLogic, ReportsSayFailedOrStopped) {
  PeerMessage failed = StopNotice(Report(2, 9), 2);
  failed.kind = PeerKind::kReport;
  failed.generation = 4;
  failed.fields.emplace_back("state", "failed");
  failed.fields.emplace_back("unreachable", "4,5");
  auto m = DecodePeerMessage(Line("t", failed), "t");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, PeerKind::kReport);
  EXPECT_EQ(PeerField(*m, "unreachable"), "4,5");
  EXPECT_EQ(m->generation, 4);
  EXPECT_TRUE(FailureOf(*m).ok());
  PeerMessage stopped{PeerKind::kReport, 2, 4, {{"state", "stopped"}}};
  EXPECT_FALSE(FailureOf(*DecodePeerMessage(Line("t", stopped), "t")).ok());
}

TEST(RestartLogic, ReportFieldsNameTheSignal) {
  EventFields f = ReportFields(Report(1, 5, 128 + 9));
  bool has_signal = false;
  for (const auto& [k, v] : f) has_signal = has_signal || (k == "signal" && v == "9");
  EXPECT_TRUE(has_signal);
  EXPECT_FALSE(ReportFromFields({{"class", "node-loss"}, {"exit", "1"}, {"generation", "0"}}, 0).ok());
  // An out-of-memory report keeps its error through the stop notice and the report to rank 0.
  FailureReport oom = Report(2, 5, 128 + 9);
  oom.kind = "oom";
  oom.error = "killed by the kernel's OOM killer (memory cgroup)";
  auto back = ReportFromFields(ReportFields(oom), 2);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->kind, "oom");
  EXPECT_EQ(back->error, oom.error);
}

TEST(RestartLogic, TheFirstFailureIsTheEarliestThenTheLowestRank) {
  std::vector<std::optional<FailureReport>> reports = {std::nullopt, Report(1, 10.5), Report(2, 10.2),
                                                       std::nullopt, Report(4, 10.2)};
  auto first = FirstFailure(reports);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 2);
  EXPECT_FALSE(FirstFailure({std::nullopt, std::nullopt}).has_value());
}

TEST(RestartLogic, TheCauseIsTheMostSpecificFailureNotThePeersItBroke) {
  // Rank 1 ran out of memory; ranks 2 and 3 saw their all_reduce fail first (exit 1).
  FailureReport oom = Report(1, 10.4);
  oom.kind = "oom";
  FailureReport peer = Report(2, 10.2);
  FailureReport killed = Report(3, 10.3);
  killed.exit_status = 137;
  auto first = FirstFailure({std::nullopt, oom, peer, killed});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 1);
  // A rank killed by a signal outranks the plain exits it caused.
  first = FirstFailure({std::nullopt, std::nullopt, peer, killed});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 3);
}

TEST(RestartLogic, Verdicts) {
  RestartVerdict restart;
  restart.restart = true;
  restart.master = {"10.0.0.7", 29612};
  restart.resume_step = 40;
  restart.active = {0, 3, 2};
  auto m = DecodePeerMessage(Line("t", VerdictMessage(restart, 1)), "t");
  ASSERT_TRUE(m.ok());
  auto v = VerdictOf(*m);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_TRUE(v->restart);
  EXPECT_EQ(v->master.addr, "10.0.0.7");
  EXPECT_EQ(v->master.port, 29612);
  EXPECT_EQ(v->resume_step, 40);
  EXPECT_EQ(v->active, (std::vector<int>{0, 3, 2}));
  restart.resume_step = -1;  // nothing to resume from
  EXPECT_EQ(VerdictOf(VerdictMessage(restart, 1))->resume_step, -1);

  auto exit = VerdictOf(VerdictMessage(RestartVerdict{false, 137, {}, -1, {}}, 1));
  ASSERT_TRUE(exit.ok());
  EXPECT_FALSE(exit->restart);
  EXPECT_EQ(exit->exit_code, 137);

  PeerMessage bad{PeerKind::kVerdict, 0, 1, {{"action", "restart"}, {"master", "x:0"}}};
  EXPECT_FALSE(VerdictOf(bad).ok());
  bad.fields = {{"action", "exit"}, {"code", "lots"}};
  EXPECT_FALSE(VerdictOf(bad).ok());
  bad.fields = {{"action", "restart"}, {"master", "h:1"}, {"resume", "3"}, {"active", ""}};
  EXPECT_FALSE(VerdictOf(bad).ok());
}

RankInfo StepRank(int node, int local, int tasks_per_node, int nodes) {
  RankInfo r;
  r.node_rank = node;
  r.local_rank = local;
  r.local_size = tasks_per_node;
  r.num_nodes = nodes;
  r.rank = node * tasks_per_node + local;
  r.size = nodes * tasks_per_node;
  return r;
}

TEST(RestartLogic, SparesStartInReserveAndTakeALostNodesPlace) {
  const std::vector<int> tasks = {2, 2, 2, 2};
  EXPECT_EQ(InitialActiveNodes(4, 1), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(InitialActiveNodes(4, 0), (std::vector<int>{0, 1, 2, 3}));
  std::vector<int> active = InitialActiveNodes(4, 1);
  EXPECT_FALSE(ProgramRank(StepRank(3, 1, 2, 4), tasks, active).has_value());  // the spare
  auto r = ProgramRank(StepRank(2, 1, 2, 4), tasks, active);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 5);
  EXPECT_EQ(r->size, 6);
  EXPECT_EQ(r->num_nodes, 3);
  EXPECT_EQ(r->node_rank, 2);
  EXPECT_EQ(r->local_rank, 1);

  // Node 1 is lost: the spare (3) takes its place, so ranks 2 and 3 move there and every other
  // rank stays where its checkpoint copy is.
  auto next = ReplaceLostNodes(active, {1}, {3}, tasks);
  ASSERT_TRUE(next.ok()) << next.message();
  EXPECT_EQ(*next, (std::vector<int>{0, 3, 2}));
  EXPECT_EQ(ProgramRank(StepRank(3, 0, 2, 4), tasks, *next)->rank, 2);
  EXPECT_EQ(ProgramRank(StepRank(2, 0, 2, 4), tasks, *next)->rank, 4);
  EXPECT_FALSE(ProgramRank(StepRank(1, 0, 2, 4), tasks, *next).has_value());

  auto none = ReplaceLostNodes(*next, {2}, {}, tasks);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message(), "no spare node left to replace node 2 (0 in reserve)");
  // A spare with another task count cannot take the place.
  EXPECT_FALSE(ReplaceLostNodes({0, 1}, {1}, {2}, {2, 2, 1}).ok());
  // Nothing lost: nothing changes.
  EXPECT_EQ(*ReplaceLostNodes(active, {}, {3}, tasks), active);
}

TEST(RestartLogic, AnElasticRunDropsTheLostNodesNoSpareCanReplace) {
  const std::vector<int> tasks{2, 2, 2, 2, 2};
  // 4 nodes in use, no spare: node 2 is dropped, node 3's ranks become 4 and 5.
  std::vector<int> next = ReplaceOrDropLostNodes({0, 1, 2, 3}, {2}, {}, tasks);
  EXPECT_EQ(next, (std::vector<int>{0, 1, 3}));
  auto moved = ProgramRank(StepRank(3, 1, 2, 4), tasks, next);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->rank, 5);
  EXPECT_EQ(moved->size, 6);
  EXPECT_EQ(moved->node_rank, 2);
  EXPECT_EQ(moved->num_nodes, 3);
  // A spare replaces what it can; the rest is dropped.
  EXPECT_EQ(ReplaceOrDropLostNodes({0, 1, 2, 3}, {1, 2}, {4}, tasks), (std::vector<int>{0, 4, 3}));
  EXPECT_EQ(ReplaceOrDropLostNodes({0, 1}, {}, {}, tasks), (std::vector<int>{0, 1}));
}

TEST(RestartLogic, IntLists) {
  EXPECT_EQ(FormatIntList({0, 3, 2}), "0,3,2");
  EXPECT_EQ(FormatIntList({}), "");
  EXPECT_EQ(*ParseIntList("0,3,2"), (std::vector<int>{0, 3, 2}));
  EXPECT_TRUE(ParseIntList("")->empty());
  EXPECT_FALSE(ParseIntList("1,x").ok());
  EXPECT_FALSE(ParseIntList("-1").ok());
}

}  // namespace
}  // namespace autopar
