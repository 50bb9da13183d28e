// Slurm host lists (core/hostlist.h): ExpandHostlist. Expanded names joined with ',' must expand
// to the same names when none of them holds hostlist syntax.
#include "core/hostlist.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto hosts = autopar::ExpandHostlist(autopar::fuzz::AsString(data, size));
  if (!hosts.ok() || hosts->empty()) return 0;
  std::string joined;
  for (const auto& h : *hosts) {
    if (h.empty() || h.find_first_of(",[]") != std::string::npos) return 0;
    if (!joined.empty()) joined += ',';
    joined += h;
  }
  auto again = autopar::ExpandHostlist(joined);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *hosts);
  return 0;
}
