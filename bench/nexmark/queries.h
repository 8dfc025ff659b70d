// bench/nexmark/queries.h
//
// Nexmark's queries q0-q22 as tidemark jobs (the SQL of nexmark-flink's
// src/main/resources/queries/ and Beam's Nexmark q0-q12 define them), each
// with an independent single-threaded reference: a plain loop over the same
// generated events that computes the same answer.
//
// What is compared: append-only queries, the multiset of rows; updating
// queries (q4, q6 is append-only here, q9, q15-q19), the final table the
// emitted changelog leaves (inserts minus deletes).  q12 groups by
// processing-time windows, whose rows depend on the machine's speed: it is
// compared by the number of bids per bidder summed over its windows; q18's
// bids at equal times are kept in arrival order, which is not deterministic
// across source subtasks: its rows are compared by key and time.
// Results are kept as an order-independent digest (a sum of mixed row hashes
// and a row count, valid in one process) and, when asked, as JSON lines.
#ifndef TM_BENCH_NEXMARK_QUERIES_H_
#define TM_BENCH_NEXMARK_QUERIES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bench/nexmark/generator.h"
#include "bench/nexmark/model.h"
#include "tidemark/tidemark.h"

namespace nexmark {

// An order-independent digest of a multiset of rows.
struct Digest {
  uint64_t sum = 0;
  int64_t count = 0;
  bool operator==(const Digest&) const = default;
};

// What a row contributes to a digest: by default its hash once; a row type
// may say otherwise with DigestHash() / DigestWeight() (q12).
template <Row R>
uint64_t DigestHashOf(const R& r) {
  if constexpr (requires { r.DigestHash(); }) {
    return r.DigestHash();
  } else {
    return RowHash(r);
  }
}
template <Row R>
int64_t DigestWeightOf(const R& r) {
  if constexpr (requires { r.DigestWeight(); }) {
    return r.DigestWeight();
  } else {
    (void)r;
    return 1;
  }
}

// What a sink (and a reference loop) does with each row: digest it (and keep
// it as JSON when asked), or only count it, as the blackhole sink of
// Nexmark's Flink runs consumes rows without looking at them.
enum class SinkMode { kDigest, kCount };

// Accumulates rows (sign +1: insert, -1: delete) on one thread.
class RowAccumulator {
 public:
  explicit RowAccumulator(bool keep_rows, SinkMode mode = SinkMode::kDigest)
      : keep_rows_(keep_rows), count_only_(mode == SinkMode::kCount) {}
  template <Row R>
  void Add(const R& r, int sign = 1) {
    const int64_t w = DigestWeightOf(r) * sign;
    digest_.count += w;
    if (count_only_) return;
    digest_.sum += Mix(DigestHashOf(r)) * static_cast<uint64_t>(w);
    if (keep_rows_) rows_[ToJson(r)] += sign;
  }
  const Digest& digest() const { return digest_; }
  std::map<std::string, int64_t>& rows() { return rows_; }
  bool keep_rows() const { return keep_rows_; }
  SinkMode mode() const { return count_only_ ? SinkMode::kCount : SinkMode::kDigest; }

 private:
  bool keep_rows_;
  bool count_only_;
  Digest digest_;
  std::map<std::string, int64_t> rows_;  // JSON -> multiplicity
};

// The results of one run, merged from the sink subtasks.  Thread-safe.
class ResultSet {
 public:
  // kCount: the rows are only counted (digest().sum stays 0, no rows kept).
  explicit ResultSet(bool keep_rows, SinkMode mode = SinkMode::kDigest)
      : keep_rows_(keep_rows && mode == SinkMode::kDigest), mode_(mode) {}
  bool keep_rows() const { return keep_rows_; }
  SinkMode mode() const { return mode_; }
  void Merge(RowAccumulator& acc);
  Digest digest() const;
  // The final table as sorted JSON lines, each row as often as it is in the
  // table; a row deleted more often than inserted is reported as
  // "!negative <count> <row>".
  std::vector<std::string> Rows() const;
  // The digest and the rows as bytes (another process of the same binary
  // adds them with MergeEncoded: the digests of MPI ranks add up), and back.
  std::string Encode() const;
  // Throws std::runtime_error on bytes that Encode did not write.
  void MergeEncoded(std::string_view bytes);

 private:
  bool keep_rows_;
  SinkMode mode_;
  mutable std::mutex mu_;
  Digest digest_;
  std::map<std::string, int64_t> rows_;
};

struct QueryDef {
  std::string name;  // "q0" .. "q22"
  bool updating = false;
  double flink_per_core = 0;  // nexmark/nexmark's Flink 1.13 Throughput/Cores (events/s); 0: none
  std::string description;
  // Adds the query's operators and its sink (into `results`) to the job.
  std::function<void(tidemark::StreamExecutionEnvironment& env, tidemark::DataStream<Event> events,
                     std::shared_ptr<ResultSet> results)>
      build;
  // The single-threaded reference over events 0 .. config().events - 1.
  std::function<void(const Generator& gen, RowAccumulator& out)> reference;
};

// q0 .. q22, in order.
const std::vector<QueryDef>& Queries();
// Other plans of some queries, run by name only (not by --queries=all):
// "q13-broadcast" (q13's join with broadcast state).
const std::vector<QueryDef>& QueryVariants();
// A query of Queries() or QueryVariants() by name; null if none.
const QueryDef* FindQuery(const std::string& name);

// Runs the reference of `q` into a ResultSet (kCount: its rows only counted).
std::shared_ptr<ResultSet> RunReference(const QueryDef& q, const Generator& gen, bool keep_rows,
                                        SinkMode mode = SinkMode::kDigest);

// Runs `q` as a tidemark job over `gen`'s events at parallelism `p`;
// `configure` may change the environment (checkpoints) before execute.
struct JobRun {
  std::shared_ptr<ResultSet> results;
  bool ok = false;
  std::string error;
};
JobRun RunJob(const QueryDef& q, std::shared_ptr<const Generator> gen, int parallelism,
              bool keep_rows,
              const std::function<void(tidemark::StreamExecutionEnvironment&)>& configure = {});

}  // namespace nexmark

#endif  // TM_BENCH_NEXMARK_QUERIES_H_
