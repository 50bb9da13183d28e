#include "s3_xml.h"

#include <gtest/gtest.h>

namespace autopar::s3xml {
namespace {

TEST(S3XmlTest, ListV2Page) {
  // Shape of a ListObjectsV2 reply as S3 (and s3rver) send it.
  const char* xml =
      R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix>
<KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>
<Contents><Key>p/a&amp;b.pt</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>
<ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>p/big</Key><ETag>"aa-3"</ETag><Size>40000000</Size></Contents>
<NextContinuationToken>tok/1=</NextContinuationToken></ListBucketResult>)";
  ListPage page = ParseListV2(xml).value();
  ASSERT_EQ(page.objects.size(), 2u);
  EXPECT_EQ(page.objects[0].key, "p/a&b.pt");
  EXPECT_EQ(page.objects[0].size, 1u);
  EXPECT_EQ(page.objects[0].etag, "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(page.objects[1].size, 40000000u);
  EXPECT_EQ(page.objects[1].etag, "aa-3");
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_token, "tok/1=");
  EXPECT_FALSE(ParseListV2("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>")
                   ->truncated);
  // A reply that is not a listing is never read as an empty one.
  EXPECT_FALSE(ParseListV2("<Error><Code>InternalError</Code></Error>"));
  EXPECT_FALSE(ParseListV2("<ListBucketResult><Contents><Key>a</Key>"));  // cut short
  EXPECT_FALSE(ParseListV2("not xml"));
  EXPECT_FALSE(ParseListV2(""));
}

TEST(S3XmlTest, MultipartReplies) {
  EXPECT_EQ(ParseUploadId("<?xml version=\"1.0\"?><InitiateMultipartUploadResult><Bucket>b</Bucket>"
                          "<Key>k</Key><UploadId>a/b+c=</UploadId></InitiateMultipartUploadResult>")
                .value(),
            "a/b+c=");
  EXPECT_FALSE(ParseUploadId("<InitiateMultipartUploadResult></InitiateMultipartUploadResult>"));
  EXPECT_FALSE(ParseUploadId("<Error><UploadId>x</UploadId></Error>"));
  EXPECT_EQ(ParseCompletedEtag("<CompleteMultipartUploadResult><ETag>&quot;ab-2&quot;</ETag>"
                               "</CompleteMultipartUploadResult>")
                .value(),
            "ab-2");
  EXPECT_FALSE(ParseCompletedEtag("<Error><Code>InvalidPart</Code></Error>"));
}

TEST(S3XmlTest, NoExternalEntities) {
  // A reply with a DTD that declares an external entity: nothing is fetched or expanded.
  auto e = ParseError(
      "<?xml version=\"1.0\"?><!DOCTYPE Error [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
      "<Error><Code>&x;</Code></Error>");
  if (e) {
    EXPECT_EQ(e->code.find("root:"), std::string::npos);
  }
}

TEST(S3XmlTest, ErrorsAndEscapes) {
  auto e = ParseError(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The specified key does not "
      "exist.</Message></Error>");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "NoSuchKey");
  EXPECT_EQ(e->message, "The specified key does not exist.");
  EXPECT_FALSE(
      ParseError("<CompleteMultipartUploadResult><ETag>x</ETag></CompleteMultipartUploadResult>"));
  auto del = ParseDeleteErrors(
      "<DeleteResult><Error><Key>a</Key><Code>AccessDenied</Code><Message>no</Message></Error></"
      "DeleteResult>");
  ASSERT_EQ(del.size(), 1u);
  EXPECT_EQ(del[0].key, "a");
  EXPECT_TRUE(ParseDeleteErrors("<Error><Code>AccessDenied</Code></Error>").empty());
  auto escaped = ParseError(
      "<Error><Code>X</Code><Message>a&lt;b&gt;&quot;&apos;&amp;&#65;&#x42;&#x1234;</Message>"
      "</Error>");
  EXPECT_EQ(escaped->message, "a<b>\"'&AB\xe1\x88\xb4");
  EXPECT_EQ(StripQuotes("\"abc\""), "abc");
}

TEST(S3XmlTest, RequestBodies) {
  EXPECT_EQ(
      CompleteMultipartBody({"e1", "e2"}),
      "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag></Part>"
      "<Part><PartNumber>2</PartNumber><ETag>\"e2\"</ETag></Part></"
      "CompleteMultipartUpload>");
}

}  // namespace
}  // namespace autopar::s3xml
