// File: opening a GGUF file by memory-mapping it (read-only, private), the
// mapping's lifetime, and lookups by key and tensor name. Parsing is in
// gguf_parser.cpp, typed accessors in gguf_accessors.cpp.
//
// Why mmap: weights are read in place (no second copy in host memory, which
// matters on Jetson's shared memory), and pages the model never touches are
// never read from disk.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/gguf/gguf.h"

namespace minfer::gguf {
namespace {

// Closes a file descriptor on every path out of open().
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

Error io_error(const std::string& path, const char* what, int err) {
  return Error(ErrorCode::kIo, fmt::format("{}: {}: {}", path, what, std::strerror(err)));
}

}  // namespace

Expected<std::unique_ptr<File>> File::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO (or a device) for reading would otherwise
  // wait for a writer, forever, before the regular-file check below can
  // refuse it: a daemon started on such a path would hang instead of
  // failing. Regular files ignore the flag; mmap does not use it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return io_error(path, "cannot open", errno);
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) {
    return Error(ErrorCode::kIo, fmt::format("{}: not a regular file", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    // mmap refuses length 0; the parser reports the empty file as truncated.
    return parse(std::span<const uint8_t>(), path);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return io_error(path, "cannot mmap", errno);
  auto parsed = parse(std::span<const uint8_t>(static_cast<const uint8_t*>(map), size), path);
  if (!parsed) {
    ::munmap(map, size);
    return parsed;
  }
  (*parsed)->map_ = map;
  (*parsed)->map_size_ = size;
  return parsed;
}

File::~File() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t File::release_tensor_pages() const {
  if (map_ == nullptr || data_offset_ >= map_size_) return 0;
  // madvise needs a page-aligned start: round the data section's start up.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (data_offset_ + page - 1) / page * page;
  if (begin >= map_size_) return 0;
  const uint64_t len = map_size_ - begin;
  if (::madvise(static_cast<uint8_t*>(map_) + begin, len, MADV_DONTNEED) != 0) return 0;
  return len;
}

}  // namespace minfer::gguf
