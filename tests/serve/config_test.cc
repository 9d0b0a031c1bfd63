#include <gtest/gtest.h>

#include "serve/model_config.h"
#include "serve/repository.h"

namespace surge::serve {
namespace {

constexpr const char* kConfig = R"pb(
  name: "bert"
  backend: "surge"
  max_batch_size: 16 input
  [ {
    name: "input_ids"
    data_type: TYPE_INT64
    dims: [ -1 ]
  }] output
  [ {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 3 ]
    label_filename: "labels.txt"
  }]
  dynamic_batching {
    preferred_batch_size: [ 4, 8 ]
    max_queue_delay_microseconds: 500
    priority_levels: 2
    default_priority_level: 2
    default_queue_policy {
      max_queue_size: 10
      timeout_action: DELAY
      default_timeout_microseconds: 1000
      allow_timeout_override: true
    }
    priority_queue_policy {
      key: 1
      value { max_queue_size: 3 }
    }
  } instance_group
  [ { count: 2 kind: KIND_CPU }]
  version_policy { latest { num_versions: 2 } }
  parameters {
    key: "tokenizer"
    value: { string_value: "vocab.txt" }
  }
  parameters {
    key: "precision"
    value: { string_value: "fp32" }
  } model_warmup
  [ {
    name: "w"
    batch_size: 2
    inputs {
      key: "input_ids"
      value: {
        data_type: TYPE_INT64
        dims: [ 8 ]
        zero_data: true
      }
    }
  }]
)pb";

TEST(ModelConfig, ParsesTritonSubset) {
  auto c = ParseModelConfig(kConfig, "config.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name(), "bert");
  EXPECT_EQ(c->max_batch_size(), 16);
  ASSERT_EQ(c->input_size(), 1);
  EXPECT_EQ(c->input(0).data_type(), inference::TYPE_INT64);
  EXPECT_EQ(c->output(0).label_filename(), "labels.txt");
  EXPECT_EQ(c->dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(c->instance_group(0).count(), 2);
  EXPECT_EQ(c->version_policy().latest().num_versions(), 2u);
  EXPECT_EQ(ConfigParameter(*c, "tokenizer"), "vocab.txt");
  EXPECT_EQ(ConfigParameter(*c, "missing"), "");
  EXPECT_EQ(c->model_warmup(0).inputs().at("input_ids").dims(0), 8);
  EXPECT_TRUE(ValidateConfig(*c).ok());

  BatcherOptions o = BatcherOptionsFromConfig(*c);
  EXPECT_EQ(o.max_batch_size, 16);
  EXPECT_EQ(o.preferred_batch_sizes, (std::vector<int>{4, 8}));
  EXPECT_EQ(o.max_queue_delay_us, 500u);
  EXPECT_EQ(o.priority_levels, 2u);
  EXPECT_EQ(o.default_policy.max_queue_size, 10u);
  EXPECT_TRUE(o.default_policy.delay_on_timeout);
  EXPECT_TRUE(o.default_policy.allow_timeout_override);
  EXPECT_EQ(o.priority_policy.at(1).max_queue_size, 3u);
  EXPECT_EQ(o.instance_count, 2);
}

TEST(ModelConfig, UnknownFieldsWarnSyntaxErrorsFail) {
  std::vector<std::string> warnings;
  auto c = ParseModelConfig("name: \"m\"\nresponse_cache { enable: true }\n", "c.pbtxt", &warnings);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name(), "m");

  auto bad = ParseModelConfig("name: \"m\"\nmax_batch_size: \"x\"\n", "c.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
}

TEST(ModelConfig, ValidationNamesTheProblem) {
  auto c = ParseModelConfig(
      "name: \"m\" max_batch_size: 4 dynamic_batching { preferred_batch_size: 8 }", "c");
  ASSERT_TRUE(c.ok());
  Status s = ValidateConfig(*c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("preferred_batch_size 8"), std::string::npos);

  c = ParseModelConfig(
      "name: \"m\" max_batch_size: 4 dynamic_batching { priority_levels: 2 "
      "default_priority_level: 3 }",
      "c");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(ValidateConfig(*c).ok());
}

TEST(ModelConfig, JsonRoundTripUsesTritonFieldNames) {
  auto c = ParseModelConfig(kConfig, "c");
  ASSERT_TRUE(c.ok());
  std::string json = ConfigToJson(*c);
  EXPECT_NE(json.find("\"max_batch_size\":16"), std::string::npos) << json;
  EXPECT_NE(json.find("\"dynamic_batching\""), std::string::npos);
  EXPECT_NE(json.find("\"data_type\":\"TYPE_INT64\""), std::string::npos);
  // 64-bit fields as numbers, as Triton writes them.
  EXPECT_NE(json.find("\"dims\":[-1]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"max_queue_delay_microseconds\":500"), std::string::npos) << json;
  auto back = ConfigFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->dynamic_batching().max_queue_delay_microseconds(), 500u);
  EXPECT_FALSE(ConfigFromJson("{not json").ok());
}

TEST(ModelConfig, DatatypeNames) {
  EXPECT_EQ(ConfigTypeToDatatype(inference::TYPE_STRING), "BYTES");
  EXPECT_EQ(DatatypeToConfigType("BYTES"), inference::TYPE_STRING);
  EXPECT_EQ(DatatypeToConfigType("FP32"), inference::TYPE_FP32);
  EXPECT_EQ(DatatypeToConfigType("NOPE"), inference::TYPE_INVALID);
}

TEST(Repository, ModelNamesCannotEscapeTheRepository) {
  EXPECT_TRUE(ValidateModelName("bert_base-v1.2").ok());
  EXPECT_FALSE(ValidateModelName("..").ok());
  EXPECT_FALSE(ValidateModelName("../etc").ok());
  EXPECT_FALSE(ValidateModelName("a/b").ok());
  EXPECT_FALSE(ValidateModelName("").ok());
  EXPECT_FALSE(ValidateModelName("a%2f").ok());
}

}  // namespace
}  // namespace surge::serve
