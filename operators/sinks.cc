#include "operators/sinks.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tidemark {

std::mutex& PrintMutex() {
  static std::mutex mu;
  return mu;
}

namespace internal {

std::string OpenSinkFile(const std::string& path, int subtask, int parallelism,
                         std::ofstream& out) {
  std::string file = path;
  if (parallelism > 1) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec)
      throw std::runtime_error(absl::StrCat("cannot create directory ", path, ": ", ec.message()));
    file = absl::StrCat(path, "/", subtask + 1);
  }
  out.open(file, std::ios::out | std::ios::trunc);
  if (!out)
    throw std::runtime_error(
        absl::StrCat("cannot open ", file, " for writing: ", std::strerror(errno)));
  return file;
}

}  // namespace internal
}  // namespace tidemark
