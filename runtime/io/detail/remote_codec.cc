#include "tidemark/runtime/io/detail/remote_codec.h"

#include <stdexcept>

#include "tidemark/runtime/core/generalized_watermark.h"

namespace tidemark::internal {

void EncodeWatermarkSpec(StateWriter& w, uint16_t tag) {
  const WatermarkSpec* s = LookupWatermarkSpec(tag);
  if (s == nullptr)
    throw std::logic_error(absl::StrCat("a generalized watermark of unknown kind ", tag));
  w.PutBytes(s->identifier);
  w.PutU8(static_cast<uint8_t>(s->type));
  w.PutU8(static_cast<uint8_t>(s->function));
  w.PutU8(
      static_cast<uint8_t>((s->wait_for_all_channels ? 1 : 0) | (s->ignore_idle_channels ? 2 : 0)));
  w.PutU8(static_cast<uint8_t>(s->strategy));
}

uint16_t DecodeWatermarkSpec(StateReader& r) {
  WatermarkSpec s;
  s.identifier = std::string(r.GetBytes("watermark identifier"));
  const uint8_t type = r.GetU8("watermark type");
  const uint8_t function = r.GetU8("watermark combination function");
  const uint8_t flags = r.GetU8("watermark flags");
  const uint8_t strategy = r.GetU8("watermark handling strategy");
  if (!r.ok()) return 0;
  if (type > static_cast<uint8_t>(WatermarkValueType::kBool) ||
      function > static_cast<uint8_t>(WatermarkCombinationFunction::kOr) || flags > 3 ||
      strategy > static_cast<uint8_t>(WatermarkHandlingStrategy::kIgnore)) {
    r.Fail(absl::StrCat("the declaration of watermark '", s.identifier, "' is invalid (type ", type,
                        ", function ", function, ", flags ", flags, ", strategy ", strategy, ")"));
    return 0;
  }
  s.type = static_cast<WatermarkValueType>(type);
  s.function = static_cast<WatermarkCombinationFunction>(function);
  s.wait_for_all_channels = (flags & 1) != 0;
  s.ignore_idle_channels = (flags & 2) != 0;
  s.strategy = static_cast<WatermarkHandlingStrategy>(strategy);
  try {
    return InternWatermarkSpec(s)->id;
  } catch (const std::invalid_argument& e) {
    r.Fail(e.what());
    return 0;
  }
}

}  // namespace tidemark::internal
