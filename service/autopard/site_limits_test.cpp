#include "site_limits.h"

#include "core/plugstack.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

namespace autopar {
namespace {

class SiteLimitsTest : public ::testing::Test {
 protected:
  SiteLimitsTest() : dir_(::testing::TempDir() + "site_limits_XXXXXX") {
    EXPECT_NE(mkdtemp(dir_.data()), nullptr);
  }
  ~SiteLimitsTest() override { (void)!std::system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }
  std::string dir_;
};

TEST_F(SiteLimitsTest, PlugstackIsSlurmsPlugStackConfigElseBesideSlurmConf) {
  EXPECT_EQ(PlugstackPathFor(Write("a.conf", "ClusterName=x\n")), dir_ + "/plugstack.conf");
  EXPECT_EQ(PlugstackPathFor(Write("b.conf", "# PlugStackConfig=/no\nplugstackconfig = /etc/p.conf\n")),
            "/etc/p.conf");
  EXPECT_EQ(PlugstackPathFor(Write("c.conf", "PlugStackConfig=stack/p.conf\n")),
            dir_ + "/stack/p.conf");
  EXPECT_EQ(PlugstackPathFor(dir_ + "/missing.conf"), dir_ + "/plugstack.conf");
}

TEST_F(SiteLimitsTest, ReadsTheAutoparLineElseThePluginsDefaults) {
  auto s = ReadSiteSettings(Write("p.conf", "optional x.so\nrequired /lib/autopar.so max_requeue=2 "
                                            "max_restarts_in_place=1\n"));
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->site.max_requeue, 2);
  EXPECT_EQ(s->site.max_restarts_in_place, 1);
  EXPECT_EQ(s->from, dir_ + "/p.conf:2");
  auto none = ReadSiteSettings(Write("q.conf", "optional x.so\n"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->site.max_requeue, SiteConfig{}.max_requeue);
  EXPECT_NE(none->from.find("no autopar.so line"), std::string::npos);
  auto missing = ReadSiteSettings(dir_ + "/nothing.conf");
  ASSERT_TRUE(missing.ok());
  EXPECT_NE(missing->from.find("the plugin's defaults"), std::string::npos);
}

TEST_F(SiteLimitsTest, ABadArgumentKeepsItsDefaultAndIsToldTheOthersApply) {
  auto bad = ReadSiteSettings(
      Write("r.conf", "\nrequired autopar.so max_requeue=lots max_restarts_in_place=4\n"));
  ASSERT_TRUE(bad.ok()) << bad.message();
  EXPECT_EQ(bad->problems, std::vector<std::string>{dir_ + "/r.conf:2: plugstack.conf: max_requeue: "
                                                    "must be an integer in [0, 1000], got 'lots'"});
  EXPECT_EQ(bad->site.max_requeue, SiteConfig{}.max_requeue);
  EXPECT_EQ(bad->site.max_restarts_in_place, 4);
  EXPECT_FALSE(ReadSiteSettings(Write("s.conf", "requird autopar.so\n")).ok());
}

}  // namespace
}  // namespace autopar
