#include "tidemark/operators/window/triggers.h"

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

}  // namespace tidemark
