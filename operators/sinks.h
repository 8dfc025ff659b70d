// operators/sinks.h
//
// Sinks: print (Flink's PrintSinkFunction format), collect (into memory, for
// tests and callers), write_as_text (a text file per subtask).
#ifndef TM_OPERATORS_SINKS_H_
#define TM_OPERATORS_SINKS_H_

#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/format.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark {

// Serialises whole lines written by print sinks of every job: hold it to
// write to standard output without interleaving with print().  (A plain
// std::mutex, part of the API: it guards the standard output stream, not a
// field, so there is nothing for the thread-safety analysis to check.)
std::mutex& PrintMutex();

namespace internal {

// print(): "value" with parallelism 1, "N> value" (N = subtask index + 1)
// otherwise; with a name: "name> value" or "name:N> value", exactly as Flink
// prints.
template <typename T>
class PrintSinkOperator final : public BatchedSinkOperator<PrintSinkOperator<T>, T> {
 public:
  using Formatter = std::function<std::string(const T&)>;
  // `fmt` must not be empty (DataStream::print passes DefaultFormatter<T>()).
  PrintSinkOperator(std::string name, std::ostream* out, Formatter fmt)
      : name_(std::move(name)), out_(out), fmt_(std::move(fmt)) {
    if (!fmt_) throw std::invalid_argument("print: the formatter is empty");
  }
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    prefix_ = name_;
    if (ctx.parallelism() > 1) {
      prefix_ = absl::StrCat(prefix_, prefix_.empty() ? "" : ":", ctx.subtask_index() + 1);
    }
    if (!prefix_.empty()) prefix_ += "> ";
  }
  void ProcessElement(T&& v, Timestamp) override {
    std::string line = absl::StrCat(prefix_, fmt_(v), "\n");
    std::lock_guard<std::mutex> lock(PrintMutex());
    (*out_) << line;
    out_->flush();
  }
  void ProcessWatermark(Timestamp) override {}
  void ProcessStatus(WatermarkStatus) override {}

 private:
  std::string name_;
  std::ostream* out_;
  Formatter fmt_;
  std::string prefix_;
};

}  // namespace internal
// What collect() gathers; readable after (and, with care, during) the job.
template <typename T>
class CollectedResults {
 public:
  struct Item {
    T value;
    Timestamp timestamp;
    int subtask;
  };
  void Add(T&& v, Timestamp ts, int subtask) {
    internal::MutexLock lock(&mu_);
    items_.push_back(Item{std::move(v), ts, subtask});
  }
  std::vector<Item> items() const {
    internal::MutexLock lock(&mu_);
    return items_;
  }
  std::vector<T> values() const {
    internal::MutexLock lock(&mu_);
    std::vector<T> out;
    out.reserve(items_.size());
    for (const auto& i : items_) out.push_back(i.value);
    return out;
  }
  size_t size() const {
    internal::MutexLock lock(&mu_);
    return items_.size();
  }
  void clear() {
    internal::MutexLock lock(&mu_);
    items_.clear();
  }

 private:
  mutable internal::Mutex mu_;
  std::vector<Item> items_ ABSL_GUARDED_BY(mu_);
};

namespace internal {
template <typename T>
class CollectSinkOperator final : public BatchedSinkOperator<CollectSinkOperator<T>, T> {
 public:
  explicit CollectSinkOperator(std::shared_ptr<CollectedResults<T>> results)
      : results_(std::move(results)) {}
  void ProcessElement(T&& v, Timestamp ts) override {
    results_->Add(std::move(v), ts, this->ctx().subtask_index());
  }
  void ProcessWatermark(Timestamp) override {}
  void ProcessStatus(WatermarkStatus) override {}

 private:
  std::shared_ptr<CollectedResults<T>> results_;
};

// write_as_text(path): parallelism 1 writes `path`; parallelism n writes
// `path/1` ... `path/n`.  Missing directories are created (as Flink's file
// sinks create theirs).  At least once: a fresh run replaces the file; a
// restored one appends to it (the records after the checkpoint come again),
// and every checkpoint flushes what came before its barrier.
// The output file of one text sink subtask (sinks.cc): `path` itself at
// parallelism 1, else the file `path`/(subtask + 1) in the directory `path`.
// Every failure throws with a message naming the file.
class TextSinkFile {
 public:
  TextSinkFile();
  ~TextSinkFile();
  // `append`: keep what the file holds (a restored subtask); else empty it.
  // Returns whether the file is empty now (a header goes first).
  bool Open(const std::string& path, int subtask, int parallelism, bool append = false);
  bool is_open() const { return out_ != nullptr; }
  void WriteLine(const std::string& line);
  void Flush();
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::unique_ptr<std::ofstream> out_;
};

template <typename T>
class TextFileSinkOperator final : public BatchedSinkOperator<TextFileSinkOperator<T>, T> {
 public:
  using Formatter = std::function<std::string(const T&)>;
  // `fmt` must not be empty (DataStream::write_as_text passes
  // DefaultFormatter<T>()).
  // `header`: the file's first line, none when empty.
  TextFileSinkOperator(std::string path, Formatter fmt, std::string header = {})
      : path_(std::move(path)), fmt_(std::move(fmt)), header_(std::move(header)) {
    if (!fmt_) throw std::invalid_argument("write_as_text: the formatter is empty");
  }
  // The file is opened at the first record (or checkpoint, or the end), so
  // that a restored subtask (RestoreState comes right after Open) appends to
  // it instead of emptying it.
  void RestoreState(StateReader&) override { restored_ = true; }
  void ProcessElement(T&& v, Timestamp) override {
    if (!file_.is_open()) [[unlikely]]
      OpenFile();
    file_.WriteLine(fmt_(v));
  }
  void ProcessWatermark(Timestamp) override {}
  void ProcessStatus(WatermarkStatus) override {}
  void PrepareSnapshotPreBarrier(int64_t) override {
    if (!file_.is_open()) OpenFile();
    file_.Flush();
  }
  void Finish() override {
    if (!file_.is_open()) OpenFile();
    file_.Flush();
  }

 private:
  void OpenFile() {
    const bool empty =
        file_.Open(path_, this->ctx().subtask_index(), this->ctx().parallelism(), restored_);
    if (empty && !header_.empty()) file_.WriteLine(header_);
  }

  std::string path_;
  Formatter fmt_;
  std::string header_;
  TextSinkFile file_;
  bool restored_ = false;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_SINKS_H_
