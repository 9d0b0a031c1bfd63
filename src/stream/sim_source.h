// The simulator as an in-process post source: `surge trends --source sim:` runs the default
// scenario's generator (stream/sim) and feeds its posts straight into the pipeline, no file in
// between; `sim:FILE` reads a scenario file (YAML or JSON, on top of the default). Only the posts
// reach the pipeline: the generator's labels and ground truth stay out of it.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "stream/source.h"

namespace surge::stream {

// `spec` is "sim:" / "sim" or "sim:FILE". Errors: a bad scenario (names the file and field).
Result<std::unique_ptr<PostSource>> OpenSimSource(std::string_view spec);

}  // namespace surge::stream
