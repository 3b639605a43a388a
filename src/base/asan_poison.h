// GBX_POISON / GBX_UNPOISON: mark memory that a recycling allocator holds idle as
// inaccessible under AddressSanitizer, so a use after free of recycled memory is reported like
// one of heap memory; no-ops in other builds.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define GBX_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define GBX_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define GBX_POISON(p, n) ((void)(p), (void)(n))
#define GBX_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
