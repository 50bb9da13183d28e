// plugstack.conf arguments (core/site_config.h): ParseSiteConfig, one argument per line.
#include "core/site_config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto args = autopar::fuzz::SplitLines(autopar::fuzz::AsString(data, size));
  auto site = autopar::ParseSiteConfig(args);
  if (site.ok()) (void)autopar::SocketPathForNode(*site, "node1");
  return 0;
}
