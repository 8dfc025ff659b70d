#include "tidemark/operators/window/triggers.h"

#include <string>
#include <utility>

namespace tidemark {

const char* ToString(TriggerResult r) {
  switch (r) {
    case TriggerResult::kContinue:
      return "CONTINUE";
    case TriggerResult::kFire:
      return "FIRE";
    case TriggerResult::kPurge:
      return "PURGE";
    case TriggerResult::kFireAndPurge:
      return "FIRE_AND_PURGE";
  }
  return "?";
}

namespace internal {

TriggerState::TriggerState() = default;
TriggerState::TriggerState(const TriggerState&) = default;
TriggerState::TriggerState(TriggerState&&) noexcept = default;
TriggerState& TriggerState::operator=(const TriggerState&) = default;
TriggerState& TriggerState::operator=(TriggerState&&) noexcept = default;
TriggerState::~TriggerState() = default;

void TriggerState::Erase(std::string_view name) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].name == name) {
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

void TriggerState::EncodeTo(StateWriter& w) const {
  w.PutVarint(entries_.size());
  for (const Entry& e : entries_) {
    w.PutBytes(e.name);
    if (e.bytes) {
      w.PutBytes(*e.bytes);
    } else {
      std::string bytes;
      StateWriter vw(&bytes);
      e.encode(vw, e.value, e.name);
      w.PutBytes(bytes);
    }
  }
}

TriggerState TriggerState::DecodeFrom(StateReader& r) {
  TriggerState s;
  const uint64_t n = r.GetCount("trigger state entries");
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    std::string name(r.GetBytes("trigger state name"));
    std::string bytes(r.GetBytes("trigger state value"));
    s.entries_.push_back(Entry{std::move(name), {}, nullptr, std::move(bytes)});
  }
  return s;
}

}  // namespace internal
}  // namespace tidemark
