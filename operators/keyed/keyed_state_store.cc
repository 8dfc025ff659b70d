// operators/keyed/keyed_state_store.cc: the parts of keyed_state_store.h
// that do not depend on the key type.
#include "tidemark/operators/keyed/keyed_state_store.h"

#include <string>
#include <string_view>
#include <utility>

namespace tidemark::internal {

void KvScanEntries(StateWriter& w, const KvSnapshot& snap, std::string_view prefix,
                   const KvValueFilter& filter) {
  std::string body;
  std::string kept;
  uint64_t n = 0;
  snap.Scan(prefix, [&](std::string_view k, std::string_view v) {
    if (filter) {
      if (!filter(v, &kept)) return;
      v = kept;
    }
    body.append(k.substr(prefix.size() + 2));
    body.append(v);
    ++n;
  });
  w.PutVarint(n);
  w.PutRaw(body.data(), body.size());
}

std::string EncodeKvNative(const KvNativeDescriptor& d) {
  std::string out;
  StateWriter w(&out);
  w.PutU32(kKvNativeMagic);
  w.PutVarint(1);  // version
  w.PutBytes(d.shared_dir);
  w.PutVarint(static_cast<uint64_t>(d.first));
  w.PutVarint(static_cast<uint64_t>(d.last + 1));
  w.PutVarint(static_cast<uint64_t>(d.max_parallelism));
  w.PutVarint(d.tables.size());
  for (const auto& [name, id] : d.tables) {
    w.PutBytes(name);
    w.PutU32(id);
  }
  w.PutVarint(d.files.size());
  for (const KvNativeFile& f : d.files) {
    w.PutBytes(f.local);
    w.PutBytes(f.shared);
    w.PutVarint(f.size);
  }
  return out;
}
KvNativeDescriptor DecodeKvNative(StateReader& r) {
  KvNativeDescriptor d;
  if (r.GetU32("native checkpoint magic") != kKvNativeMagic && r.ok())
    r.Fail("not a native RocksDB checkpoint description (bad magic)");
  if (const uint64_t v = r.GetVarint("native checkpoint version"); r.ok() && v != 1)
    r.Fail("native RocksDB checkpoint format version " + std::to_string(v) +
           ", this build reads 1");
  d.shared_dir = std::string(r.GetBytes("shared directory"));
  d.first = static_cast<int>(r.GetVarint("first key group"));
  d.last = static_cast<int>(r.GetVarint("last key group")) - 1;
  d.max_parallelism = static_cast<int>(r.GetVarint("max parallelism"));
  const uint64_t nt = r.GetCount("native tables");
  for (uint64_t i = 0; i < nt && r.ok(); ++i) {
    std::string name(r.GetBytes("table name"));
    const uint32_t id = r.GetU32("table number");
    d.tables.emplace_back(std::move(name), id);
  }
  const uint64_t nf = r.GetCount("native files");
  for (uint64_t i = 0; i < nf && r.ok(); ++i) {
    KvNativeFile f;
    f.local = std::string(r.GetBytes("file name"));
    f.shared = std::string(r.GetBytes("shared file name"));
    f.size = r.GetVarint("file size");
    d.files.push_back(std::move(f));
  }
  return d;
}

}  // namespace tidemark::internal
