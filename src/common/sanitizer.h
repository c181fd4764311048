// What a build under clang's or gcc's sanitizers needs to know about itself (docs/security.md,
// "Sanitizers"): whether AddressSanitizer or ThreadSanitizer is on, and, for code that runs a
// child on a stack of its own (a raw clone), clearing ASan's record of that memory.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define HANGAR_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HANGAR_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef HANGAR_ADDRESS_SANITIZER
#define HANGAR_ADDRESS_SANITIZER 0
#endif

#if defined(__SANITIZE_THREAD__)
#define HANGAR_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HANGAR_THREAD_SANITIZER 1
#endif
#endif
#ifndef HANGAR_THREAD_SANITIZER
#define HANGAR_THREAD_SANITIZER 0
#endif

#if HANGAR_ADDRESS_SANITIZER
#include <sanitizer/asan_interface.h>
#endif

namespace hangar {

// A fresh mmap() for a child's stack may lie where an earlier mapping (a thread's stack) left
// ASan's shadow poisoned; the child's own frames would then be reported as overflows (seen under
// `scripts/sanitize.sh --all`: a stack-buffer-overflow in the open-as-user child's sigaltstack).
// Marks [p, p + n) addressable under ASan; nothing otherwise.
inline void UnpoisonChildStack(void* p, size_t n) {
#if HANGAR_ADDRESS_SANITIZER
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p;
  (void)n;
#endif
}

}  // namespace hangar
