#include "stream/codec.h"

#include <unordered_set>

#include "stream/bytes.h"
#include "stream/hash.h"

namespace surge::stream {
namespace {

bool PostInPartition(const AnnotatedBlock& b, const AnnotatedPost& p, int32_t part, int32_t parts) {
  const TermOcc* t = b.terms.data() + p.term_begin;
  for (size_t i = 0; i < p.term_count; ++i) {
    if (PartitionOf(t[i].hash, parts) == part) return true;
  }
  for (size_t i = 0; i < p.term_count; ++i) {
    if (!(t[i].flags & TermOcc::kTop)) continue;
    for (size_t j = i + 1; j < p.term_count; ++j) {
      if ((t[j].flags & TermOcc::kTop) &&
          PartitionOf(PairHash(t[i].hash, t[j].hash), parts) == part)
        return true;
    }
  }
  return false;
}

}  // namespace

void WriteLabels(const std::vector<std::string>* v, ByteWriter* w) {
  w->Varint(v ? v->size() : 0);
  if (v)
    for (const auto& s : *v) w->Str(s);
}

std::shared_ptr<const std::vector<std::string>> ReadLabels(ByteReader* r) {
  size_t n = r->Count(1, "labels");
  if (n == 0) return nullptr;
  auto v = std::make_shared<std::vector<std::string>>();
  for (size_t i = 0; i < n && r->ok(); ++i) v->emplace_back(r->Str());
  return v;
}

void WriteSamples(const std::vector<Sample>& samples, ByteWriter* w) {
  w->Varint(samples.size());
  for (const Sample& s : samples) {
    w->U64(s.post_key);
    w->Str(s.post_id);
    w->Str(s.text);
    w->Varint(s.ordinal);
    w->U8(s.span);
  }
}

void ReadSamples(ByteReader* r, std::vector<Sample>* samples) {
  size_t n = r->Count(12, "samples");
  samples->resize(n);
  for (Sample& s : *samples) {
    s.post_key = r->U64();
    s.post_id = r->Str();
    s.text = r->Str();
    s.ordinal = static_cast<uint16_t>(r->Varint());
    s.span = r->U8();
  }
}

void SealSnapshot(std::string_view tag, uint8_t version, std::string_view body, std::string* out) {
  std::string payload;
  ByteWriter w(&payload);
  w.Str(tag);
  w.Raw(body.data(), body.size());
  AppendFrame(static_cast<uint8_t>(RecordKind::kSnapshot), version, payload, out);
}

Result<std::string_view> OpenSnapshot(std::string_view snapshot, std::string_view tag,
                                      uint8_t max_version) {
  const std::string what = fmt::format("{} snapshot", tag);
  SURGE_ASSIGN_OR_RETURN(
      Frame f, ReadFrame(snapshot, static_cast<uint8_t>(RecordKind::kSnapshot), max_version, what));
  ByteReader r(f.payload, what);
  std::string_view got = r.Str();
  SURGE_RETURN_IF_ERROR(r.status());
  if (got != tag) {
    return InvalidArgumentError("a {} snapshot where a {} snapshot was expected", got, tag);
  }
  return f.payload.substr(r.position());
}

std::string EncodeKey(uint64_t key) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(key >> (56 - 8 * i));
  return s;
}

Result<uint64_t> DecodeKey(std::string_view bytes) {
  if (bytes.size() != 8) {
    return InvalidArgumentError("record key of {} bytes; expected 8 (big-endian uint64)",
                                bytes.size());
  }
  uint64_t k = 0;
  for (unsigned char c : bytes) k = (k << 8) | c;
  return k;
}

void WriteOffsets(const Offsets& offsets, ByteWriter* w) {
  w->Varint(offsets.next.size());
  for (const auto& [p, o] : offsets.next) {
    w->Svarint(p);
    w->Svarint(o);
  }
}

Offsets ReadOffsets(ByteReader* r) {
  Offsets o;
  size_t n = r->Count(2, "offsets");
  for (size_t i = 0; i < n && r->ok(); ++i) {
    int32_t p = static_cast<int32_t>(r->Svarint());
    o.next[p] = r->Svarint();
  }
  return o;
}

