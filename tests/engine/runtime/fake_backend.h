// A tiny backend for plan/runtime tests: a float32 interpreter for Add, Mul, Relu and Identity
// (second operand same shape or a single element). Registered as "fake" with arch "fake-arch".
#pragma once

#include <atomic>
#include <memory>

#include "engine/runtime/backend.h"

namespace surge::engine::testing {

inline constexpr std::string_view kFakeTactics = "fake-tactics-v1";

// Registers the fake backend once (safe to call repeatedly).
void RegisterFakeBackend();
// How many times Lower / CreateContext were called on it (all engines).
int FakeLowerCalls();

// The small graph every runtime test uses:
//   inputs  a: float32[batch,seq], b: float32[batch,seq], scale: float32[1], ids: int64[batch,seq]
//   y = Relu((a + b) * scale + w)   with constant w: float32[1] = 0.5
//   ids_out = Identity(ids)
ir::Graph MakeTestGraph();

}  // namespace surge::engine::testing
