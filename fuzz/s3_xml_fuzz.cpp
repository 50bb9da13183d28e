// S3 XML replies (service/storage/s3_xml.h): every parser on the same bytes.
#include "fuzz/fuzz_util.h"
#include "service/storage/s3_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string xml = autopar::fuzz::AsString(data, size);
  (void)autopar::s3xml::ParseListV2(xml);
  (void)autopar::s3xml::ParseUploadId(xml);
  (void)autopar::s3xml::ParseCompletedEtag(xml);
  (void)autopar::s3xml::ParseError(xml);
  (void)autopar::s3xml::ParseDeleteErrors(xml);
  (void)autopar::s3xml::StripQuotes(xml);
  return 0;
}
