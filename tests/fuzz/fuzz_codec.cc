// Fuzz target: the record and key decoders of engine/store/codec and engine/store/tables (what a
// damaged store hands them). Each input is decoded twice: as a sealed record (envelope checks
// first), and as a record body sealed here with a valid checksum, so the fuzzer reaches the body
// parsers behind the checksum. A record that decodes must encode back to the same body (round
// trip).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/leases.h"
#include "engine/store/tables/outbox.h"

namespace {

void DecodeAll(std::string_view sealed) {
  using namespace wharf::codec;
  wharf::Fact fact;
  if (DecodeFact(sealed, &fact).ok()) {
    wharf::Fact again;
    // A decoded fact re-encodes into a record that decodes to the same fact.
    if (!DecodeFact(EncodeFact(fact), &again).ok() || again.id != fact.id ||
        again.type != fact.type || again.key != fact.key || again.payload != fact.payload ||
        again.headers != fact.headers || again.source != fact.source ||
        again.commit_ms != fact.commit_ms || again.deliver_at_ms != fact.deliver_at_ms ||
        again.partition != fact.partition || again.v != fact.v || again.depth != fact.depth) {
      __builtin_trap();
    }
  }
  uint64_t fact_id = 0, epoch = 0;
  namespace tables = wharf::tables;
  if (tables::cursors::DecodeValue(sealed, &fact_id, &epoch).ok()) {
    uint64_t id2 = 0, epoch2 = 0;
    if (!tables::cursors::DecodeValue(tables::cursors::EncodeValue(fact_id, epoch), &id2, &epoch2)
             .ok() ||
        id2 != fact_id || epoch2 != epoch) {
      __builtin_trap();
    }
  }
  std::string reason;
  // Any outcome is fine: these must only not crash (the build checks every Status: say so).
  tables::dead_letters::DecodeValue(sealed, &reason, &fact).PermitUncheckedError();
  tables::leases::Record lease;
  tables::leases::DecodeValue(sealed, &lease).PermitUncheckedError();
  std::string_view body;
  Unseal(sealed, &body).PermitUncheckedError();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  DecodeAll(input);
  DecodeAll(wharf::codec::Seal(input));
  // Keys: outbox keys are fixed-size (the store never hands over another size); integers in
  // big-endian decode back to what encoded them.
  if (size >= wharf::tables::outbox::kKeyBytes) {
    std::string_view key = input.substr(0, wharf::tables::outbox::kKeyBytes);
    uint32_t partition = 0;
    uint64_t lsn = 0;
    if (!wharf::tables::outbox::DecodeKey(key, &partition, &lsn)) __builtin_trap();
    if (wharf::tables::outbox::Key(partition, lsn) != key) __builtin_trap();
  }
  (void)wharf::codec::PartitionOfKey(input, 1 + (size % 4096));
  return 0;
}
