// generalized_watermarks_example: generalized watermarks (Flink 2's FLIP-467;
// docs/generalized-watermarks.md).  Parallel sources catch up on a backlog:
// each reports backlog=true (a bool watermark combined with OR, FLIP-309's
// isProcessingBacklog), its records with a long "progress" watermark
// (combined with MAX), then backlog=false.  Parallel process functions behind
// a rebalance read the combined values in on_watermark: backlog stays true
// while any source is behind, progress is the furthest any source got.
// Each function emits a "done" watermark of its own (a long combined with
// MIN: the slowest function's count) that the sink's stage sees.
//
//   generalized_watermarks_example [--n=N] [--parallelism=P] [--trace]
//
// --trace prints every generalized watermark as the runtime reports it (a
// WatermarkListener): sent by a subtask, or combined at a subtask's input.
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tidemark/tidemark.h"

ABSL_FLAG(int, n, 100, "records per source subtask (even)");
ABSL_FLAG(int, parallelism, 2, "the sources' and the functions' parallelism");
ABSL_FLAG(bool, trace, false, "print every generalized watermark sent and combined");

namespace {
using namespace tidemark;

const BoolWatermarkDeclaration& Backlog() {
  // Wait for every channel: "no backlog" only once every source has said so.
  static const auto d = WatermarkDeclarations::new_builder("backlog")
                            .type_bool()
                            .combine_function_or()
                            .combine_wait_for_all_channels(true)
                            .build();
  return d;
}
const LongWatermarkDeclaration& Progress() {
  static const auto d = WatermarkDeclarations::new_builder("progress")
                            .type_long()
                            .combine_function_max()
                            .combine_wait_for_all_channels(true)
                            .build();
  return d;
}
const LongWatermarkDeclaration& Done() {
  static const auto d =
      WatermarkDeclarations::new_builder("done").type_long().combine_function_min().build();
  return d;
}

class CatchingUp final : public Source<int64_t> {
 public:
  explicit CatchingUp(int n) : n_(n) {}
  void Open(const SourceContext& ctx) override { s_ = ctx.subtask_index; }
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    out.EmitGeneralizedWatermark(Backlog().new_watermark(true));
    for (int i = 1; i <= n_; ++i) {
      out.CollectWithTimestamp(i, i);
      if (i % 25 == 0 || i == n_)
        out.EmitGeneralizedWatermark(Progress().new_watermark((s_ + 1) * i));
    }
    out.EmitGeneralizedWatermark(Backlog().new_watermark(false));
    return PollStatus::kEndOfInput;
  }

 private:
  int n_;
  int s_ = 0;
};

std::mutex g_mu;
std::map<std::string, std::string> g_summary;  // "stage subtask" -> what it saw

void Report(const std::string& who, const std::string& what) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_summary[who] = what;
}

// Counts its records; says what backlog and progress came to.
struct Follow : ProcessFunction<int64_t, int64_t> {
  int subtask = 0;
  int64_t records = 0;
  std::string backlog;
  int64_t progress = 0;
  void open(const RuntimeContext& ctx) override { subtask = ctx.subtask_index(); }
  void process_element(const int64_t& v, Context&, Collector<int64_t>& out) override {
    ++records;
    out.collect(v);
  }
  std::vector<WatermarkDeclaration> declare_watermarks() const override { return {Done()}; }
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>&,
                                       Context& ctx) override {
    if (Backlog().matches(w)) {
      backlog += std::string(backlog.empty() ? "" : " -> ") + (w.bool_value() ? "true" : "false");
      // Caught up: say how many records this subtask processed.
      if (!w.bool_value()) ctx.emit_watermark(Done().new_watermark(records));
      return WatermarkHandlingResult::kPeek;  // forwarded downstream
    }
    progress = w.long_value();
    return WatermarkHandlingResult::kPoll;  // taken: not forwarded
  }
  void close() override {
    Report("follow " + std::to_string(subtask), "backlog " + backlog + ", progress " +
                                                    std::to_string(progress) + ", records " +
                                                    std::to_string(records));
  }
};

// The last stage: one subtask over every function's channel.
struct Last : ProcessFunction<int64_t, int64_t> {
  std::map<std::string, std::string> seen;  // identifier -> its values in order
  void process_element(const int64_t& v, Context&, Collector<int64_t>& out) override {
    out.collect(v);
  }
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>&,
                                       Context&) override {
    std::string& s = seen[w.identifier()];
    s += (s.empty() ? "" : " -> ") + w.ToString().substr(w.identifier().size() + 1);
    return WatermarkHandlingResult::kPeek;
  }
  void close() override {
    std::string line;
    for (const auto& [id, values] : seen) line += (line.empty() ? "" : ", ") + id + " " + values;
    Report("last", line);
  }
};

class PrintGeneralized final : public WatermarkListener {
 public:
  void OnGeneralizedWatermark(const std::string& task, int subtask, bool input, int channel,
                              const GeneralizedWatermark& w) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::cout << "[watermark] " << task << " subtask " << subtask
              << (input ? " combined (channel " + std::to_string(channel) + ") " : " sent ")
              << w.ToString() << "\n";
  }

 private:
  std::mutex mu_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Generalized watermarks: a bool backlog (OR) and a long progress (MAX) across parallel "
      "sources and process functions");
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_n);
  StreamExecutionEnvironment env;
  env.set_parallelism(absl::GetFlag(FLAGS_parallelism));
  if (absl::GetFlag(FLAGS_trace)) env.set_watermark_listener(std::make_shared<PrintGeneralized>());
  env.add_source<int64_t>([n] { return std::make_unique<CatchingUp>(n); }, "catching-up")
      .rebalance()
      .process(Follow())
      .name("follow")
      .rebalance()
      .process(Last())
      .name("last")
      .set_parallelism(1)
      .add_sink([](int64_t&&) {});
  JobResult r = env.execute("generalized_watermarks_example");
  if (!r.ok()) {
    std::cerr << r.status << "\n";
    return 1;
  }
  for (const auto& [who, what] : g_summary) std::cout << who << ": " << what << "\n";
  return 0;
}
