// Model importers: ONNX files (protobuf; opsets 13-20; external data) and Hugging Face checkpoint
// folders (config.json + model.safetensors) become a Surge IR graph.
//
// The graph's inputs keep the model's names (input_ids, attention_mask, token_type_ids, ...) with
// symbolic dims ("batch", "seq"); outputs keep theirs ("logits", "last_hidden_state").
// Unsupported ops are reported with op type, node name and opset.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "engine/ir/graph.h"

namespace surge::engine::import {

// An .onnx file (external data resolved relative to its folder).
Result<ir::Graph> ImportOnnx(const std::string& path);
// An ONNX model already in memory; external data is resolved relative to `model_dir`, and an empty
// `model_dir` rejects models that use external data.
Result<ir::Graph> ImportOnnxFromBytes(std::span<const uint8_t> bytes, const std::string& model_dir);
// A Hugging Face folder with config.json and model.safetensors (fp32, fp16 or bf16 weights;
// weights are converted to float32). Architectures: BERT, RoBERTa/XLM-R, DistilBERT, ELECTRA with
// sequence-classification, token-classification or no head.
Result<ir::Graph> ImportHuggingFace(const std::string& folder);
// Dispatches on what `path` is: a folder → Hugging Face, otherwise ONNX.
Result<ir::Graph> ImportModel(const std::string& path);

}  // namespace surge::engine::import
