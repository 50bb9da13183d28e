#include "log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace autopar {
namespace {

// Runs `fn` with stderr sent to a pipe; returns what it wrote.
template <typename Fn>
std::string CaptureStderr(Fn fn) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  const int saved = dup(STDERR_FILENO);
  dup2(p[1], STDERR_FILENO);
  close(p[1]);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  return out;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { SetLogLevel(LogLevel::kInfo); }
  void TearDown() override {
    SetLogLevel(LogLevel::kInfo);
    SetLogPrefixes(false);
  }
};

TEST_F(LogTest, LinesNameTheirSeverityAndEndInANewline) {
  SetLogPrefixes(false);
  std::string out = CaptureStderr([] {
    Log(LogLevel::kInfo, "node %s serving", "n1");
    Log(LogLevel::kWarning, "s3: %d retries", 3);
    Log(LogLevel::kError, "gone");
  });
  EXPECT_EQ(out, "autopard: node n1 serving\nautopard: warning: s3: 3 retries\nautopard: error: gone\n");
}

TEST_F(LogTest, TheJournalGetsSyslogPriorities) {
  SetLogPrefixes(true);
  std::string out = CaptureStderr([] {
    Log(LogLevel::kNotice, "a");
    Log(LogLevel::kWarning, "b");
  });
  EXPECT_EQ(out, "<5>autopard: a\n<4>autopard: warning: b\n");
}

TEST_F(LogTest, LinesBelowTheLevelAreDropped) {
  SetLogPrefixes(false);
  SetLogLevel(LogLevel::kWarning);
  std::string out = CaptureStderr([] {
    Log(LogLevel::kInfo, "quiet");
    Log(LogLevel::kNotice, "quiet too");
    Log(LogLevel::kWarning, "heard");
  });
  EXPECT_EQ(out, "autopard: warning: heard\n");
  SetLogLevel(LogLevel::kDebug);
  EXPECT_EQ(CaptureStderr([] { Log(LogLevel::kDebug, "detail"); }), "autopard: detail\n");
}

TEST_F(LogTest, AnOverlongLineIsCutButEndsTheLine) {
  SetLogPrefixes(false);
  const std::string big(10000, 'x');
  std::string out = CaptureStderr([&] { Log(LogLevel::kInfo, "%s", big.c_str()); });
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  EXPECT_LT(out.size(), 4100u);
  EXPECT_EQ(out.find('\n'), out.size() - 1);
}

// A message quoting what a job named (a checkpoint file "x\n<0>autopard: ..." or an escape
// sequence) is one line with its control characters escaped: no forged entry at emergency
// priority, nothing that drives the terminal of an admin reading the log.
TEST_F(LogTest, ControlCharactersInAMessageAreEscaped) {
  SetLogPrefixes(true);
  const std::string name = "model.bin\n<0>autopard: error: node1 compromised\x1b]0;owned\x07";
  std::string out = CaptureStderr([&] { Log(LogLevel::kWarning, "upload failed: %s", name.c_str()); });
  EXPECT_EQ(out, "<4>autopard: warning: upload failed: model.bin\\x0a<0>autopard: error: node1 "
                 "compromised\\x1b]0;owned\\x07\n");
}

TEST_F(LogTest, LevelsParseByName) {
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  auto bad = ParseLogLevel("verbose");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("error, warning, notice, info, debug"), std::string::npos);
  EXPECT_STREQ(LogLevelName(LogLevel::kNotice), "notice");
}

}  // namespace
}  // namespace autopar
