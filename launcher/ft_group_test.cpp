#include "launcher/ft_group.h"
#include "launcher/ft_group_testing.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

namespace autopar {
namespace {

// A program's end of its launcher's channel (python/autopar/ft/channel.py's part): lines out,
// lines in.
class Program {
 public:
  explicit Program(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  }
  ~Program() { close(fd_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  void Send(const std::string& line) {
    const std::string l = line + "\n";
    ASSERT_EQ(write(fd_, l.data(), l.size()), static_cast<ssize_t>(l.size()));
  }
  // Every whole line received so far.
  const std::vector<std::string>& Lines() {
    char buf[65536];
    pollfd p{fd_, POLLIN, 0};
    while (poll(&p, 1, 0) > 0) {
      const ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) break;
      pending_.append(buf, static_cast<size_t>(n));
    }
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos; pending_.erase(0, nl + 1)) {
      lines_.push_back(pending_.substr(0, nl));
    }
    return lines_;
  }
  // The last line of `kind` received, "" when none.
  std::string Last(const std::string& kind) {
    std::string last;
    for (const auto& l : Lines()) {
      if (l.rfind(kind + " ", 0) == 0) last = l;
    }
    return last;
  }

 private:
  int fd_;
  std::string pending_;
  std::vector<std::string> lines_;
};

// The value of `key` in an event-fields line ("quorum epoch=0 step=4 ..."), "" when absent.
std::string FieldOf(const std::string& line, const std::string& key) {
  const size_t sp = line.find(' ');
  if (sp == std::string::npos) return "";
  for (const auto& [k, v] : ParseEventFields(line.substr(sp + 1))) {
    if (k == key) return v;
  }
  return "";
}

std::string Join(int64_t epoch, int64_t step, int port) {
  return "join v=1 epoch=" + std::to_string(epoch) + " step=" + std::to_string(step) +
         " store=127.0.0.1:" + std::to_string(port);
}

// A program on each launcher of `run`, each joining from step 4 (its store at port 7000 + rank).
std::vector<std::unique_ptr<Program>> JoinAll(Launchers& run) {
  std::vector<std::unique_ptr<Program>> programs;
  for (size_t r = 0; r < run.ft.size(); ++r) {
    programs.push_back(std::make_unique<Program>(run.ft[r]->socket_path()));
    programs.back()->Send(Join(-1, 4, 7000 + static_cast<int>(r)));
  }
  return programs;
}

TEST(FtGroup, EveryProgramGetsTheQuorumTheLowestLauncherDecides) {
  Launchers run(3);
  auto programs = JoinAll(run);
  ASSERT_TRUE(run.PumpUntil([&] {
    for (auto& p : programs) {
      if (p->Last("quorum").empty()) return false;
    }
    return true;
  }));
  for (int r = 0; r < 3; ++r) {
    const std::string q = programs[static_cast<size_t>(r)]->Last("quorum");
    EXPECT_EQ(FieldOf(q, "epoch"), "0") << q;
    EXPECT_EQ(FieldOf(q, "step"), "4") << q;
    EXPECT_EQ(FieldOf(q, "members"), "0@0@127.0.0.1:7000@4,1@1@127.0.0.1:7001@4,2@2@127.0.0.1:7002@4") << q;
    EXPECT_EQ(FieldOf(q, "heals"), "") << q;
    EXPECT_TRUE(run.ft[static_cast<size_t>(r)]->in_group());
  }
  // Only the leader journals the quorum, once.
  EXPECT_EQ(run.journal[0], (std::vector<std::pair<std::string, int64_t>>{{event_kind::kFtQuorum, 4}}));
  EXPECT_TRUE(run.journal[1].empty() && run.journal[2].empty());
  EXPECT_TRUE(run.ft[0]->leads() && !run.ft[1]->leads());
}

TEST(FtGroup, AProgramCannotSpeakForAnotherRankOrLauncherOrItsCount) {
  Launchers run(2);
  Program p0(run.ft[0]->socket_path()), p1(run.ft[1]->socket_path());
  p0.Send(Join(-1, 4, 7000) + " rank=1 launcher=1 replaced=0");
  p1.Send(Join(-1, 4, 7001) + " rank=0 launcher=0 replaced=9");
  ASSERT_TRUE(run.PumpUntil([&] { return !p0.Last("quorum").empty() && !p1.Last("quorum").empty(); }));
  const std::string q = p0.Last("quorum");
  EXPECT_EQ(FieldOf(q, "members"), "0@0@127.0.0.1:7000@4,1@1@127.0.0.1:7001@4") << q;
  EXPECT_EQ(FieldOf(q, "replaced"), "") << q;  // nobody replaced anything
}

TEST(FtGroup, AReplacementIsHealedFromALiveMemberAndCounted) {
  Launchers run(3);
  auto programs = JoinAll(run);
  ASSERT_TRUE(run.PumpUntil([&] { return !programs[2]->Last("quorum").empty(); }));
  // Rank 1's program crashes; its launcher starts a replacement, which joins with no state.
  run.ft[1]->ProgramEnded();
  run.ft[1]->CountReplacement();
  programs[1] = std::make_unique<Program>(run.ft[1]->socket_path());
  programs[1]->Send(Join(-1, -1, 7101));
  // The others are told to give up epoch 0, and join again from the step they committed.
  ASSERT_TRUE(run.PumpUntil([&] { return !programs[0]->Last("abandon").empty() && !programs[2]->Last("abandon").empty(); }));
  EXPECT_EQ(programs[0]->Last("abandon"), "abandon v=1 epoch=0");
  programs[0]->Send(Join(0, 6, 7000));
  programs[2]->Send(Join(0, 6, 7002));
  ASSERT_TRUE(run.PumpUntil([&] {
    return FieldOf(programs[1]->Last("quorum"), "epoch") == "1" && FieldOf(programs[0]->Last("quorum"), "epoch") == "1";
  }));
  const std::string q = programs[1]->Last("quorum");
  EXPECT_EQ(FieldOf(q, "step"), "6") << q;
  EXPECT_EQ(FieldOf(q, "heals"), "1<0") << q;  // to rank 1 from rank 0
  EXPECT_EQ(FieldOf(q, "replaced"), "1:1") << q;
  for (auto& f : run.ft) EXPECT_EQ(f->replacements(), 1);
}

TEST(FtGroup, ALauncherMayReplaceWithinTheBudgetAsFarAsItKnows) {
  Launchers run(2, /*max_replacements=*/1);
  EXPECT_TRUE(run.ft[0]->MayReplace());
  run.ft[0]->CountReplacement();
  EXPECT_FALSE(run.ft[0]->MayReplace());
  EXPECT_TRUE(run.ft[1]->MayReplace());  // it has not heard of launcher 0's yet: the quorum will
}

TEST(FtGroup, AReplacementPastTheRunsBudgetIsRefusedAtTheQuorum) {
  Launchers run(2, /*max_replacements=*/0);
  Program p0(run.ft[0]->socket_path());
  auto p1 = std::make_unique<Program>(run.ft[1]->socket_path());
  p0.Send(Join(-1, 4, 7000));
  p1->Send(Join(-1, 4, 7001));
  ASSERT_TRUE(run.PumpUntil([&] { return !p1->Last("quorum").empty(); }));
  run.ft[1]->ProgramEnded();
  run.ft[1]->CountReplacement();
  p1 = std::make_unique<Program>(run.ft[1]->socket_path());
  p1->Send(Join(-1, -1, 7101));
  ASSERT_TRUE(run.PumpUntil([&] { return !p0.Last("abandon").empty(); }));
  p0.Send(Join(0, 6, 7000));
  std::string why;
  EXPECT_FALSE(run.PumpUntil([] { return false; }, &why));
  EXPECT_NE(why.find("no quorum: "), std::string::npos) << why;
  EXPECT_NE(why.find("restarts-in-place"), std::string::npos) << why;
}

TEST(FtGroup, AMalformedJoinIsAnsweredWithAnError) {
  Launchers run(1);
  Program p(run.ft[0]->socket_path());
  p.Send("join v=1 epoch=x step=4 store=127.0.0.1:7000");
  ASSERT_TRUE(run.PumpUntil([&] { return !p.Last("error").empty(); }));
  EXPECT_EQ(p.Last("error"), "error reason=malformed-join why=\"epoch: 'x' is not an integer in range\"");
  p.Send("join v=2 epoch=-1 step=4 store=127.0.0.1:7000");  // a version this launcher does not know
  ASSERT_TRUE(run.PumpUntil([&] { return p.Lines().size() == 2; }));
  EXPECT_EQ(p.Last("error"), "error reason=malformed-join why=\"join: version '2', not 1\"");
  EXPECT_FALSE(run.ft[0]->in_group());
}

TEST(FtGroup, WhenTheLowestLauncherIsGoneTheNextLeadsAndItsRankLeaves) {
  Launchers run(3, -1, /*gone=*/{0}, /*min_world=*/2);
  Program p1(run.ft[1]->socket_path()), p2(run.ft[2]->socket_path());
  p1.Send(Join(-1, 4, 7001));
  p2.Send(Join(-1, 4, 7002));
  ASSERT_TRUE(run.PumpUntil([&] { return !p1.Last("quorum").empty() && !p2.Last("quorum").empty(); }));
  const std::string q = p2.Last("quorum");
  EXPECT_EQ(FieldOf(q, "members"), "1@1@127.0.0.1:7001@4,2@2@127.0.0.1:7002@4") << q;
  EXPECT_EQ(run.journal[1].size(), 1u);
  EXPECT_TRUE(run.ft[1]->leads());
}

}  // namespace
}  // namespace autopar
