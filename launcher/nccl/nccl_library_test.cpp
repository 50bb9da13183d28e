// The NCCL libautopar loads (nccl_library.h): found, the symbols it uses bound, a unique id made
// (no GPU needed: ncclGetUniqueId only opens NCCL's bootstrap socket), and a chosen library that
// is not there refused with one line naming it.
#include "nccl_library.h"

#include <gtest/gtest.h>

#include <cstring>

namespace autopar {
namespace {

TEST(NcclLibraryTest, LoadsTheNcclItWasBuiltAgainstOrTheLoadersAndMakesAUniqueId) {
  auto nccl = LoadNccl();
  ASSERT_TRUE(nccl.ok()) << nccl.message();
  EXPECT_GE((*nccl)->version, 21300);
  EXPECT_NE((*nccl)->path.find("libnccl.so"), std::string::npos) << (*nccl)->path;
  ncclUniqueId id{};
  ASSERT_EQ((*nccl)->get_unique_id(&id), ncclSuccess);
  const ncclUniqueId zero{};
  EXPECT_NE(std::memcmp(id.internal, zero.internal, sizeof id.internal), 0);
  EXPECT_EQ(*LoadNccl(), *nccl);  // loaded once: the same library
}

TEST(NcclLibraryTest, AChosenLibraryThatIsNotThereIsRefusedNamingIt) {
  auto nccl = OpenNccl("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.message().rfind("NCCL: cannot load AUTOPAR_NCCL_LIBRARY=/nonexistent/libnccl.so.2: ", 0), 0u)
      << nccl.message();
}

TEST(NcclLibraryTest, ALibraryThatIsNotNcclIsRefused) {
  auto nccl = OpenNccl("libm.so.6");
  ASSERT_FALSE(nccl.ok());
  EXPECT_NE(nccl.message().find("lacks a symbol of NCCL"), std::string::npos) << nccl.message();
}

TEST(NcclLibraryTest, ErrorsNameTheCallAndNcclsString) {
  auto nccl = LoadNccl();
  ASSERT_TRUE(nccl.ok()) << nccl.message();
  EXPECT_EQ((*nccl)->Error("ncclCommInitRank", ncclInvalidArgument),
            std::string("NCCL: ncclCommInitRank failed: ") + (*nccl)->error_string(ncclInvalidArgument));
}

}  // namespace
}  // namespace autopar
