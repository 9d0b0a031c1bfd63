#include "engine/ir/op_schema.h"

namespace surge::engine::ir {

void RegisterBuiltinOpSchemas() {}

}  // namespace surge::engine::ir
