#include "engine/ir/op_schema.h"
#include "engine/ir/ops_common.h"

namespace surge::engine::ir {

void RegisterBuiltinOpSchemas() {
  ops::RegisterElementwiseOps();
  ops::RegisterShapeOps();
  ops::RegisterNnOps();
  ops::RegisterFusedOps();
}

}  // namespace surge::engine::ir
