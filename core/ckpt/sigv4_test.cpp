// SigV4 against AWS's published signing test vectors.
//
// Sources:
//  * The AWS Signature Version 4 test suite ("aws-sig-v4-test-suite", linked from
//    https://docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html), as shipped in
//    botocore (tests/unit/auth/aws4_testsuite/) and aws-sdk-js-v3
//    (packages/signature-v4/src/suite.fixture.ts): credentials AKIDEXAMPLE /
//    wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, 20150830T123600Z, us-east-1, service "service".
//    Cases whose path needs double encoding (get-utf8, normalize-path/*) are left out: autopar
//    signs only S3 requests, whose paths are encoded once.
//  * The S3 "GET Object" example of "Signature Calculations for the Authorization Header"
//    (https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html).
//  * The signing-key example of "Examples of how to derive a signing key for Signature Version 4"
//    (AWS General Reference).
#include "core/ckpt/sigv4.h"

#include <gtest/gtest.h>

#include <chrono>

#include "core/ckpt/sha256.h"

namespace autopar {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;
using Query = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kDate = "20150830T123600Z";
const SigV4Credentials kSuiteCreds{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
constexpr const char* kScope =
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, ";

Headers Base(Headers extra = {}) {
  Headers h{{"Host", "example.amazonaws.com"}, {"X-Amz-Date", kDate}};
  h.insert(h.end(), extra.begin(), extra.end());
  return h;
}

TEST(SigV4Test, AwsTestSuite) {
  struct Case {
    const char* name;
    const char* method;
    std::string path;
    Query query;
    Headers headers;
    std::string body;
    const char* authorization_tail;  // after the credential scope
  } cases[] = {
      {"get-vanilla",
       "GET",
       "/",
       {},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-vanilla-query-order-key-case",
       "GET",
       "/",
       {{"Param2", "value2"}, {"Param1", "value1"}},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
      {"get-vanilla-empty-query-key",
       "GET",
       "/",
       {{"Param1", "value1"}},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"},
      {"get-vanilla-query-unreserved",
       "GET",
       "/",
       {{"-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
         "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
      {"get-vanilla-utf8-query",
       "GET",
       "/",
       {{"\xe1\x88\xb4", "bar"}},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
      {"get-unreserved",
       "GET",
       "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
       {},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
      {"get-header-key-duplicate",
       "GET",
       "/",
       {},
       Base({{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}}),
       "",
       "SignedHeaders=host;my-header1;x-amz-date, "
       "Signature=c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
      {"get-header-value-order",
       "GET",
       "/",
       {},
       Base({{"My-Header1", "value4"},
             {"My-Header1", "value1"},
             {"My-Header1", "value3"},
             {"My-Header1", "value2"}}),
       "",
       "SignedHeaders=host;my-header1;x-amz-date, "
       "Signature=08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
      {"get-header-value-trim",
       "GET",
       "/",
       {},
       Base({{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}}),
       "",
       "SignedHeaders=host;my-header1;my-header2;x-amz-date, "
       "Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
      {"post-vanilla",
       "POST",
       "/",
       {},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
      {"post-vanilla-query",
       "POST",
       "/",
       {{"Param1", "value1"}},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
      {"post-vanilla-query-nonunreserved",
       "POST",
       "/",
       {{"@#$%^", ""}, {"+", "/,?><`\";:\\|][{}"}},
       Base(),
       "",
       "SignedHeaders=host;x-amz-date, "
       "Signature=66c82657c86e26fb25238d0e69f011edc4c6df5ae71119d7cb98ed9b87393c1e"},
      {"post-header-key-sort",
       "POST",
       "/",
       {},
       Base({{"My-Header1", "value1"}}),
       "",
       "SignedHeaders=host;my-header1;x-amz-date, "
       "Signature=c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
      {"post-header-value-case",
       "POST",
       "/",
       {},
       Base({{"My-Header1", "VALUE1"}}),
       "",
       "SignedHeaders=host;my-header1;x-amz-date, "
       "Signature=cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
      {"post-sts-header-before",
       "POST",
       "/",
       {},
       Base({{"X-Amz-Security-Token",
              "AQoDYXdzEPT//////////"
              "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfK"
              "D8YUuwthAx7mSEI/qkPpKPi/"
              "kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q"
              "6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+"
              "scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="}}),
       "",
       "SignedHeaders=host;x-amz-date;x-amz-security-token, "
       "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
      {"post-x-www-form-urlencoded",
       "POST",
       "/",
       {},
       Base({{"Content-Type", "application/x-www-form-urlencoded"}}),
       "Param1=value1",
       "SignedHeaders=content-type;host;x-amz-date, "
       "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
      {"post-x-www-form-urlencoded-parameters",
       "POST",
       "/",
       {},
       Base({{"Content-Type", "application/x-www-form-urlencoded; charset=utf8"}}),
       "Param1=value1",
       "SignedHeaders=content-type;host;x-amz-date, "
       "Signature=1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe"},
  };
  for (const auto& c : cases) {
    SigV4Request req{c.method, c.path, c.query, c.headers, Sha256Hex(c.body)};
    SigV4Result r = SigV4Sign(req, kSuiteCreds, "us-east-1", "service", kDate);
    EXPECT_EQ(r.authorization, std::string(kScope) + c.authorization_tail) << c.name;
  }
}

TEST(SigV4Test, IntermediateStepsOfGetVanilla) {
  SigV4Request req{
      "GET", "/", {{"Param2", "value2"}, {"Param1", "value1"}}, Base(), kEmptyPayloadSha256};
  std::string signed_headers;
  std::string creq = SigV4CanonicalRequest(req, &signed_headers);
  EXPECT_EQ(creq,
            "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(signed_headers, "host;x-amz-date");
  EXPECT_EQ(SigV4StringToSign(kDate, "us-east-1", "service", creq),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0");
  req.query.clear();
  EXPECT_EQ(SigV4StringToSign(kDate, "us-east-1", "service", SigV4CanonicalRequest(req, nullptr)),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
}

TEST(SigV4Test, SigningKeyExample) {
  EXPECT_EQ(HexEncode(SigV4SigningKey("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215",
                                      "us-east-1", "iam")),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

TEST(SigV4Test, S3GetObjectExample) {
  SigV4Credentials creds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
  SigV4Request req{"GET",
                   "/test.txt",
                   {},
                   {{"Host", "examplebucket.s3.amazonaws.com"},
                    {"Range", "bytes=0-9"},
                    {"x-amz-content-sha256", kEmptyPayloadSha256},
                    {"x-amz-date", "20130524T000000Z"}},
                   kEmptyPayloadSha256};
  SigV4Result r = SigV4Sign(req, creds, "us-east-1", "s3", "20130524T000000Z");
  EXPECT_EQ(r.string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(r.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(r.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, UnsignedPayloadIsTheLastLine) {
  SigV4Request req{
      "PUT", "/bucket/a b/c", {{"partNumber", "3"}, {"uploadId", "x/y"}}, Base(), kUnsignedPayload};
  std::string creq = SigV4CanonicalRequest(req, nullptr);
  EXPECT_EQ(creq.substr(0, creq.find('\n', 4) + 1), "PUT\n/bucket/a%20b/c\n");
  EXPECT_NE(creq.find("\npartNumber=3&uploadId=x%2Fy\n"), std::string::npos);
  EXPECT_EQ(creq.substr(creq.rfind('\n') + 1), "UNSIGNED-PAYLOAD");
}

TEST(SigV4Test, AmzDateAndEncoding) {
  auto t = std::chrono::system_clock::from_time_t(1440938160);  // 2015-08-30 12:36:00 UTC
  EXPECT_EQ(AmzDate(t), "20150830T123600Z");
  EXPECT_EQ(AwsUriEncode("a b/c~+=", true), "a%20b/c~%2B%3D");
  EXPECT_EQ(AwsUriEncode("a b/c", false), "a%20b%2Fc");
}

}  // namespace
}  // namespace autopar
