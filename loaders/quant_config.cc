#include "loaders/quant_config.h"

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/json_strict.h"

namespace pinfer {
namespace {

absl::Status Refuse(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": ", Sv(what)));
}

absl::StatusOr<QuantConfig> FromJson(const nlohmann::json& q, std::string_view source,
                                     QuantMethod default_method) {
  if (!q.is_object()) return Refuse(source, "quantization config is not a JSON object");
  QuantConfig c;
  c.method = default_method;
  if (q.contains("quant_method")) {
    if (!q["quant_method"].is_string()) return Refuse(source, "quant_method is not a string");
    const std::string m = absl::AsciiStrToLower(q["quant_method"].get<std::string>());
    if (m == "gptq") {
      c.method = QuantMethod::kGptq;
    } else if (m == "awq") {
      c.method = QuantMethod::kAwq;
    } else {
      return absl::UnimplementedError(absl::StrCat(Sv(source), ": quant_method '", m,
                                                   "' is not supported (only gptq and awq)"));
    }
  }
  auto get_int = [&](std::initializer_list<const char*> keys, int* out) -> absl::Status {
    for (const char* k : keys) {
      if (!q.contains(k) || q[k].is_null()) continue;
      if (!q[k].is_number_integer()) {
        return Refuse(source, absl::StrCat("\"", k, "\" is ", q[k].dump(), ", not an integer"));
      }
      *out = q[k].get<int>();
      return absl::OkStatus();
    }
    return absl::OkStatus();
  };
  if (absl::Status s = get_int({"bits", "w_bit"}, &c.bits); !s.ok()) return s;
  if (absl::Status s = get_int({"group_size", "q_group_size"}, &c.group_size); !s.ok()) return s;
  if (c.bits != 4) {
    return absl::UnimplementedError(
        absl::StrCat(Sv(source), ": ", Sv(QuantMethodName(c.method)), " with bits = ", c.bits,
                     " is not supported; only 4-bit checkpoints can be repacked"));
  }
  if (c.group_size == 0 || c.group_size < -1) {
    return Refuse(source, absl::StrCat("group_size ", c.group_size, " is not -1 or positive"));
  }
  if (q.contains("desc_act") && q["desc_act"].is_boolean()) c.desc_act = q["desc_act"].get<bool>();
  if (q.contains("sym") && q["sym"].is_boolean()) c.sym = q["sym"].get<bool>();
  if (c.method == QuantMethod::kAwq) {
    c.zero_offset = 0;
    if (q.contains("zero_point") && q["zero_point"].is_boolean()) {
      c.sym = !q["zero_point"].get<bool>();
    }
    if (q.contains("version") && q["version"].is_string()) {
      const std::string v = absl::AsciiStrToLower(q["version"].get<std::string>());
      if (v != "gemm") {
        return absl::UnimplementedError(
            absl::StrCat(Sv(source), ": AWQ version '", v,
                         "' packs weights differently; only GEMM is supported"));
      }
    }
  } else if (q.contains("checkpoint_format") && q["checkpoint_format"].is_string()) {
    const std::string f = q["checkpoint_format"].get<std::string>();
    if (f == "gptq_v2") {
      c.zero_offset = 0;
    } else if (f != "gptq") {
      return absl::UnimplementedError(absl::StrCat(Sv(source), ": GPTQ checkpoint_format '", f,
                                                   "' is not supported (gptq, gptq_v2)"));
    }
  }
  return c;
}

}  // namespace

std::string_view QuantMethodName(QuantMethod m) { return m == QuantMethod::kAwq ? "awq" : "gptq"; }

absl::StatusOr<QuantConfig> ParseQuantConfigJson(std::string_view json_text,
                                                 std::string_view source,
                                                 QuantMethod default_method) {
  absl::StatusOr<nlohmann::json> j = ParseJsonStrict(json_text, source);
  if (!j.ok()) return j.status();
  return FromJson(*j, source, default_method);
}

absl::StatusOr<std::optional<QuantConfig>> LoadQuantConfig(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string config = (fs::path(folder) / "config.json").string();
  if (fs::exists(config, ec)) {
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(config);
    if (!j.ok()) return j.status();
    if (j->is_object() && j->contains("quantization_config") &&
        !(*j)["quantization_config"].is_null()) {
      absl::StatusOr<QuantConfig> c =
          FromJson((*j)["quantization_config"], absl::StrCat(config, " quantization_config"),
                   QuantMethod::kGptq);
      if (!c.ok()) return c.status();
      return std::optional<QuantConfig>(*c);
    }
  }
  for (const auto& [name, method] : {std::pair{"quantize_config.json", QuantMethod::kGptq},
                                     std::pair{"quant_config.json", QuantMethod::kAwq}}) {
    const std::string path = (fs::path(folder) / name).string();
    if (!fs::exists(path, ec)) continue;
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(path);
    if (!j.ok()) return j.status();
    absl::StatusOr<QuantConfig> c = FromJson(*j, path, method);
    if (!c.ok()) return c.status();
    return std::optional<QuantConfig>(*c);
  }
  return std::optional<QuantConfig>();
}

}  // namespace pinfer
