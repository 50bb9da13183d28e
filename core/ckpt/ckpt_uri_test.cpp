#include "core/ckpt/ckpt_uri.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(CheckpointUriTest, Valid) {
  using K = CheckpointUri::Kind;
  struct Case {
    const char* text;
    K kind;
    const char* bucket;
    const char* prefix;
    const char* path;
    const char* canonical;
  } cases[] = {
      {"s3://my-bucket/runs/llama", K::kS3, "my-bucket", "runs/llama", "",
       "s3://my-bucket/runs/llama"},
      {"s3://my-bucket/runs/llama/", K::kS3, "my-bucket", "runs/llama", "",
       "s3://my-bucket/runs/llama"},
      {"s3://b.c-9", K::kS3, "b.c-9", "", "", "s3://b.c-9"},
      {"s3://abc/", K::kS3, "abc", "", "", "s3://abc"},
      {"file:///shared/ckpt", K::kFile, "", "", "/shared/ckpt", "file:///shared/ckpt"},
      {"file:///shared/ckpt//", K::kFile, "", "", "/shared/ckpt", "file:///shared/ckpt"},
  };
  for (const auto& c : cases) {
    auto r = ParseCheckpointUri(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.message();
    EXPECT_EQ(r->kind, c.kind) << c.text;
    EXPECT_EQ(r->bucket, c.bucket) << c.text;
    EXPECT_EQ(r->prefix, c.prefix) << c.text;
    EXPECT_EQ(r->path, c.path) << c.text;
    EXPECT_EQ(r->ToString(), c.canonical) << c.text;
    auto again = ParseCheckpointUri(r->ToString());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *r);
  }
}

TEST(CheckpointUriTest, Invalid) {
  struct Case {
    const char* text;
    const char* reason;
  } cases[] = {
      {"", "empty URI"},
      {"s3://", "missing bucket name"},
      {"s3:///x", "missing bucket name"},
      {"s3://ab/x", "invalid bucket name 'ab'"},
      {"s3://My_Bucket/x", "invalid bucket name 'My_Bucket'"},
      {"s3://-abc/x", "invalid bucket name"},
      {"s3://a..b/x", "invalid bucket name"},
      {"s3://bucket/a//b", "invalid key prefix (empty path segment)"},
      {"s3://bucket/a/../b", "invalid key prefix ('..' path segment)"},
      {"s3://bucket/a\tb", "control character"},
      {"file://host/x", "absolute path"},
      {"file://", "absolute path"},
      {"file:///", "root directory"},
      {"file:///a/./b", "'.' path segment"},
      {"gs://bucket/x", "unsupported scheme 'gs'"},
      {"/shared/ckpt", "not a URI"},
  };
  for (const auto& c : cases) {
    auto r = ParseCheckpointUri(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.message().rfind("--ckpt-upload: ", 0), 0u) << r.message();
    EXPECT_NE(r.message().find(c.reason), std::string::npos) << c.text << " -> " << r.message();
  }
}

}  // namespace
}  // namespace autopar
