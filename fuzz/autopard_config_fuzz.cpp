// autopard.conf (service/autopard/config.h): ParseDaemonConfig on the whole text, and
// ParseByteSize on its first line.
#include "fuzz/fuzz_util.h"
#include "service/autopard/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = autopar::fuzz::AsString(data, size);
  (void)autopar::ParseDaemonConfig(text, "autopard.conf");
  (void)autopar::ParseByteSize(text.substr(0, text.find('\n')));
  return 0;
}
