// A published journal segment read from storage (core/failure/timeline.h): DecodePublishedJournal,
// DecodeEventsJson, the segment key (first line) and event detail fields. A journal that decodes
// must encode to text that decodes again.
#include "core/failure/timeline.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = autopar::fuzz::AsString(data, size);
  auto journal = autopar::DecodePublishedJournal(text);
  if (journal.ok()) {
    const std::string encoded = autopar::EncodePublishedJournal(*journal);
    auto again = autopar::DecodePublishedJournal(encoded);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(autopar::EncodePublishedJournal(*again) == encoded);
  }
  (void)autopar::DecodeEventsJson(text);
  const std::string first_line = text.substr(0, text.find('\n'));
  autopar::PublishedKey key;
  (void)autopar::ParsePublishedKey("42", first_line, &key);
  (void)autopar::ParseEventFields(first_line);
  return 0;
}
