#include "stream/hash.h"

#include <xxhash.h>

namespace surge::stream {

uint64_t HashBytes(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace surge::stream
