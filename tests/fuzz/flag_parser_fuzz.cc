// libFuzzer target: the flag languages of `tidemark run` (tools/cli/specs.h):
// durations, window specs, watermark specs, aggregates.  Nothing may crash or
// overflow, and every accepted window spec must satisfy the rules the window
// assigners enforce (size > 0, slide > 0, |offset| < size or slide, gap > 0).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tools/cli/specs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using namespace tidemark::cli;
  (void)ParseDuration(text);
  (void)ParseAggregate(text);
  if (auto w = ParseWatermarkSpec(text); w.ok() && w->delay.count() < 0) std::abort();
  if (auto w = ParseWindowSpec(text); w.ok()) {
    switch (w->kind) {
      case WindowSpec::Kind::kTumbling:
        if (w->size.count() <= 0 || std::llabs(w->offset.count()) >= w->size.count()) std::abort();
        break;
      case WindowSpec::Kind::kSliding:
        if (w->size.count() <= 0 || w->slide.count() <= 0 ||
            std::llabs(w->offset.count()) >= w->slide.count())
          std::abort();
        break;
      case WindowSpec::Kind::kSession:
        if (w->gap.count() <= 0) std::abort();
        break;
    }
  }
  return 0;
}
