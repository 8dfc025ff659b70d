// tests/gate_test_util.h: an input gate driven by hand, shared by the
// checkpoint tests (aligned and unaligned barriers).
#ifndef TM_TESTS_GATE_TEST_UTIL_H_
#define TM_TESTS_GATE_TEST_UTIL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/tidemark.h"

namespace tidemark::testing {

// One batch: ints are records; "B<n>" an (aligned) barrier, "M<n>" the
// in-band marker of unaligned barrier n, "E" the end, "I"/"A" idle / active,
// "W<t>" a watermark.
inline std::unique_ptr<internal::Batch<int>> MakeBatch(const std::vector<std::string>& items) {
  using internal::ControlKind;
  auto b = std::make_unique<internal::Batch<int>>();
  for (const std::string& it : items) {
    if (it[0] == 'B') {
      b->AddControl(ControlKind::kBarrier, std::stoll(it.substr(1)));
    } else if (it[0] == 'M') {
      b->AddControl(ControlKind::kBarrier, std::stoll(it.substr(1)), internal::kUnalignedBarrier);
    } else if (it == "E") {
      b->AddControl(ControlKind::kEndOfInput, 0);
    } else if (it == "I" || it == "A") {
      b->AddControl(ControlKind::kStatus, it == "I" ? 1 : 0);
    } else if (it[0] == 'W') {
      b->AddControl(ControlKind::kWatermark, std::stoll(it.substr(1)));
    } else {
      b->records.push_back(internal::Record<int>{std::stoi(it), 0});
    }
  }
  return b;
}

// `n` channels of `capacity` batches into one gate whose output and barrier
// handler is a `Recorder`.
template <typename Recorder>
struct GateFixtureBase {
  GateFixtureBase(int n, size_t capacity) : metrics("gate", 0, 1, n) {
    for (int i = 0; i < n; ++i)
      channels.push_back(std::make_unique<internal::Channel<int>>(capacity));
    std::vector<internal::Channel<int>*> raw;
    for (auto& c : channels) raw.push_back(c.get());
    gate = std::make_unique<internal::InputGate<int>>(raw, &rec, &metrics, nullptr);
    gate->SetBarrierHandler(&rec);
  }
  void Push(int c, const std::vector<std::string>& items) {
    channels[static_cast<size_t>(c)]->Push(MakeBatch(items));
  }
  SubtaskMetrics metrics;
  std::vector<std::unique_ptr<internal::Channel<int>>> channels;
  Recorder rec;
  std::unique_ptr<internal::InputGate<int>> gate;
};

}  // namespace tidemark::testing

#endif  // TM_TESTS_GATE_TEST_UTIL_H_