void EncodeTermBatch(const TermBatch& batch, std::string* out) {
  std::string payload;
  ByteWriter w(&payload);
  const AnnotatedBlock& b = *batch.block;
  w.Svarint(batch.partition);
  w.Svarint(batch.partitions);
  w.Svarint(batch.watermark_ms);
  w.Varint(b.sequence);
  w.Svarint(b.max_ts_ms);
  w.Svarint(b.read_wall_ns);
  w.Varint(b.embedding_dim);
  WriteLabels(b.categories.get(), &w);
  WriteOffsets(b.offsets, &w);
  std::vector<uint32_t> selected;
  for (uint32_t i = 0; i < b.posts.size(); ++i) {
    if (PostInPartition(b, b.posts[i], batch.partition, batch.partitions)) selected.push_back(i);
  }
  w.Varint(selected.size());
  for (uint32_t i : selected) {
    const AnnotatedPost& p = b.posts[i];
    w.U64(p.key);
    w.U64(p.author);
    w.U64(p.repost_of);
    w.U64(p.simhash);
    w.Svarint(p.ts_ms);
    w.F32(p.quality);
    w.Varint(p.followers);
    w.Varint(p.reposts);
    w.Varint(p.comments);
    w.Varint(p.likes);
    w.Str(b.Id(p));
    w.Str(b.PostText(p));
    w.Varint(p.flags);
    w.Svarint(p.category);
    for (float s : p.sentiment) w.F32(s);
    const TermOcc* t = b.terms.data() + p.term_begin;
    uint32_t n = 0;
    for (size_t k = 0; k < p.term_count; ++k) {
      n += (t[k].flags & TermOcc::kTop) ||
           PartitionOf(t[k].hash, batch.partitions) == batch.partition;
    }
    w.Varint(n);
    for (size_t k = 0; k < p.term_count; ++k) {
      if (!(t[k].flags & TermOcc::kTop) &&
          PartitionOf(t[k].hash, batch.partitions) != batch.partition) {
        continue;
      }
      w.U64(t[k].hash);
      w.F32(t[k].weight);
      w.Varint(t[k].ordinal);
      w.U8(t[k].span);
      w.U8(t[k].flags);
      w.Str(b.Text(t[k]));
    }
    if (b.embedding_dim) w.Raw(b.Embedding(i), sizeof(float) * b.embedding_dim);
  }
  AppendFrame(static_cast<uint8_t>(RecordKind::kTermBatch), kTermBatchVersion, payload, out);
}

Result<TermBatch> DecodeTermBatch(std::string_view bytes) {
  SURGE_ASSIGN_OR_RETURN(Frame f, ReadFrame(bytes, static_cast<uint8_t>(RecordKind::kTermBatch),
                                            kTermBatchVersion, "term batch"));
  ByteReader r(f.payload, "term batch");
  TermBatch batch;
  auto block = std::make_shared<AnnotatedBlock>();
  batch.partition = static_cast<int32_t>(r.Svarint());
  batch.partitions = static_cast<int32_t>(r.Svarint());
  batch.watermark_ms = r.Svarint();
  block->sequence = r.Varint();
  block->max_ts_ms = r.Svarint();
  block->read_wall_ns = r.Svarint();
  uint64_t dim = r.Varint();
  block->categories = ReadLabels(&r);
  block->offsets = ReadOffsets(&r);
  if (r.ok() &&
      (batch.partitions < 1 || batch.partition < 0 || batch.partition >= batch.partitions)) {
    r.Fail(fmt::format("partition {} of {}", batch.partition, batch.partitions));
  }
  if (dim > 65536) r.Fail(fmt::format("embedding dimension {} (at most 65536)", dim));
  block->embedding_dim = static_cast<int32_t>(dim);
  size_t n = r.Count(40, "posts");
  block->posts.reserve(n);
  for (size_t i = 0; i < n && r.ok(); ++i) {
    AnnotatedPost p;
    p.key = r.U64();
    p.author = r.U64();
    p.repost_of = r.U64();
    p.simhash = r.U64();
    p.ts_ms = r.Svarint();
    p.quality = r.F32();
    p.followers = static_cast<uint32_t>(r.Varint());
    p.reposts = static_cast<uint32_t>(r.Varint());
    p.comments = static_cast<uint32_t>(r.Varint());
    p.likes = static_cast<uint32_t>(r.Varint());
    std::string_view id = r.Str();
    std::string_view text = r.Str();
    p.flags = static_cast<uint16_t>(r.Varint());
    p.category = static_cast<int16_t>(r.Svarint());
    for (float& s : p.sentiment) s = r.F32();
    if (id.size() > 0xFFFF) r.Fail("post id longer than 65535 bytes");
    p.id_off = static_cast<uint32_t>(block->arena.size());
    p.id_len = static_cast<uint16_t>(id.size());
    block->arena.append(id);
    p.text_off = static_cast<uint32_t>(block->arena.size());
    p.text_len = static_cast<uint32_t>(text.size());
    block->arena.append(text);
    size_t nt = r.Count(15, "terms");
    if (nt > 0xFFFF) r.Fail("more than 65535 terms in a post");
    p.term_begin = static_cast<uint32_t>(block->terms.size());
    p.term_count = static_cast<uint16_t>(nt);
    for (size_t k = 0; k < nt && r.ok(); ++k) {
      TermOcc t;
      t.hash = r.U64();
      t.weight = r.F32();
      t.ordinal = static_cast<uint16_t>(r.Varint());
      t.span = r.U8();
      t.flags = r.U8();
      std::string_view term = r.Str();
      if (term.size() > 0xFFFF) r.Fail("term longer than 65535 bytes");
      t.text_off = static_cast<uint32_t>(block->arena.size());
      t.text_len = static_cast<uint16_t>(term.size());
      block->arena.append(term);
      block->terms.push_back(t);
    }
    if (block->embedding_dim && r.ok()) {
      size_t at = block->embeddings.size();
      block->embeddings.resize(at + block->embedding_dim);
      r.Raw(block->embeddings.data() + at, sizeof(float) * block->embedding_dim);
    }
    block->posts.push_back(p);
  }
  SURGE_RETURN_IF_ERROR(r.Finish());
  batch.block = std::move(block);
  return batch;
}

