// Engine inputs from raw text for the subcommands that take a text file (calibrate, compare):
// one post per non-empty line, tokenised with a BERT WordPiece vocabulary or tokenizer.json, in
// batches padded to their longest row, filling the model's input_ids / attention_mask /
// token_type_ids (and position_ids) inputs.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/ir/graph.h"
#include "engine/runtime/engine.h"
#include "text/tokenizer.h"

namespace surge::cli {

struct TextInputOptions {
  std::string vocab;           // BERT vocab.txt
  std::string tokenizer_json;  // or HF tokenizer.json
  int max_length = 0;          // tokens per text incl. specials; 0: min(128, model positions)
  int batch = 8;               // texts per batch
};

// Adds --vocab, --tokenizer, --max-length and --batch to a subcommand that takes --texts.
void AddTextInputOptions(CLI::App& sub, TextInputOptions* options);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitCommaList(const std::string& text);

// Exactly one of vocab / tokenizer_json (InvalidArgument naming both flags otherwise).
Result<std::unique_ptr<text::Tokenizer>> LoadTokenizer(const TextInputOptions& options);

// The non-empty lines of `path` (at most `max_lines`, 0: all). InvalidArgument when none.
Result<std::vector<std::string>> ReadTextLines(const std::string& path, size_t max_lines = 0);

// Batches for `graph`. Errors: a model input that text cannot fill, --max-length beyond the
// model's position table, a token id outside the model's embedding table (the vocabulary does
// not belong to the model).
Result<std::vector<engine::TensorMap>> TextBatches(const engine::ir::Graph& graph,
                                                   const std::vector<std::string>& texts,
                                                   const text::Tokenizer& tokenizer,
                                                   const TextInputOptions& options);

}  // namespace surge::cli
