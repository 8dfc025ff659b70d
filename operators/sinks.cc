#include "tidemark/operators/sinks.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tidemark {

std::mutex& PrintMutex() {
  static std::mutex mu;
  return mu;
}

namespace internal {

TextSinkFile::TextSinkFile() = default;
TextSinkFile::~TextSinkFile() = default;

bool TextSinkFile::Open(const std::string& path, int subtask, int parallelism, bool append) {
  file_ = path;
  if (parallelism > 1) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec)
      throw std::runtime_error(absl::StrCat("cannot create directory ", path, ": ", ec.message()));
    file_ = absl::StrCat(path, "/", subtask + 1);
  } else if (const std::filesystem::path parent = std::filesystem::path(path).parent_path();
             !parent.empty()) {
    // As Flink's file sinks: the directory the file goes in is created.
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      throw std::runtime_error(
          absl::StrCat("cannot create directory ", parent.string(), ": ", ec.message()));
    }
  }
  out_ = std::make_unique<std::ofstream>(
      file_, append ? std::ios::out | std::ios::app : std::ios::out | std::ios::trunc);
  if (!*out_)
    throw std::runtime_error(
        absl::StrCat("cannot open ", file_, " for writing: ", std::strerror(errno)));
  out_->seekp(0, std::ios::end);
  return out_->tellp() <= 0;
}

void TextSinkFile::WriteLine(const std::string& line) {
  *out_ << line << '\n';
  if (!*out_) throw std::runtime_error(absl::StrCat("write to ", file_, " failed"));
}

void TextSinkFile::Flush() {
  out_->flush();
  if (!*out_) throw std::runtime_error(absl::StrCat("write to ", file_, " failed"));
}

}  // namespace internal
}  // namespace tidemark
