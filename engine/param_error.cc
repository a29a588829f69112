#include "engine/param_error.h"

#include "absl/strings/cord.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

constexpr std::string_view kParamPayload = "type.pagedinfer/param";

}  // namespace

absl::Status InvalidParamError(std::string_view param, std::string_view message) {
  absl::Status s = absl::InvalidArgumentError(Sv(message));
  s.SetPayload(Sv(kParamPayload), absl::Cord(Sv(param)));
  return s;
}

std::string ParamOf(const absl::Status& status) {
  const auto p = status.GetPayload(Sv(kParamPayload));  // absl::optional<absl::Cord>
  return p ? std::string(*p) : std::string();
}

}  // namespace pinfer
