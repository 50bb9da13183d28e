#include "core/plugstack.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace autopar {
namespace {

TEST(PlugstackTest, ParsesPluginLinesIncludesAndComments) {
  auto p = ParsePlugstackText(
      "# a site's stack\n"
      "required /usr/lib/x86_64-linux-gnu/slurm-wlm/autopar.so max_requeue=5  socket=/run/a.sock\n"
      "\n"
      "optional pyxis.so   # a comment after the line\n"
      "include /etc/slurm/plugstack.conf.d/*.conf\n",
      "plugstack.conf");
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->plugins.size(), 2u);
  EXPECT_TRUE(p->plugins[0].required);
  EXPECT_EQ(p->plugins[0].line, 2);
  EXPECT_EQ(p->plugins[0].args, (std::vector<std::string>{"max_requeue=5", "socket=/run/a.sock"}));
  EXPECT_FALSE(p->plugins[1].required);
  EXPECT_EQ(p->plugins[1].plugin, "pyxis.so");
  EXPECT_TRUE(p->plugins[1].args.empty());
  EXPECT_EQ(p->includes, (std::vector<std::string>{"/etc/slurm/plugstack.conf.d/*.conf"}));
}

TEST(PlugstackTest, MalformedLinesNameTheFileAndLine) {
  auto typo = ParsePlugstackText("\nrequird autopar.so\n", "plugstack.conf");
  EXPECT_EQ(typo.message(), "plugstack.conf:2: 'requird': expected required, optional or include");
  EXPECT_EQ(ParsePlugstackText("optional\n", "p").message(), "p:1: optional: no plugin path");
  EXPECT_EQ(ParsePlugstackText("include a b\n", "p").message(),
            "p:1: include: expected one path or glob");
}

TEST(PlugstackTest, FindsThePluginByFileNameOnce) {
  auto p = ParsePlugstackText("optional /x/notautopar.so\nrequired /lib/autopar.so a=1\n", "p");
  ASSERT_TRUE(p.ok());
  auto found = FindPlugin(p->plugins, "autopar.so");
  ASSERT_TRUE(found.ok());
  ASSERT_NE(*found, nullptr);
  EXPECT_EQ((*found)->args, std::vector<std::string>{"a=1"});
  EXPECT_EQ(*FindPlugin(p->plugins, "pyxis.so"), nullptr);
  auto twice = ParsePlugstackText("required autopar.so\noptional /b/autopar.so\n", "p");
  EXPECT_EQ(FindPlugin(twice->plugins, "autopar.so").message(),
            "p:2: autopar.so is loaded already at p:1");
}

TEST(PlugstackTest, ReadsIncludedFilesRelativeToTheIncludingOne) {
  std::string dir = ::testing::TempDir() + "plugstack_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  ASSERT_EQ(mkdir((dir + "/plugstack.conf.d").c_str(), 0755), 0);
  std::ofstream(dir + "/plugstack.conf") << "optional first.so\ninclude plugstack.conf.d/*.conf\n"
                                         << "include /nonexistent/*.conf\n";
  std::ofstream(dir + "/plugstack.conf.d/autopar.conf") << "required autopar.so max_requeue=2\n";
  auto lines = ReadPlugstack(dir + "/plugstack.conf");
  ASSERT_TRUE(lines.ok()) << lines.message();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1].file, dir + "/plugstack.conf.d/autopar.conf");
  EXPECT_EQ((*lines)[1].args, std::vector<std::string>{"max_requeue=2"});
  EXPECT_FALSE(ReadPlugstack(dir + "/missing.conf").ok());
  // A file that includes itself ends at the nesting bound, with an error.
  std::ofstream(dir + "/loop.conf") << "include loop.conf\n";
  EXPECT_NE(ReadPlugstack(dir + "/loop.conf").message().find("nested more than 8 deep"),
            std::string::npos);
  (void)!std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace autopar
