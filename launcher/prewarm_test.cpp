#include "launcher/prewarm.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "launcher/child_process.h"

namespace autopar {
namespace {

TEST(ParsePythonCommand, CommandsAWarmInterpreterStandsInFor) {
  struct Case {
    std::vector<std::string> argv;
    std::vector<std::string> interpreter;
    bool module;
    std::string target;
    std::vector<std::string> args;
  } cases[] = {
      {{"python3", "train.py"}, {"python3"}, false, "train.py", {}},
      {{"/usr/bin/python3", "/w/t.py", "--steps", "60"},
       {"/usr/bin/python3"},
       false,
       "/w/t.py",
       {"--steps", "60"}},
      {{"python", "-u", "t.py", "-m", "x"}, {"python", "-u"}, false, "t.py", {"-m", "x"}},
      {{"python3.11", "-uB", "-X", "dev", "-Wignore", "t.py"},
       {"python3.11", "-uB", "-X", "dev", "-Wignore"},
       false,
       "t.py",
       {}},
      {{"python3", "-OO", "-W", "error", "-m", "pkg.train", "--lr", "3"},
       {"python3", "-OO", "-W", "error"},
       true,
       "pkg.train",
       {"--lr", "3"}},
  };
  for (const auto& c : cases) {
    auto cmd = ParsePythonCommand(c.argv);
    ASSERT_TRUE(cmd) << c.argv[0] << " " << c.argv[1];
    EXPECT_EQ(cmd->interpreter, c.interpreter);
    EXPECT_EQ(cmd->module, c.module);
    EXPECT_EQ(cmd->target, c.target);
    EXPECT_EQ(cmd->args, c.args);
  }
}

TEST(ParsePythonCommand, OthersStartCold) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"./a.out", "t.py"},
      {"pythonista", "t.py"},
      {"python3-config", "t.py"},
      {"python3"},                    // interactive
      {"python3", "-u"},              // interactive
      {"python3", "-c", "print(1)"},  // code on the command line
      {"python3", "-", "x"},          // a script from stdin
      {"python3", "-i", "t.py"},      // interactive afterwards
      {"python3", "--version"},
      {"python3", "-m"},
      {"python3", "-m", "-x"},
      {"python3", "-X"},
  };
  for (const auto& argv : cases) {
    EXPECT_FALSE(ParsePythonCommand(argv)) << (argv.empty() ? "(empty)" : argv.back());
  }
}

TEST(WarmInterpreterArgv, CarriesTheInterpreterOptionsAndTheProgram) {
  auto cmd = ParsePythonCommand({"python3", "-u", "-m", "pkg.mod", "a", "b"});
  auto argv = WarmInterpreterArgv(*cmd, 7);
  ASSERT_EQ(argv.size(), 9u);
  EXPECT_EQ(argv[0], "python3");
  EXPECT_EQ(argv[1], "-u");
  EXPECT_EQ(argv[2], "-c");
  EXPECT_EQ(std::vector<std::string>(argv.begin() + 4, argv.end()),
            (std::vector<std::string>{"7", "module", "pkg.mod", "a", "b"}));
  EXPECT_EQ(WarmRequest({{"A", "1"}, {"B", "x=y"}}), std::string("A=1\0B=x=y\0", 10));
}

