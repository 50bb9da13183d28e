#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/ckpt/sha256.h"

namespace autopar {
namespace {

TEST(Sha256Test, KnownVectors) {
  // FIPS 180-2 appendix B examples and the empty message.
  struct Case {
    std::string input;
    const char* hex;
  } cases[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Sha256Hex(c.input), c.hex) << c.input.substr(0, 20);
  }
}

TEST(Sha256Test, StreamingEqualsOneShotAndResets) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data += static_cast<char>(i * 7);
  Sha256 h;
  for (size_t pos = 0; pos < data.size(); pos += 997)
    h.Update(std::string_view(data).substr(pos, 997));
  EXPECT_EQ(h.FinishHex(), Sha256Hex(data));
  h.Update("abc");  // reset after Finish
  EXPECT_EQ(h.FinishHex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, File) {
  std::string path = ::testing::TempDir() + "autopar_sha256_file";
  {
    std::ofstream f(path, std::ios::binary);
    f << std::string(3 << 20, 'x') << "tail";
  }
  auto r = Sha256FileHex(path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, Sha256Hex(std::string(3 << 20, 'x') + "tail"));
  std::remove(path.c_str());
  auto missing = Sha256FileHex(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(path), std::string::npos);
  EXPECT_NE(missing.message().find("No such file"), std::string::npos);
}

TEST(Md5Test, Rfc1321) {
  EXPECT_EQ(HexEncode(Md5Of("")), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(HexEncode(Md5Of("abc")), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(Base64Encode(Md5Of("")), "1B2M2Y8AsgTpgAmY7PhCfg==");
}

TEST(Base64Test, Rfc4648RoundTrip) {
  struct Case {
    const char* raw;
    const char* encoded;
  } cases[] = {{"", ""},
               {"f", "Zg=="},
               {"fo", "Zm8="},
               {"foo", "Zm9v"},
               {"foob", "Zm9vYg=="},
               {"fooba", "Zm9vYmE="},
               {"foobar", "Zm9vYmFy"}};
  for (const auto& c : cases) {
    std::string raw = c.raw;
    EXPECT_EQ(Base64Encode(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()), c.encoded);
    auto d = Base64Decode(c.encoded);
    ASSERT_TRUE(d.ok()) << c.encoded;
    EXPECT_EQ(*d, raw);
  }
}

TEST(Base64Test, RejectsMalformed) {
  for (const char* bad : {"Zg=", "Z===", "Zm9v!A==", "=Zm9", "Zg=a"}) {
    auto d = Base64Decode(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_EQ(d.message(), "invalid base64");
    }
  }
}

TEST(HexTest, EncodeAndCheck) {
  const uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(HexEncode(bytes, 4), "000fa0ff");
  EXPECT_TRUE(IsLowerHex("000fa0ff", 8));
  EXPECT_FALSE(IsLowerHex("000FA0FF", 8));
  EXPECT_FALSE(IsLowerHex("000fa0f", 8));
  EXPECT_FALSE(IsLowerHex("000fa0fg", 8));
}

}  // namespace
}  // namespace autopar
