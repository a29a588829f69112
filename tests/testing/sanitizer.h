// Whether this build runs under AddressSanitizer or ThreadSanitizer (scripts/sanitize.sh):
// memory figures mean nothing there (shadow memory, quarantines), and code runs several times
// slower, so a test may skip what only a plain build can measure or afford.
#pragma once

namespace pinfer::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

}  // namespace pinfer::testing
