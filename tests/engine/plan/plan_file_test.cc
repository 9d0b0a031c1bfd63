#include "engine/plan/plan_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "core/mmap_file.h"
#include "engine/plan/byte_io.h"

namespace surge::engine::plan {
namespace {

std::span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string SamplePlan() {
  PlanWriter w("fake", "test-arch-1");
  EXPECT_TRUE(w.AddSection("config", std::string_view("{\"a\":1}")).ok());
  std::string weights(1000, '\0');
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 7 + 1);
  EXPECT_TRUE(w.AddSection("weights", weights).ok());
  EXPECT_TRUE(w.AddSection("tactics", std::string_view("xyz")).ok());
  EXPECT_TRUE(w.AddSection("empty", std::string_view("")).ok());
  auto bytes = w.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return *bytes;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + ".plan"))
      .string();
}

TEST(PlanFile, RoundTripInMemory) {
  const std::string bytes = SamplePlan();
  EXPECT_EQ(bytes.size() % kSectionAlignment, 0u);
  auto plan = PlanFile::FromBytes(Span(bytes));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const PlanFile& p = **plan;
  EXPECT_EQ(p.format_version(), kPlanFormatVersion);
  EXPECT_EQ(p.backend(), "fake");
  EXPECT_EQ(p.device_arch(), "test-arch-1");
  ASSERT_EQ(p.sections().size(), 4u);
  auto weights = p.Section("weights");
  ASSERT_TRUE(weights.ok());
  ASSERT_EQ(weights->size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weights->data()) % kSectionAlignment, 0u);
  for (size_t i = 0; i < weights->size(); ++i) {
    ASSERT_EQ((*weights)[i], static_cast<uint8_t>(i * 7 + 1)) << i;
  }
  for (const auto& s : p.sections()) EXPECT_EQ(s.offset % kSectionAlignment, 0u) << s.name;
  auto config = p.Section("config");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(std::string(config->begin(), config->end()), "{\"a\":1}");
  EXPECT_EQ(p.Section("empty")->size(), 0u);
  auto missing = p.Section("graph");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no 'graph' section"), std::string::npos);
}

TEST(PlanFile, RoundTripThroughFileIsMapped) {
  const std::string path = TempPath("roundtrip");
  PlanWriter w("fake", "arch");
  ASSERT_TRUE(w.AddSection("weights", std::string(200, 'w')).ok());
  ASSERT_TRUE(w.WriteToFile(path).ok());
  auto plan = PlanFile::Open(path, {"fake", "arch"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)->source(), path);
  auto weights = (*plan)->Section("weights");
  ASSERT_TRUE(weights.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weights->data()) % kSectionAlignment, 0u);
  EXPECT_EQ((*weights)[199], 'w');
  std::filesystem::remove(path);
}

TEST(PlanFile, MissingFileIsNotFound) {
  auto plan = PlanFile::Open("/nonexistent/dir/model.plan");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
}

TEST(PlanFile, EmptyAndTinyInputsAreNotPlans) {
  for (std::string bytes : {std::string(), std::string("SURG")}) {
    auto plan = PlanFile::FromBytes(Span(bytes));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(plan.status().message().find("not a Surge plan"), std::string::npos);
  }
}

TEST(PlanFile, WrongMagicSaysSo) {
  std::string bytes = SamplePlan();
  std::memcpy(bytes.data(), "ONNXONNX", 8);
  auto plan = PlanFile::FromBytes(Span(bytes));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(plan.status().message().find("magic is 'ONNXONNX', expected 'SURGEPLN'"),
            std::string::npos)
      << plan.status().message();
}

TEST(PlanFile, WrongVersionNamesBoth) {
  std::string bytes = SamplePlan();
  uint32_t v = kPlanFormatVersion + 1;
  std::memcpy(bytes.data() + 8, &v, 4);
  auto plan = PlanFile::FromBytes(Span(bytes));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find(fmt::format("version is {}", v)), std::string::npos) << m;
  EXPECT_NE(m.find(fmt::format("reads version {}", kPlanFormatVersion)), std::string::npos) << m;
}

TEST(PlanFile, TruncatedSaysTruncated) {
  const std::string full = SamplePlan();
  for (size_t keep : {size_t{12}, size_t{31}, size_t{100}, full.size() - 64, full.size() - 1}) {
    auto plan = PlanFile::FromBytes(Span(full.substr(0, keep)));
    ASSERT_FALSE(plan.ok()) << keep;
    EXPECT_EQ(plan.status().code(), StatusCode::kDataLoss) << keep;
    EXPECT_NE(plan.status().message().find("truncated"), std::string::npos)
        << keep << ": " << plan.status().message();
  }
}

