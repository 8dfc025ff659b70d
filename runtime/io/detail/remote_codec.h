// runtime/io/detail/remote_codec.h
//
// How a batch of one element type crosses ranks (runtime/cluster/mpi_exchange.h):
// RemoteCodec is the type-erased face the exchange sees, RemoteBatchCodec<T>
// the implementation for Channel<T>.  A batch is encoded as
//
//   varint records, varint controls,
//   controls: varint position, u8 kind, i64 value      (in order)
//             a generalized watermark (kGeneralized) then its declaration:
//             bytes identifier, u8 type, u8 function, u8 flags, u8 strategy
//             (the receiving rank interns it: the ids of two processes
//             need not agree)
//   records:  trivially copyable T: the Record<T> array's bytes as they are;
//             otherwise per record i64 timestamp, StateCodec<T>::Encode(value)
//
// so the consumer replays exactly the batch the producer wrote: records,
// watermarks, statuses, end of input and checkpoint barriers in order.  The
// raw form is valid between ranks of one build on one architecture, which is
// what `mpirun` of one binary is; give a type a StateCodec for anything else.
#ifndef TM_RUNTIME_REMOTE_CODEC_H_
#define TM_RUNTIME_REMOTE_CODEC_H_

#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

// A generalized watermark's declaration (remote_codec.cc).
void EncodeWatermarkSpec(StateWriter& w, uint16_t tag);
// The local id of the declaration read; fails `r` when it is not one.
uint16_t DecodeWatermarkSpec(StateReader& r);

class RemoteCodec {
 public:
  virtual ~RemoteCodec() = default;
  // Pops the oldest batch of `ch` (a Channel<T>), appends its encoding to
  // *out, recycles it and adds its record count to *records; false when the
  // channel is empty.
  virtual bool PopEncode(ChannelBase* ch, std::string* out, int64_t* records) = 0;
  // Decodes one batch and pushes it onto `ch`; DATA_LOSS, saying what is
  // wrong, when the bytes are not a batch (nothing is pushed then).
  virtual absl::Status DecodePush(std::string_view bytes, ChannelBase* ch) = 0;
};

template <typename T>
class RemoteBatchCodec final : public RemoteCodec {
  static constexpr bool kRaw = kIsRawEncodable<T> && std::is_trivially_copyable_v<Record<T>>;

 public:
  bool PopEncode(ChannelBase* ch, std::string* out, int64_t* records) override {
    auto& c = *static_cast<Channel<T>*>(ch);
    std::unique_ptr<Batch<T>> b = c.Pop();
    if (!b) return false;
    StateWriter w(out);
    w.PutVarint(b->records.size());
    w.PutVarint(b->controls.size());
    for (const Control& k : b->controls) {
      w.PutVarint(k.position);
      w.PutU8(static_cast<uint8_t>(k.kind));
      w.PutI64(k.value);
      if (k.kind == ControlKind::kGeneralized) EncodeWatermarkSpec(w, k.tag);
    }
    if constexpr (kRaw) {
      w.PutRaw(b->records.data(), b->records.size() * sizeof(Record<T>));
    } else {
      for (const Record<T>& r : b->records) {
        w.PutI64(r.timestamp);
        Encode(w, r.value);
      }
    }
    *records += static_cast<int64_t>(b->records.size());
    c.Recycle(std::move(b));
    return true;
  }

  absl::Status DecodePush(std::string_view bytes, ChannelBase* ch) override {
    auto& c = *static_cast<Channel<T>*>(ch);
    std::unique_ptr<Batch<T>> b = c.AcquireBatch();
    StateReader r(bytes);
    const uint64_t n = r.GetCount("records");
    const uint64_t m = r.GetCount("controls");
    for (uint64_t i = 0; i < m && r.ok(); ++i) {
      Control k;
      const uint64_t pos = r.GetVarint("control position");
      const uint8_t kind = r.GetU8("control kind");
      k.value = r.GetI64("control value");
      k.tag = 0;
      if (r.ok() && kind == static_cast<uint8_t>(ControlKind::kGeneralized))
        k.tag = DecodeWatermarkSpec(r);
      if (r.ok() && (pos > n || kind > static_cast<uint8_t>(ControlKind::kGeneralized) ||
                     (!b->controls.empty() && pos < b->controls.back().position))) {
        r.Fail(absl::StrCat("control ", i, " is invalid (position ", pos, ", kind ", kind, ")"));
      }
      k.position = static_cast<uint32_t>(pos);
      k.kind = static_cast<ControlKind>(kind);
      b->controls.push_back(k);
    }
    if constexpr (kRaw) {
      const std::string_view raw = r.GetRaw(n * sizeof(Record<T>), "records");
      if (r.ok()) {
        b->records.resize(n);
        std::memcpy(static_cast<void*>(b->records.data()), raw.data(), raw.size());
      }
    } else {
      b->records.reserve(n);
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        const Timestamp ts = r.GetI64("timestamp");
        b->records.push_back(Record<T>{Decode<T>(r), ts});
      }
    }
    if (r.ok() && !r.AtEnd()) r.Fail(absl::StrCat(r.remaining(), " bytes after the batch"));
    if (!r.ok()) {
      c.Recycle(std::move(b));
      return absl::DataLossError(r.error());
    }
    c.Push(std::move(b));
    return absl::OkStatus();
  }
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_REMOTE_CODEC_H_
