// operators/window/window_operator_base.cc: the window operators' parts that
// do not depend on the key type.
#include "tidemark/operators/window/window_operator_base.h"

namespace tidemark::internal {

DistinctKeys::DistinctKeys(HashFn hash, EqFn eq) : keys_(0, Hash{hash}, Eq{eq}) {}
DistinctKeys::~DistinctKeys() = default;
void DistinctKeys::Add(const void* key) { keys_.insert(key); }
size_t DistinctKeys::size() const { return keys_.size(); }

}  // namespace tidemark::internal
