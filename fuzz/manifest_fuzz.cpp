// A checkpoint manifest read from storage (core/ckpt/ckpt_manifest.h): ParseManifest. A manifest
// that parses must serialise to JSON that parses to the same serialisation.
#include "core/ckpt/ckpt_manifest.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = autopar::ParseManifest(autopar::fuzz::AsString(data, size), "fuzz");
  if (!m.ok()) return 0;
  (void)autopar::CheckCompleteness(*m);
  const std::string json = autopar::ManifestToJson(*m);
  auto again = autopar::ParseManifest(json, "fuzz");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(autopar::ManifestToJson(*again) == json);
  return 0;
}
