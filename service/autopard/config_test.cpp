#include "config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace autopar {
namespace {

TEST(DaemonConfigTest, ParsesEveryKindOfKey) {
  auto c = ParseDaemonConfig(
      "# comment\n"
      "socket = /run/x/autopard.sock\n"
      "socket_mode = 0660\n"
      "state_dir = /var/lib/x\n"
      "node = node7\n"
      "s3_endpoint = http://127.0.0.1:18900\n"
      "s3_access_key = AK\n"
      "s3_secret_key = SK\n"
      "part_size = 8M\n"
      "concurrency = 4\n"
      "retry_max_elapsed_s = 60\n"
      "posix_fsync = false\n"
      "commit_sync = full\n"
      "multipart_threshold = 64M\n"
      "journal_uri = s3://site-bucket/journal/\n"
      "state_keep_days = 30\n"
      "metrics_listen = [::1]:9464\n",
      "a.conf");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->socket, "/run/x/autopard.sock");
  EXPECT_EQ(c->socket_mode, 0660u);
  EXPECT_EQ(c->node, "node7");
  EXPECT_EQ(c->s3.credentials.secret_access_key, "SK");
  EXPECT_EQ(c->part_size, 8ull << 20);
  EXPECT_EQ(c->concurrency, 4);
  EXPECT_EQ(c->retry.max_elapsed, std::chrono::seconds(60));
  EXPECT_FALSE(c->posix.fsync);
  EXPECT_EQ(c->commit_sync, CommitSync::kFull);
  EXPECT_EQ(c->multipart_threshold, 64ull << 20);
  EXPECT_EQ(c->state_keep_days, 30);
  EXPECT_EQ(c->metrics_listen, "[::1]:9464");
  auto defaults = ParseDaemonConfig("multipart_threshold = auto\n", "b.conf");
  ASSERT_TRUE(defaults.ok()) << defaults.message();
  EXPECT_EQ(defaults->commit_sync, CommitSync::kNormal);
  EXPECT_EQ(defaults->multipart_threshold, 0u);
  EXPECT_EQ(defaults->state_keep_days, 14);
  EXPECT_EQ(defaults->metrics_listen, "");  // off unless configured
  EXPECT_EQ(ParseDaemonConfig("state_keep_days = 0\n", "b.conf")->state_keep_days, 0);
  EXPECT_EQ(c->journal_uri, "s3://site-bucket/journal");
  auto f = ParseDaemonConfig("journal_uri = file:///shared/autopar/journal\n", "b.conf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->journal_uri, "file:///shared/autopar/journal");
  EXPECT_EQ(ParseDaemonConfig("journal_uri =\n", "b.conf")->journal_uri, "");
}

TEST(DaemonConfigTest, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"bogus = 1\n", "a.conf:1: bogus: unknown key"},
      {"\nsocket = rel\n", "a.conf:2: socket: must be an absolute path"},
      {"part_size = 1K\n", "a.conf:1: part_size: must be between 5M and 5G"},
      {"concurrency = 0\n", "a.conf:1: concurrency: must be an integer in [1, 256], got '0'"},
      {"node = a\nnode = b\n", "a.conf:2: node: given twice"},
      {"s3_endpoint = ftp://x\n", "s3_endpoint: must start with http:// or https://"},
      {"just words\n", "a.conf:1: expected 'key = value'"},
      {"s3_secret_key = x\n", "s3_secret_key is set but s3_access_key is not"},
      {"posix_fsync = maybe\n", "posix_fsync: must be true or false"},
      {"commit_sync = off\n", "a.conf:1: commit_sync: must be normal or full, got 'off'"},
      {"multipart_threshold = 1K\n", "multipart_threshold: must be auto or between 5M and 5G"},
      {"multipart_threshold = big\n", "multipart_threshold: not a size: 'big'"},
      {"journal_uri = /shared/j\n", "a.conf:1: journal_uri: "},
      {"journal_uri = file://host/j\n", "a.conf:1: journal_uri: "},
      {"journal_uri = s3://bkt/j\n", "a.conf: journal_uri: s3://bkt/j needs s3_endpoint"},
      {"state_keep_days = -1\n",
       "a.conf:1: state_keep_days: must be an integer in [0, 36500], got '-1'"},
      {"state_keep_days = 2w\n",
       "a.conf:1: state_keep_days: must be an integer in [0, 36500], got '2w'"},
      {"metrics_listen = 9464\n", "a.conf:1: metrics_listen: must be ADDRESS:PORT, got '9464'"},
      {"metrics_listen = localhost:9464\n",
       "a.conf:1: metrics_listen: not a numeric IPv4 address, got 'localhost:9464'"},
      {"metrics_listen = 127.0.0.1:99999\n",
       "a.conf:1: metrics_listen: the port must be an integer in [0, 65535], got '127.0.0.1:99999'"},
      {"metrics_listen = [::1:9464\n", "a.conf:1: metrics_listen: must be [IPV6]:PORT"},
      {"metrics_listen = [x]:9464\n", "a.conf:1: metrics_listen: not a numeric IPv6 address"},
  };
  for (const auto& c : cases) {
    auto r = ParseDaemonConfig(c.text, "a.conf");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.message().find(c.error), std::string::npos) << r.message();
  }
}

