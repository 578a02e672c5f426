// Whether this test program is built with a sanitizer (the CI's ASan+UBSan and TSan stages).
// Under one the engines run tens of times slower and the CLI starts slowly; tests that repeat
// the same paths many times for statistics (random kills) or scale (a grid 16x a budget) do
// fewer or smaller repeats there, as the release stage runs them in full.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DEEPGRID_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEEPGRID_TEST_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define DEEPGRID_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DEEPGRID_TEST_UNDER_TSAN 1
#endif
#endif

namespace deepgrid::testing {

#if defined(DEEPGRID_TEST_UNDER_ASAN) || defined(DEEPGRID_TEST_UNDER_TSAN)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif

}  // namespace deepgrid::testing
