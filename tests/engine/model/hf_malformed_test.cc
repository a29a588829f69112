// Malformed Hugging Face folders are refused by Model::Load with messages saying what was
// wrong: each case starts from a valid tiny folder and breaks one thing.
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loaders/safetensors.h"
#include "tests/testing/hf_folders.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

namespace fs = std::filesystem;
using testing::TinyHfConfig;
using testing::WriteFile;

// Writes the valid float folder, lets `breakit` damage it (it gets the folder and the float
// tensors to rewrite), then expects Load to fail with a message containing `want`.
void ExpectRefused(const std::string& tag, const std::string& want,
                   const std::function<void(const std::string&, testing::FloatTensors&)>& breakit,
                   const ModelConfig& config = TinyHfConfig()) {
  testing::FloatTensors w = testing::RandomTinyWeights(config, 3);
  const std::string dir = testing::TempDir("hf-bad-" + tag);
  ASSERT_TRUE(testing::WriteFloatFolder(dir, config, w).ok());
  breakit(dir, w);
  auto m = Model::Load(dir);
  ASSERT_FALSE(m.ok()) << tag << " was accepted";
  EXPECT_THAT(std::string(m.status().message()), ::testing::HasSubstr(want)) << tag;
}

// Rewrites model.safetensors from `w` with `edit` applied to the tensor list.
void Rewrite(const std::string& dir, const testing::FloatTensors& w,
             const std::function<void(std::vector<StTensorData>&)>& edit) {
  std::vector<StTensorData> t;
  for (const auto& [name, f] : w) {
    std::vector<uint8_t> bytes(f.values.size() * 4);
    std::memcpy(bytes.data(), f.values.data(), bytes.size());
    t.push_back({name, StDtype::kF32, f.shape, std::move(bytes)});
  }
  edit(t);
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", t, {}).ok());
}

TEST(HfMalformed, ValidFolderLoads) {
  testing::FloatTensors w = testing::RandomTinyWeights(TinyHfConfig(), 3);
  const std::string dir = testing::TempDir("hf-good");
  ASSERT_TRUE(testing::WriteFloatFolder(dir, TinyHfConfig(), w).ok());
  auto m = Model::Load(dir);
  ASSERT_TRUE(m.ok()) << m.status();
}

TEST(HfMalformed, MissingConfigJson) {
  ExpectRefused("noconfig", "config.json",
                [](const std::string& d, auto&) { fs::remove(d + "/config.json"); });
}

TEST(HfMalformed, ConfigJsonSyntaxError) {
  ExpectRefused("badjson", "config.json", [](const std::string& d, auto&) {
    (void)WriteFile(d + "/config.json", "{\"a\": ");
  });
}

TEST(HfMalformed, UnknownArchitecture) {
  ExpectRefused("arch", "GPT2LMHeadModel", [](const std::string& d, auto&) {
    (void)WriteFile(d + "/config.json",
                    "{\"architectures\": [\"GPT2LMHeadModel\"], \"hidden_size\": 64}");
  });
}

TEST(HfMalformed, MissingHiddenSize) {
  ExpectRefused("nohidden", "hidden_size", [](const std::string& d, auto&) {
    (void)WriteFile(d + "/config.json",
                    "{\"architectures\": [\"LlamaForCausalLM\"], \"intermediate_size\": 128}");
  });
}

TEST(HfMalformed, HeadsNotDividedByKvHeads) {
  ModelConfig c = TinyHfConfig();
  ExpectRefused("kvheads", "config.json", [c](const std::string& d, auto&) mutable {
    c.n_kv_heads = 3;
    (void)WriteFile(d + "/config.json", testing::HfConfigJson(c));
  });
}

TEST(HfMalformed, UnsupportedRopeScalingRefused) {
  ExpectRefused("ropescale", "rope_scaling", [](const std::string& d, auto&) {
    (void)WriteFile(
        d + "/config.json",
        testing::HfConfigJson(TinyHfConfig(),
                              "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}"));
  });
}

TEST(HfMalformed, MissingTensor) {
  ExpectRefused("notensor", "model.layers.1.mlp.down_proj.weight",
                [](const std::string& d, testing::FloatTensors& w) {
                  w.erase("model.layers.1.mlp.down_proj.weight");
                  Rewrite(d, w, [](auto&) {});
                });
}

TEST(HfMalformed, MissingLmHeadWhenUntied) {
  ExpectRefused("nohead", "lm_head.weight", [](const std::string& d, testing::FloatTensors& w) {
    w.erase("lm_head.weight");
    Rewrite(d, w, [](auto&) {});
  });
}

TEST(HfMalformed, WrongShape) {
  ExpectRefused("shape", "has shape [64, 64]", [](const std::string& d, testing::FloatTensors& w) {
    testing::FloatTensor& k = w.at("model.layers.0.self_attn.k_proj.weight");
    k.shape = {64, 64};
    k.values.resize(64 * 64);
    Rewrite(d, w, [](auto&) {});
  });
}

TEST(HfMalformed, WrongNormLength) {
  ExpectRefused("norm", "model.norm.weight", [](const std::string& d, testing::FloatTensors& w) {
    w.at("model.norm.weight").shape = {32};
    w.at("model.norm.weight").values.resize(32);
    Rewrite(d, w, [](auto&) {});
  });
}