TEST(DaemonConfigTest, KeysAreExactlyWhatTheParserKnows) {
  const std::vector<std::string> keys = DaemonConfigKeys();
  EXPECT_EQ(keys.size(), std::set<std::string>(keys.begin(), keys.end()).size());
  for (const char* key : {"socket", "journal_uri", "progress_interval_s", "state_keep_days"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  for (const std::string& key : keys) {
    auto r = ParseDaemonConfig(key + " = \x01\n", "a.conf");
    EXPECT_TRUE(r.ok() || r.message().find("unknown key") == std::string::npos) << r.message();
  }
}

TEST(DaemonConfigTest, UploadRetryTimerKeys) {
  auto parsed = ParseDaemonConfig("upload_retry_initial_s = 5\nupload_retry_max_s = 600\n", "a.conf");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->upload_retry_initial, std::chrono::seconds(5));
  EXPECT_EQ(parsed->upload_retry_max, std::chrono::seconds(600));
  auto defaults = ParseDaemonConfig("", "b.conf");
  ASSERT_TRUE(defaults.ok()) << defaults.message();
  EXPECT_EQ(defaults->upload_retry_initial, std::chrono::seconds(30));
  EXPECT_EQ(defaults->upload_retry_max, std::chrono::seconds(1800));
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"upload_retry_initial_s = 0\n", "a.conf:1: upload_retry_initial_s: must be an integer in [1, 86400], got '0'"},
      {"upload_retry_max_s = 30s\n", "a.conf:1: upload_retry_max_s: must be an integer in [1, 604800], got '30s'"},
      {"upload_retry_max_s = 10\n", "a.conf: upload_retry_max_s: must be at least upload_retry_initial_s (30), got 10"},
      {"upload_retry_initial_s = 60\nupload_retry_max_s = 59\n",
       "a.conf: upload_retry_max_s: must be at least upload_retry_initial_s (60), got 59"},
  };
  for (const auto& c : cases) {
    auto r = ParseDaemonConfig(c.text, "a.conf");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.message().find(c.error), std::string::npos) << r.message();
  }
}

TEST(DaemonConfigTest, SecretsOnlyInPrivateFiles) {
  struct stat st {};
  st.st_uid = geteuid();
  struct Case {
    mode_t mode;
    bool secret;
    bool ok;
  } cases[] = {
      {0600, true, true}, {0400, true, true}, {0640, true, false},
      {0644, true, false}, {0602, true, false}, {0644, false, true},
  };
  for (const auto& c : cases) {
    st.st_mode = S_IFREG | c.mode;
    Status s = CheckConfigFilePermissions(st, c.secret, "/etc/autopar/autopard.conf");
    EXPECT_EQ(s.ok(), c.ok) << std::oct << c.mode << " " << s.message();
    if (!s.ok()) {
      EXPECT_NE(s.message().find("chmod 600"), std::string::npos);
    }
  }
  st.st_mode = S_IFREG | 0600;
  st.st_uid = geteuid() + 1;
  EXPECT_FALSE(CheckConfigFilePermissions(st, true, "x").ok());
}

// Nothing of a secret reaches the log: a broken line is not repeated, and a session token alone
// makes the file's permissions matter.
TEST(DaemonConfigTest, SecretsNeverInErrorsAndATokenAloneNeedsAPrivateFile) {
  auto r = ParseDaemonConfig("s3_secret_key wJalrXUtnFEMI/K7MDENG\n", "a.conf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message().find("wJalrXUtnFEMI"), std::string::npos) << r.message();
  char tmpl[] = "/tmp/autopard-conf-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  const std::string text = "s3_session_token = FQoGZXIvYXdzEJr\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  chmod(tmpl, 0644);
  auto loaded = LoadDaemonConfig(tmpl);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.message().find("holds S3 credentials"), std::string::npos) << loaded.message();
  chmod(tmpl, 0600);
  EXPECT_TRUE(LoadDaemonConfig(tmpl).ok());
  unlink(tmpl);
}

TEST(DaemonConfigTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("16M"), 16ull << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1ull << 30);
  EXPECT_EQ(*ParseByteSize("5242880"), 5242880u);
  EXPECT_FALSE(ParseByteSize("12X").ok());
  EXPECT_FALSE(ParseByteSize("M").ok());
}

TEST(ConfigReloadTest, ChangedKeysAreSplitIntoAppliedAndNeedingARestart) {
  auto a = ParseDaemonConfig("socket = /run/a.sock\nlog_level = info\ns3_region = eu\n", "a");
  auto b = ParseDaemonConfig("socket = /run/b.sock\nlog_level = debug\nposix_fsync = false\n", "b");
  ASSERT_TRUE(a.ok()) << a.message();
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->log_level, LogLevel::kDebug);
  ConfigChanges c = CompareForReload(*a, *b);
  // In the file's key order; a key removed (s3_region) is a change back to its default.
  EXPECT_EQ(c.applied, (std::vector<std::string>{"s3_region", "posix_fsync", "log_level"}));
  EXPECT_EQ(c.need_restart, std::vector<std::string>{"socket"});
  EXPECT_TRUE(CompareForReload(*a, *a).applied.empty());
  EXPECT_TRUE(CompareForReload(*a, *a).need_restart.empty());
}

TEST(ConfigReloadTest, JournalRetentionCannotBeShorterThanStateRetention) {
  auto c = ParseDaemonConfig("state_keep_days = 14\njournal_keep_days = 7\n", "autopard.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message(), "autopard.conf: journal_keep_days: must be 0 or at least state_keep_days (14), got 7");
  EXPECT_TRUE(ParseDaemonConfig("journal_keep_days = 0\n", "a").ok());
  EXPECT_EQ(ParseDaemonConfig("", "a")->journal_keep_days, 90);
  EXPECT_EQ(ParseDaemonConfig("", "a")->local_ckpt_cleanup, LocalCleanup::kAll);
}

TEST(ConfigReloadTest, ABadLogLevelIsNamed) {
  auto c = ParseDaemonConfig("log_level = loud\n", "autopard.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message(), "autopard.conf:1: log_level: 'loud' is not a level (error, warning, notice, info, debug)");
}

}  // namespace
}  // namespace autopar
