// bench-kv's picture: a hand-written SVG with two panels sharing the step axis, KV
// utilization (%) above and sequences running below, one line per layout, with axes, ticks
// and a legend. Opens in any browser.
#pragma once

#include <string>

#include "bench/kv_compare.h"

namespace pinfer {

std::string KvBenchSvg(const KvBenchResult& r);

}  // namespace pinfer
