// libFuzzer target for the safetensors reader: header parsing, bounds checks and conversion.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/import/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto st =
      surge::engine::import::SafeTensors::FromBytes(std::span<const uint8_t>(data, size), "fuzz");
  if (st.ok()) {
    for (const auto& [name, entry] : st->entries()) (void)st->ReadFloat32(name).ok();
  }
  return 0;
}
