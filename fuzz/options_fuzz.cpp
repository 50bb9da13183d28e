// SPANK option values (core/options.h): SetOption. The first byte picks the option, the second
// whether the value is given (an option without its optional argument gets nullptr); the rest is
// the value. SPANK callbacks may run twice with the same value: the second call must agree.
#include "core/options.h"
#include "core/site_config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto& table = autopar::OptionTable();
  const autopar::OptionId id = table[data[0] % table.size()].id;
  const bool given = (data[1] & 1) == 0;
  const std::string value = autopar::fuzz::AsString(data + 2, size - 2);
  if (value.find('\0') != std::string::npos) return 0;  // a C string from SPANK has none
  const autopar::SiteConfig site;
  autopar::JobOptions opts;
  const char* arg = given ? value.c_str() : nullptr;
  const autopar::Status first = autopar::SetOption(opts, id, arg, site);
  const autopar::Status second = autopar::SetOption(opts, id, arg, site);
  FUZZ_CHECK(first.ok() == second.ok());
  if (!first.ok()) return 0;
  auto resolved = autopar::ResolveOptions(opts, site);
  if (resolved.ok()) {
    // What the tasks receive through AUTOPAR_* must read back.
    const auto env = autopar::OptionsEnv(*resolved);
    auto back = autopar::OptionsFromEnv(
        [&env](const char* name) -> const char* {
          for (const auto& [k, v] : env)
            if (k == name) return v.c_str();
          return nullptr;
        },
        site);
    FUZZ_CHECK(back.ok());
  }
  return 0;
}
