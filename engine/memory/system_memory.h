// What the host has: memory the engine may budget from on the CPU backend.
#pragma once

#include <cstdint>

namespace pinfer {

// MemAvailable from /proc/meminfo in bytes (0 when it cannot be read).
uint64_t AvailableHostMemory();

}  // namespace pinfer
