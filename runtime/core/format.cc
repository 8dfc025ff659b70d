// runtime/core/format.cc
#include "tidemark/runtime/core/format.h"

#include <sstream>

namespace tidemark::internal {

std::string StreamedText(void (*write)(std::ostream& os, const void* value), const void* value) {
  std::ostringstream os;
  write(os, value);
  return os.str();
}

}  // namespace tidemark::internal
