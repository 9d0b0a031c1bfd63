// Record codecs: the bytes of each inter-stage record on a Kafka topic (message value) and in
// stage snapshots. Compact little-endian binary (bytes.h) inside a frame (magic "SRG1", record
// kind, format version, length, xxh3-64 checksum), so a consumer can tell a record of another
// kind, a newer format or a corrupt message from a valid one, and says which.
//
//   record          kind  version  topic (DESIGN.md §1)   key
//   TermBatch        1     1       surge.terms            the partition (records are pre-grouped)
//   CandidateBatch   2     1       surge.candidates       the detect shard
//   TrendUpdate      -     -       surge.trends           topic id, value = TrendToJson (trend.h)
//
// A Kafka message key is EncodeKey(key): 8 bytes big-endian. Partitioning is the producer's job:
// PartitionOf(key, partitions) (hash.h), or the explicit partition of SendTo.
//
// Versioning: a decoder accepts versions 1..current of its kind; a change that old decoders cannot
// read bumps the version, and decoders keep reading the older ones.
//
// EncodeTermBatch writes only what partition `batch.partition` of `batch.partitions` needs: the
// posts with at least one term of that partition (or a pair of top terms owned by it), each with
// that partition's terms and its top terms (for pairs). Decoding yields an AnnotatedBlock holding
// just those; detect processes it exactly as the in-process view.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "stream/bytes.h"
#include "stream/records.h"

namespace surge::stream {

enum class RecordKind : uint8_t { kTermBatch = 1, kCandidateBatch = 2, kSnapshot = 3 };
inline constexpr uint8_t kTermBatchVersion = 1;
inline constexpr uint8_t kCandidateBatchVersion = 1;

std::string EncodeKey(uint64_t key);
Result<uint64_t> DecodeKey(std::string_view bytes);

void EncodeTermBatch(const TermBatch& batch, std::string* out);
Result<TermBatch> DecodeTermBatch(std::string_view bytes);

void EncodeCandidateBatch(const CandidateBatch& batch, std::string* out);
Result<CandidateBatch> DecodeCandidateBatch(std::string_view bytes);

// Pieces shared with snapshots.
void WriteOffsets(const Offsets& offsets, ByteWriter* w);
Offsets ReadOffsets(ByteReader* r);
void WriteCandidate(const Candidate& c, ByteWriter* w);
Status ReadCandidate(ByteReader* r, Candidate* c);
void WriteSamples(const std::vector<Sample>& samples, ByteWriter* w);
void ReadSamples(ByteReader* r, std::vector<Sample>* samples);
// A label list (category names); null and empty are the same.
void WriteLabels(const std::vector<std::string>* labels, ByteWriter* w);
std::shared_ptr<const std::vector<std::string>> ReadLabels(ByteReader* r);

// Stage snapshots: a kSnapshot frame whose payload starts with the stage's tag ("detect",
// "rank"). OpenSnapshot checks frame and tag and returns the payload after the tag.
void SealSnapshot(std::string_view tag, uint8_t version, std::string_view body, std::string* out);
Result<std::string_view> OpenSnapshot(std::string_view snapshot, std::string_view tag,
                                      uint8_t max_version);

// For generic code (a Kafka channel template): Codec<T>::Encode / Codec<T>::Decode.
template <typename T>
struct Codec;
template <>
struct Codec<TermBatch> {
  static constexpr std::string_view kName = "term batch";
  static void Encode(const TermBatch& v, std::string* out) { EncodeTermBatch(v, out); }
  static Result<TermBatch> Decode(std::string_view b) { return DecodeTermBatch(b); }
};
template <>
struct Codec<CandidateBatch> {
  static constexpr std::string_view kName = "candidate batch";
  static void Encode(const CandidateBatch& v, std::string* out) { EncodeCandidateBatch(v, out); }
  static Result<CandidateBatch> Decode(std::string_view b) { return DecodeCandidateBatch(b); }
};

}  // namespace surge::stream