void WriteCandidate(const Candidate& c, ByteWriter* w) {
  w->U64(c.key);
  w->U64(c.term_a);
  w->U64(c.term_b);
  w->Str(c.text);
  w->Str(c.text_b);
  w->U8(c.significant ? 1 : 0);
  for (double v : {c.score, c.peak_score, c.count, c.prev_count, c.ewma, c.ewmvar}) w->F64(v);
  for (int64_t v : {c.posts, c.reposts, c.duplicates, c.young}) w->Varint(static_cast<uint64_t>(v));
  for (double v : {c.quality_sum, c.reach, c.engagement}) w->F64(v);
  for (double v : c.sentiment) w->F64(v);
  w->PodVector(c.category);
  w->PodVector(c.embedding);
  c.authors.Serialize(w);
  WriteSamples(c.samples, w);
  w->Svarint(c.first_seen_ms);
}

Status ReadCandidate(ByteReader* r, Candidate* c) {
  c->key = r->U64();
  c->term_a = r->U64();
  c->term_b = r->U64();
  c->text = r->Str();
  c->text_b = r->Str();
  c->significant = r->U8() != 0;
  for (double* v : {&c->score, &c->peak_score, &c->count, &c->prev_count, &c->ewma, &c->ewmvar})
    *v = r->F64();
  for (int64_t* v : {&c->posts, &c->reposts, &c->duplicates, &c->young})
    *v = static_cast<int64_t>(r->Varint());
  for (double* v : {&c->quality_sum, &c->reach, &c->engagement}) *v = r->F64();
  for (double& v : c->sentiment) v = r->F64();
  r->PodVector(&c->category, "category");
  r->PodVector(&c->embedding, "embedding");
  SURGE_RETURN_IF_ERROR(r->status());
  SURGE_ASSIGN_OR_RETURN(c->authors, HyperLogLog::Deserialize(r));
  ReadSamples(r, &c->samples);
  c->first_seen_ms = r->Svarint();
  return r->status();
}

void EncodeCandidateBatch(const CandidateBatch& b, std::string* out) {
  std::string payload;
  ByteWriter w(&payload);
  w.Svarint(b.shard);
  w.Svarint(b.shards);
  w.Svarint(b.bucket);
  w.Svarint(b.bucket_ms);
  WriteLabels(b.categories.get(), &w);
  w.Svarint(b.posts);
  w.Svarint(b.replays_dropped);
  w.Svarint(b.late_posts);
  w.Varint(b.read_wall.size());
  for (const auto& [t, n] : b.read_wall) {
    w.Svarint(t);
    w.Svarint(n);
  }
  w.Varint(b.candidates.size());
  for (const Candidate& c : b.candidates) WriteCandidate(c, &w);
  AppendFrame(static_cast<uint8_t>(RecordKind::kCandidateBatch), kCandidateBatchVersion, payload,
              out);
}

Result<CandidateBatch> DecodeCandidateBatch(std::string_view bytes) {
  SURGE_ASSIGN_OR_RETURN(Frame f,
                         ReadFrame(bytes, static_cast<uint8_t>(RecordKind::kCandidateBatch),
                                   kCandidateBatchVersion, "candidate batch"));
  ByteReader r(f.payload, "candidate batch");
  CandidateBatch b;
  b.shard = static_cast<int32_t>(r.Svarint());
  b.shards = static_cast<int32_t>(r.Svarint());
  b.bucket = r.Svarint();
  b.bucket_ms = r.Svarint();
  b.categories = ReadLabels(&r);
  b.posts = r.Svarint();
  b.replays_dropped = r.Svarint();
  b.late_posts = r.Svarint();
  size_t nw = r.Count(2, "read times");
  for (size_t i = 0; i < nw && r.ok(); ++i) {
    int64_t t = r.Svarint();
    b.read_wall.emplace_back(t, r.Svarint());
  }
  if (r.ok() && (b.shards < 1 || b.shard < 0 || b.shard >= b.shards)) {
    r.Fail(fmt::format("shard {} of {}", b.shard, b.shards));
  }
  if (r.ok() && b.bucket_ms <= 0) r.Fail(fmt::format("bucket width {} ms", b.bucket_ms));
  size_t n = r.Count(60, "candidates");
  b.candidates.resize(n);
  for (size_t i = 0; i < n && r.ok(); ++i) {
    Status st = ReadCandidate(&r, &b.candidates[i]);
    if (!st.ok()) return st;
  }
  SURGE_RETURN_IF_ERROR(r.Finish());
  return b;
}

}  // namespace surge::stream
