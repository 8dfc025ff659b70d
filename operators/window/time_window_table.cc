// operators/window/time_window_table.cc: PositionIndex's growth and
// insertion, compiled once for every key and value type.
#include "tidemark/operators/window/time_window_table.h"

namespace tidemark::internal {
namespace {

// The lookup type of an insertion: the new position and its key's hash.  No
// position in the index equals it (its key is not there yet).
struct NewPosition {
  uint32_t pos;
  size_t hash;
  bool Matches(const void* /*slots*/, uint32_t p) const { return p == pos; }
};

}  // namespace

PositionIndex::PositionIndex(const void* slots, HashAt hash_at, PrefetchAt prefetch_at)
    : set_(Hash{slots, hash_at, prefetch_at}, Eq{slots}) {}

PositionIndex::~PositionIndex() = default;

void PositionIndex::InsertNew(uint32_t pos, size_t hash) {
  set_.LazyEmplace(NewPosition{pos, hash}, hash, [pos](const auto& ctor) { ctor(pos); });
}

void PositionIndex::Reserve(size_t n) { set_.Reserve(n); }

size_t PositionIndex::AllocatedBytes() const { return set_.AllocatedBytes(); }

}  // namespace tidemark::internal