// The real thing, with the system's Python: a warm interpreter imports what the program's source
// imports (but not a module beside the program), then runs it with the activation's environment,
// its arguments and sys.path[0], and its exit code is the program's.
class WarmInterpreterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    char tmpl[] = "/tmp/autopar-prewarm-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    sigemptyset(&mask_);
  }
  void TearDown() override {
    if (!dir_.empty()) (void)!std::system(("rm -rf " + dir_).c_str());
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static int Wait(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ExitCodeFromWaitStatus(status);
  }
  bool AwaitReady(WarmInterpreter* w) {
    for (int i = 0; i < 1000 && !w->Ready(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return w->Ready();
  }
  std::string dir_;
  sigset_t mask_;
};

TEST_F(WarmInterpreterTest, ImportsFirstThenRunsTheProgramWithTheNewEnvironment) {
  // Beside the program: its own modules, whose import is recorded (it must not happen before the
  // run), but what they import (directly, or through a package's relative imports) is prepared.
  Write("besides.py",
        "import os\nfrom xml.dom import minidom\n"
        "open(os.environ['OUT'] + '/besides', 'a').write('imported\\n')\n");
  ASSERT_EQ(mkdir((dir_ + "/pkg").c_str(), 0755), 0);
  Write("pkg/__init__.py", "");
  Write("pkg/helper.py", "from . import deep\n");
  Write("pkg/deep.py", "import wave\n");
  Write(
      "train.py",
      "import sys, os\n"
      "was_warm = all(m in sys.modules for m in ('xml.dom.minidom', 'wave')) and \\\n"
      "    not any(m in sys.modules for m in ('besides', 'pkg'))\n"
      "import besides\nfrom pkg import helper\n"
      "if __name__ == '__main__':\n"
      "    with open(os.environ['OUT'] + '/result', 'w') as f:\n"
      "        f.write(' '.join([str(was_warm), os.environ['MASTER_PORT'], os.getenv('OLD', '-'),\n"
      "                          sys.argv[0], ','.join(sys.argv[1:]), sys.path[0],\n"
      "                          open('/proc/self/comm').read().strip()]))\n"
      "    sys.exit(int(sys.argv[1]))\n");
  auto cmd = ParsePythonCommand({"/usr/bin/python3", dir_ + "/train.py", "3", "x y"});
  ASSERT_TRUE(cmd);
  WarmInterpreter warm;
  ASSERT_TRUE(
      warm.Start(*cmd, {{"PATH", "/usr/bin:/bin"}, {"OLD", "1"}, {"OUT", dir_}}, {}, mask_).ok());
  ASSERT_TRUE(AwaitReady(&warm));
  EXPECT_EQ(Read("besides"), "");  // the program's own module waits for the program
  std::ifstream comm("/proc/" + std::to_string(warm.pid()) + "/comm");
  std::string name;
  std::getline(comm, name);
  EXPECT_EQ(name, "autopar-warm");  // never taken for the program
  auto pid = warm.Activate({{"PATH", "/usr/bin:/bin"}, {"MASTER_PORT", "29511"}, {"OUT", dir_}});
  ASSERT_TRUE(pid.ok()) << pid.message();
  EXPECT_FALSE(warm.started());
  EXPECT_EQ(Wait(*pid), 3);
  EXPECT_EQ(Read("result"), "True 29511 - " + dir_ + "/train.py 3,x y " + dir_ + " python3");
  EXPECT_EQ(Read("besides"), "imported\n");
}

// The working directory may be one other users can write (a shared scratch directory): modules
// planted there under the names the bootstrap imports (socket, ast, importlib's) are never
// imported; the program, in a directory of its own, runs as `python SCRIPT` would run it.
TEST_F(WarmInterpreterTest, NothingIsImportedFromTheWorkingDirectory) {
  ASSERT_EQ(mkdir((dir_ + "/shared").c_str(), 0777), 0);
  ASSERT_EQ(mkdir((dir_ + "/prog").c_str(), 0755), 0);
  for (const char* planted : {"socket", "ast", "runpy", "os", "importlib"}) {
    Write(std::string("shared/") + planted + ".py",
          "open('" + dir_ + "/planted-ran', 'a').write('" + planted + "\\n')\n");
  }
  Write("prog/train.py", "import sys\nopen(sys.argv[1], 'w').write(sys.path[0])\n");
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir((dir_ + "/shared").c_str()), 0);
  auto cmd = ParsePythonCommand({"/usr/bin/python3", dir_ + "/prog/train.py", dir_ + "/result"});
  ASSERT_TRUE(cmd);
  WarmInterpreter warm;
  const bool started = warm.Start(*cmd, {{"PATH", "/usr/bin:/bin"}}, {}, mask_).ok();
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(started);
  ASSERT_TRUE(AwaitReady(&warm));
  auto pid = warm.Activate({{"PATH", "/usr/bin:/bin"}});
  ASSERT_TRUE(pid.ok()) << pid.message();
  EXPECT_EQ(Wait(*pid), 0);
  EXPECT_EQ(Read("planted-ran"), "");
  EXPECT_EQ(Read("result"), dir_ + "/prog");
}

TEST_F(WarmInterpreterTest, AModuleRunsAsWithDashM) {
  Write("job_main.py",
        "import os, sys\nopen(os.environ['OUT'] + '/result', 'w').write(__name__ + ' ' + "
        "os.path.basename(sys.argv[0]) + ' ' + sys.argv[1])\n");
  auto cmd = ParsePythonCommand({"/usr/bin/python3", "-m", "job_main", "arg"});
  ASSERT_TRUE(cmd);
  WarmInterpreter warm;
  // -m looks in the working directory, as the interpreter does: start it there.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  Status st = warm.Start(*cmd, {{"OUT", dir_}}, {}, mask_);
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(st.ok()) << st.message();
  auto pid = warm.Activate({{"OUT", dir_}});
  ASSERT_TRUE(pid.ok()) << pid.message();
  EXPECT_EQ(Wait(*pid), 0);
  EXPECT_EQ(Read("result"), "__main__ job_main.py arg");
}

TEST_F(WarmInterpreterTest, AnUncaughtExceptionEndsItLikeTheProgram) {
  Write("boom.py",
        "import os\nopen(os.environ['OUT'] + '/ran', 'w').close()\nraise RuntimeError('boom')\n");
  WarmInterpreter warm;
  ASSERT_TRUE(
      warm.Start(*ParsePythonCommand({"/usr/bin/python3", dir_ + "/boom.py"}), {}, {}, mask_).ok());
  auto pid = warm.Activate({{"OUT", dir_}});
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(Wait(*pid), 1);
  EXPECT_EQ(access((dir_ + "/ran").c_str(), F_OK), 0);
}

TEST_F(WarmInterpreterTest, OneThatIsGoneIsRefusedSoTheProgramStartsCold) {
  Write("t.py", "pass\n");
  WarmInterpreter warm;
  ASSERT_TRUE(
      warm.Start(*ParsePythonCommand({"/usr/bin/python3", dir_ + "/t.py"}), {}, {}, mask_).ok());
  ASSERT_TRUE(AwaitReady(&warm));
  // Slurm signals every process of the step, a warm interpreter too.
  ASSERT_EQ(kill(warm.pid(), SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto pid = warm.Activate({});
  EXPECT_FALSE(pid.ok());
  EXPECT_FALSE(warm.started());
  // Discarding one that waits ends it: its activation can no longer happen.
  ASSERT_TRUE(
      warm.Start(*ParsePythonCommand({"/usr/bin/python3", dir_ + "/t.py"}), {}, {}, mask_).ok());
  const pid_t waiting = warm.pid();
  warm.Discard();
  EXPECT_FALSE(warm.started());
  EXPECT_NE(kill(waiting, 0), 0);  // ended and reaped
  EXPECT_FALSE(warm.Activate({}).ok());
}

TEST_F(WarmInterpreterTest, OneMadeForAnotherGenerationIsRefused) {
  // autopard reads a program's generation from /proc/PID/environ, which keeps the environment
  // the interpreter was started with: one made for generation 0 cannot run generation 1.
  Write("t.py", "pass\n");
  WarmInterpreter warm;
  ASSERT_TRUE(warm.Start(*ParsePythonCommand({"/usr/bin/python3", dir_ + "/t.py"}),
                         {{"AUTOPAR_RESTART_GENERATION", "0"}}, {}, mask_)
                  .ok());
  const pid_t made = warm.pid();
  auto pid = warm.Activate({{"AUTOPAR_RESTART_GENERATION", "1"}});
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.message().find("made for generation 0, not 1"), std::string::npos) << pid.message();
  EXPECT_FALSE(warm.started());
  EXPECT_NE(kill(made, 0), 0);
}

}  // namespace
}  // namespace autopar