TEST(PlanFile, EveryTruncationIsAnError) {
  const std::string full = SamplePlan();
  for (size_t keep = 0; keep < full.size(); ++keep) {
    EXPECT_FALSE(PlanFile::FromBytes(Span(full.substr(0, keep))).ok()) << keep;
  }
}

TEST(PlanFile, CorruptSectionNamesSectionAndChecksum) {
  std::string bytes = SamplePlan();
  auto plan = PlanFile::FromBytes(Span(bytes));
  ASSERT_TRUE(plan.ok());
  const SectionInfo* w = (*plan)->FindSection("weights");
  ASSERT_NE(w, nullptr);
  bytes[w->offset + 500] ^= 0x10;
  auto bad = PlanFile::FromBytes(Span(bytes));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("section 'weights' is corrupt: checksum"),
            std::string::npos)
      << bad.status().message();
  // Checksums can be skipped by callers that verified the file another way.
  EXPECT_TRUE(PlanFile::FromBytes(Span(bytes), {"", "", false}).ok());
}

TEST(PlanFile, CorruptHeaderIsDetected) {
  std::string bytes = SamplePlan();
  bytes[40] ^= 0x01;  // inside the backend name
  auto bad = PlanFile::FromBytes(Span(bytes));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("header is corrupt"), std::string::npos)
      << bad.status().message();
}

TEST(PlanFile, EverySingleBitFlipIsDetected) {
  const std::string full = SamplePlan();
  for (size_t i = 0; i < full.size(); ++i) {
    std::string bytes = full;
    bytes[i] ^= 0x04;
    EXPECT_FALSE(PlanFile::FromBytes(Span(bytes)).ok()) << "flip at byte " << i;
  }
}

TEST(PlanFile, WrongBackendNamesBoth) {
  auto plan = PlanFile::FromBytes(Span(SamplePlan()), {"cuda", "", true});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("built for backend 'fake', but backend 'cuda'"),
            std::string::npos)
      << plan.status().message();
}

TEST(PlanFile, WrongDeviceArchNamesBoth) {
  auto plan = PlanFile::FromBytes(Span(SamplePlan()), {"", "test-arch-2", true});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("device arch 'test-arch-1'"), std::string::npos) << m;
  EXPECT_NE(m.find("this machine is 'test-arch-2'"), std::string::npos) << m;
}

// A header whose checksum is right but whose table points outside the file: bounds are checked
// even when the checksum passes (a hand-made or hostile file).
TEST(PlanFile, SectionOutsideFileIsRejectedEvenWithValidChecksum) {
  ByteWriter table;
  table.Str("fake");
  table.Str("arch");
  table.U32(1);
  table.Str("weights");
  table.U64(64);
  table.U64(1 << 20);  // far beyond the file
  table.U64(0);
  std::string tab = table.Take();
  ByteWriter w;
  w.Raw("SURGEPLN", 8);
  w.U32(kPlanFormatVersion);
  w.U32(static_cast<uint32_t>(kFixedHeaderBytes + tab.size()));
  w.U64(128);
  w.U64(Checksum(Span(tab)));
  w.Raw(tab.data(), tab.size());
  w.PadTo(128);
  auto plan = PlanFile::FromBytes(Span(w.str()));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("lies outside the file"), std::string::npos)
      << plan.status().message();
}

TEST(PlanWriter, RejectsDuplicateAndBadNames) {
  PlanWriter w("fake", "arch");
  ASSERT_TRUE(w.AddSection("a", std::string_view("1")).ok());
  EXPECT_FALSE(w.AddSection("a", std::string_view("2")).ok());
  EXPECT_FALSE(w.AddSection("", std::string_view("2")).ok());
  EXPECT_FALSE(w.AddSection(std::string(300, 'n'), std::string_view("2")).ok());
  PlanWriter nameless("", "arch");
  EXPECT_FALSE(nameless.Finish().ok());
}

TEST(ByteReader, StopsAtTheEnd) {
  std::string data =
      "\x05\x00\x00\x00"
      "abc";
  ByteReader r(Span(data), "test");
  auto s = r.Str();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("test is truncated"), std::string::npos);
  ByteReader r2(Span(data), "test");
  EXPECT_FALSE(r2.Count("things", 8).ok());  // 5 things of 8 bytes cannot fit in 3 bytes
}

}  // namespace
}  // namespace surge::engine::plan
