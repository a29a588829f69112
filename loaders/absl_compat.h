// Debian's abseil is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0),
// so a std::string_view does not pass to absl::StrCat / StrFormat directly. Sv() bridges it.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace pinfer {

inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace pinfer
