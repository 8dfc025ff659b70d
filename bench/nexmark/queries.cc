// bench/nexmark/queries.cc: the query registry and the runs (queries.h).
#include "bench/nexmark/queries.h"

#include <cstring>
#include <stdexcept>
#include <utility>

namespace nexmark {

void AddQueriesA(std::vector<QueryDef>& qs);        // queries_a.cc: q0-q11
void AddQueriesB(std::vector<QueryDef>& qs);        // queries_b.cc: q12-q22
void AddQueryVariantsB(std::vector<QueryDef>& qs);  // queries_b.cc: q13-broadcast

void ResultSet::Merge(RowAccumulator& acc) {
  std::lock_guard<std::mutex> lock(mu_);
  digest_.sum += acc.digest().sum;
  digest_.count += acc.digest().count;
  for (auto& [row, n] : acc.rows()) rows_[row] += n;
  acc.rows().clear();
}

Digest ResultSet::digest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return digest_;
}

std::vector<std::string> ResultSet::Rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [row, n] : rows_) {
    if (n < 0) out.push_back("!negative " + std::to_string(n) + " " + row);
    for (int64_t i = 0; i < n; ++i) out.push_back(row);
  }
  return out;
}

// Little-endian-agnostic: the ranks are one binary on one architecture.
std::string ResultSet::Encode() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto put = [&out](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  put(&digest_.sum, 8);
  put(&digest_.count, 8);
  for (const auto& [row, n] : rows_) {
    const uint64_t len = row.size();
    put(&len, 8);
    put(row.data(), row.size());
    put(&n, 8);
  }
  return out;
}

void ResultSet::MergeEncoded(std::string_view bytes) {
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (bytes.size() - at < n)
      throw std::runtime_error("nexmark: truncated result set (" + std::to_string(bytes.size()) +
                               " bytes, wanted " + std::to_string(at + n) + ")");
    std::memcpy(p, bytes.data() + at, n);
    at += n;
  };
  Digest d;
  get(&d.sum, 8);
  get(&d.count, 8);
  std::map<std::string, int64_t> rows;
  while (at < bytes.size()) {
    uint64_t len = 0;
    get(&len, 8);
    if (len > bytes.size() - at) throw std::runtime_error("nexmark: truncated result row");
    std::string row(bytes.substr(at, len));
    at += len;
    int64_t n = 0;
    get(&n, 8);
    rows[std::move(row)] += n;
  }
  std::lock_guard<std::mutex> lock(mu_);
  digest_.sum += d.sum;
  digest_.count += d.count;
  for (auto& [row, n] : rows) rows_[row] += n;
}

const std::vector<QueryDef>& Queries() {
  static const std::vector<QueryDef> qs = [] {
    std::vector<QueryDef> v;
    AddQueriesA(v);
    AddQueriesB(v);
    return v;
  }();
  return qs;
}

const std::vector<QueryDef>& QueryVariants() {
  static const std::vector<QueryDef> qs = [] {
    std::vector<QueryDef> v;
    AddQueryVariantsB(v);
    return v;
  }();
  return qs;
}

const QueryDef* FindQuery(const std::string& name) {
  for (const QueryDef& q : Queries())
    if (q.name == name) return &q;
  for (const QueryDef& q : QueryVariants())
    if (q.name == name) return &q;
  return nullptr;
}

std::shared_ptr<ResultSet> RunReference(const QueryDef& q, const Generator& gen, bool keep_rows,
                                        SinkMode mode) {
  auto rs = std::make_shared<ResultSet>(keep_rows, mode);
  RowAccumulator acc(rs->keep_rows(), mode);
  q.reference(gen, acc);
  rs->Merge(acc);
  return rs;
}

JobRun RunJob(const QueryDef& q, std::shared_ptr<const Generator> gen, int parallelism,
              bool keep_rows,
              const std::function<void(tidemark::StreamExecutionEnvironment&)>& configure) {
  JobRun run;
  run.results = std::make_shared<ResultSet>(keep_rows);
  tidemark::StreamExecutionEnvironment env;
  env.set_parallelism(parallelism);
  if (configure) configure(env);
  q.build(env, NexmarkEvents(env, gen), run.results);
  tidemark::JobResult r = env.execute("nexmark " + q.name);
  run.ok = r.status.ok();
  if (!run.ok) run.error = r.status.ToString();
  return run;
}

}  // namespace nexmark
