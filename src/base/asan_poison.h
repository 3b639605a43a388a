// GBX_POISON / GBX_UNPOISON: mark memory that a recycling allocator holds idle as
// inaccessible under AddressSanitizer, so a use after free of recycled memory is reported like
// one of heap memory; no-ops in other builds.
#pragma once

// GBX_ASAN: built with AddressSanitizer (gcc defines __SANITIZE_ADDRESS__, clang 14 only
// answers __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define GBX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GBX_ASAN 1
#endif
#endif

#if defined(GBX_ASAN)
#include <sanitizer/asan_interface.h>
#define GBX_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define GBX_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define GBX_POISON(p, n) ((void)(p), (void)(n))
#define GBX_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