TEST(HfMalformed, IntegerWeightDtype) {
  ExpectRefused("dtype", "is I32", [](const std::string& d, testing::FloatTensors& w) {
    Rewrite(d, w, [](std::vector<StTensorData>& t) {
      for (StTensorData& x : t) {
        if (x.name == "model.layers.0.mlp.up_proj.weight") x.dtype = StDtype::kI32;
      }
    });
  });
}

TEST(HfMalformed, UnsupportedSafetensorsDtype) {
  ExpectRefused("f64", "F64", [](const std::string& d, auto&) {
    const std::string header = "{\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    (void)WriteFile(d + "/model.safetensors", bytes + header + std::string(8, '\0'));
  });
}

TEST(HfMalformed, UnusedBiasRefused) {
  ExpectRefused("bias", "o_proj.bias", [](const std::string& d, testing::FloatTensors& w) {
    w["model.layers.0.self_attn.o_proj.bias"] = {{64}, std::vector<float>(64, 0.5f)};
    Rewrite(d, w, [](auto&) {});
  });
}

TEST(HfMalformed, MissingTokenizerJson) {
  ExpectRefused("notok", "tokenizer.json",
                [](const std::string& d, auto&) { fs::remove(d + "/tokenizer.json"); });
}

TEST(HfMalformed, TokenizerLargerThanVocab) {
  ModelConfig c = TinyHfConfig();
  ExpectRefused("vocab", "vocab_size", [c](const std::string& d, auto&) mutable {
    c.n_vocab = 300;
    (void)WriteFile(d + "/config.json", testing::HfConfigJson(c));
  });
}

TEST(HfMalformed, NoSafetensorsFiles) {
  ExpectRefused("nost", "model.safetensors",
                [](const std::string& d, auto&) { fs::remove(d + "/model.safetensors"); });
}

TEST(HfMalformed, IndexNamesMissingShard) {
  ExpectRefused("index", "model-00002-of-00002.safetensors", [](const std::string& d, auto&) {
    fs::rename(d + "/model.safetensors", d + "/model-00001-of-00002.safetensors");
    (void)WriteFile(d + "/model.safetensors.index.json",
                    "{\"weight_map\": {\"model.norm.weight\": "
                    "\"model-00002-of-00002.safetensors\"}}");
  });
}

TEST(HfMalformed, PackedLayerWithoutQuantConfig) {
  ExpectRefused("noquant", "quantize_config.json",
                [](const std::string& d, testing::FloatTensors& w) {
                  Rewrite(d, w, [](std::vector<StTensorData>& t) {
                    t.push_back({"model.layers.0.self_attn.q_proj.qweight",
                                 StDtype::kI32,
                                 {8, 64},
                                 std::vector<uint8_t>(8 * 64 * 4)});
                  });
                });
}

// A packed folder, then one thing broken.
void ExpectPackedRefused(const std::string& tag, const std::string& want,
                         const std::function<void(const std::string&)>& breakit,
                         testing::PackKind kind = testing::PackKind::kGptq, int group = 32) {
  const ModelConfig c = TinyHfConfig();
  testing::FloatTensors w = testing::RandomTinyWeights(c, 5);
  const std::string dir = testing::TempDir("hf-badq-" + tag);
  ASSERT_TRUE(testing::WritePackedFolder(dir, c, w, kind, group, 1).ok());
  breakit(dir);
  auto m = Model::Load(dir);
  ASSERT_FALSE(m.ok()) << tag << " was accepted";
  EXPECT_THAT(std::string(m.status().message()), ::testing::HasSubstr(want)) << tag;
}

TEST(HfMalformed, GptqEightBitsRefused) {
  ExpectPackedRefused("bits8", "8", [](const std::string& d) {
    (void)WriteFile(d + "/quantize_config.json",
                    "{\"bits\": 8, \"group_size\": 32, \"desc_act\": false}");
  });
}

TEST(HfMalformed, AwqGemvRefused) {
  ExpectPackedRefused(
      "gemv", "only GEMM",
      [](const std::string& d) {
        (void)WriteFile(d + "/quant_config.json",
                        "{\"zero_point\": true, \"q_group_size\": 32, \"w_bit\": 4, "
                        "\"version\": \"GEMV\"}");
      },
      testing::PackKind::kAwq);
}

TEST(HfMalformed, UnknownQuantMethodRefused) {
  ExpectPackedRefused("method", "bitsandbytes", [](const std::string& d) {
    fs::remove(d + "/quantize_config.json");
    (void)WriteFile(d + "/config.json",
                    testing::HfConfigJson(TinyHfConfig(),
                                          "\"quantization_config\": {\"quant_method\": "
                                          "\"bitsandbytes\", \"bits\": 4}"));
  });
}

TEST(HfMalformed, GroupSizeDisagreesWithPackedShapes) {
  ExpectPackedRefused("group", "q_proj", [](const std::string& d) {
    (void)WriteFile(d + "/quantize_config.json",
                    "{\"bits\": 4, \"group_size\": 16, \"desc_act\": false, \"sym\": false}");
  });
}

}  // namespace
}  // namespace pinfer
