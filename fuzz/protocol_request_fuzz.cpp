// The daemon's protocol line from a client (core/proto/protocol.h): DecodeRequest. A request that
// decodes must re-encode to a line that decodes again to the same encoding.
#include "core/proto/protocol.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto req = autopar::DecodeRequest(autopar::fuzz::AsString(data, size));
  if (!req.ok()) return 0;
  const std::string line = autopar::EncodeRequest(*req);
  auto again = autopar::DecodeRequest(line);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(autopar::EncodeRequest(*again) == line);
  return 0;
}
