// bench/nexmark/queries.cc: the query registry and the runs (queries.h).
#include "bench/nexmark/queries.h"

#include <utility>

namespace nexmark {

void AddQueriesA(std::vector<QueryDef>& qs);  // queries_a.cc: q0-q11
void AddQueriesB(std::vector<QueryDef>& qs);  // queries_b.cc: q12-q22

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

const std::vector<QueryDef>& Queries() {
  static const std::vector<QueryDef> qs = [] {
    std::vector<QueryDef> v;
    AddQueriesA(v);
    AddQueriesB(v);
    return v;
  }();
  return qs;
}

const QueryDef* FindQuery(const std::string& name) {
  for (const QueryDef& q : Queries())
    if (q.name == name) return &q;
  return nullptr;
}

std::shared_ptr<ResultSet> RunReference(const QueryDef& q, const Generator& gen, bool keep_rows) {
  auto rs = std::make_shared<ResultSet>(keep_rows);
  RowAccumulator acc(keep_rows);
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
