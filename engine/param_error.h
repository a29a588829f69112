// Engine errors about one request parameter carry its name as data (an absl::Status payload),
// so a server can report it (OpenAI's error.param) without reading it back out of the
// message.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace pinfer {

// InvalidArgument with `message`, naming `param` ("temperature", "max_tokens", "n", ...).
absl::Status InvalidParamError(std::string_view param, std::string_view message);
// The parameter an error names; "" when it names none.
std::string ParamOf(const absl::Status& status);

}  // namespace pinfer
