// The daemon's reply line as a client reads it (core/proto/protocol.h): DecodeReply. The first
// byte picks the op the reply answers; the rest is the line.
#include "core/proto/protocol.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto op = static_cast<autopar::Op>(data[0] % (static_cast<int>(autopar::Op::kRecover) + 1));
  auto reply = autopar::DecodeReply(op, autopar::fuzz::AsString(data + 1, size - 1));
  if (!reply.ok()) return 0;
  (void)autopar::EncodeReply(op, *reply);
  return 0;
}
