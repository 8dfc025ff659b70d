// The consumer's own runtime/time.h: tidemark's headers must not pick it up
// in place of theirs (they include "tidemark/runtime/core/time.h"), and this
// program must get this one for "runtime/time.h".
#ifndef CONSUMER_RUNTIME_TIME_H_
#define CONSUMER_RUNTIME_TIME_H_

namespace consumer {
inline const char* TimeHeaderOwner() { return "consumer"; }
}  // namespace consumer

#endif  // CONSUMER_RUNTIME_TIME_H_
