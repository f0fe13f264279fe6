// GGUF files: the metadata values, tensor infos, the memory-mapped reader and
// the writer.
//
// Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (v2 and v3;
// v1 used 32-bit counts and is refused). All integers are little-endian.
// The reader validates everything before trusting it: every count and length
// is checked against the bytes left in the file before anything is allocated,
// so a hostile file is an Error naming the file, the byte offset and the field,
// never a crash or a huge allocation.
//
// Implementation: gguf_value.cpp (Value), gguf_cursor.h (bounded reads),
// gguf_parser.cpp (header, metadata, tensor infos, layout checks),
// gguf_file.cpp (mmap, lookup), gguf_accessors.cpp (typed get_*),
// gguf_writer.cpp (Writer).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/common/expected.h"
#include "engine/quant/dtype.h"

namespace minfer::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;
inline constexpr const char* kAlignmentKey = "general.alignment";

// Arrays nested deeper than this are refused: real files nest at most one
// level, and the limit bounds the reader's recursion.
inline constexpr int kMaxArrayDepth = 64;
// Upper bound on the memory the parsed header may take (metadata Values,
// string bytes, tensor infos, the name indexes). Each array item becomes a
// Value of ~48 bytes however small it is on disk (a u8 is 1 byte), so the
// per-count checks alone would let a hostile file make us allocate ~48x its
// size. The largest real vocabularies (262k tokens: tokens + scores + types)
// take ~40 MiB; 256 MiB leaves room for 6x that.
inline constexpr uint64_t kMaxHeaderMemoryBytes = 256ull << 20;

enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u8", "string", "array", ...; "unknown" for an id outside the enum.
const char* value_type_name(ValueType t);
bool is_integer_type(ValueType t);

struct Value;

// An array value: the element type and the elements (arrays may nest).
struct Array {
  ValueType elem_type = ValueType::kU8;
  std::vector<Value> items;
};

// One metadata value. The variant index follows the payload, the stored
// `type` keeps the exact GGUF type (u8 and u32 both live in uint64_t).
struct Value {
  ValueType type = ValueType::kU8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  static Value u8(uint8_t v) { return {ValueType::kU8, uint64_t{v}}; }
  static Value i8(int8_t v) { return {ValueType::kI8, int64_t{v}}; }
  static Value u16(uint16_t v) { return {ValueType::kU16, uint64_t{v}}; }
  static Value i16(int16_t v) { return {ValueType::kI16, int64_t{v}}; }
  static Value u32(uint32_t v) { return {ValueType::kU32, uint64_t{v}}; }
  static Value i32(int32_t v) { return {ValueType::kI32, int64_t{v}}; }
  static Value u64(uint64_t v) { return {ValueType::kU64, v}; }
  static Value i64(int64_t v) { return {ValueType::kI64, v}; }
  static Value f32(float v) { return {ValueType::kF32, double{v}}; }
  static Value f64(double v) { return {ValueType::kF64, v}; }
  static Value boolean(bool v) { return {ValueType::kBool, v}; }
  static Value string(std::string v) { return {ValueType::kString, std::move(v)}; }
  static Value array(ValueType elem_type, std::vector<Value> items) {
    return {ValueType::kArray, Array{elem_type, std::move(items)}};
  }
  static Value string_array(const std::vector<std::string>& items);
  static Value f32_array(const std::vector<float>& items);
  static Value i32_array(const std::vector<int32_t>& items);

  // Same type and payload; floats compare by bits, so NaN payloads and -0.0
  // survive a round trip check.
  bool operator==(const Value& other) const;

  // "u32", "string", "array of string (512 items)".
  std::string type_string() const;

  // Human-readable rendering. Arrays longer than `max_items` show their first
  // `max_items` and last 3 items: "[a, b, ..., y, z] (N items)". Strings are
  // quoted with C escapes and cut after `max_string_bytes` bytes.
  std::string to_string(size_t max_items = 8, size_t max_string_bytes = SIZE_MAX) const;
};

// One tensor as described in the header. `data` points into the mapping.
struct TensorInfo {
  std::string name;
  int n_dims = 0;
  std::array<uint64_t, kMaxDims> ne{1, 1, 1, 1};  // ne[0] is the contiguous dim
  DType type = DType::kF32;
  uint64_t offset = 0;       // relative to the start of the data section
  uint64_t size_bytes = 0;   // row_size(type, ne[0]) * ne[1] * ne[2] * ne[3]
  const uint8_t* data = nullptr;

  uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;  // "[896, 151936]"
};

// A parsed, memory-mapped GGUF file. Immutable after open(); tensor data stays
// mapped for the object's life (weights are read straight from the mapping).
class File {
 public:
  static Expected<std::unique_ptr<File>> open(const std::string& path);
  // Parses a file image already in memory (tests, fuzzing). The bytes must
  // outlive the File.
  static Expected<std::unique_ptr<File>> parse(std::span<const uint8_t> bytes, std::string name);

  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  uint64_t file_size() const { return bytes_.size(); }

  // Metadata in file order, with a name index.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors: the error names the file, the key, the expected type and
  // what was found ("key 'llama.block_count': expected an unsigned integer,
  // found string"). Integer accessors accept any integer type whose value fits.
  Expected<uint64_t> get_u64(std::string_view key) const;
  Expected<uint32_t> get_u32(std::string_view key) const;
  Expected<int64_t> get_i64(std::string_view key) const;
  Expected<double> get_f64(std::string_view key) const;  // accepts f32 and f64
  Expected<float> get_f32(std::string_view key) const;   // accepts f32 and f64
  Expected<bool> get_bool(std::string_view key) const;
  Expected<std::string> get_string(std::string_view key) const;
  Expected<const Array*> get_array(std::string_view key, ValueType elem_type) const;
  Expected<std::vector<std::string>> get_string_array(std::string_view key) const;
  Expected<std::vector<float>> get_f32_array(std::string_view key) const;    // f32 or f64 items
  Expected<std::vector<int32_t>> get_i32_array(std::string_view key) const;  // any integer items that fit

  // Optional variants: the default when the key is absent, an error only when
  // it is present with the wrong type.
  Expected<uint32_t> get_u32_or(std::string_view key, uint32_t fallback) const;
  Expected<float> get_f32_or(std::string_view key, float fallback) const;
  Expected<bool> get_bool_or(std::string_view key, bool fallback) const;
  Expected<std::string> get_string_or(std::string_view key, std::string fallback) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // Drops the mapped tensor data's pages from this process's memory (the
  // kernel re-reads them from the file if they are touched again). For a
  // backend that has copied the weights elsewhere (the GPU), so that no second
  // copy stays resident — on Jetson, host and GPU share the same DRAM.
  // Returns the bytes advised; 0 for an in-memory File.
  uint64_t release_tensor_pages() const;
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  File() = default;
  friend class Parser;

  // The value of `key`, or the "missing key" error.
  Expected<const Value*> require(std::string_view key) const;
  Error type_error(std::string_view key, std::string_view expected, const Value& found) const;

  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::span<const uint8_t> bytes_;
  void* map_ = nullptr;  // mmap base when opened from disk
  size_t map_size_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF file (version 3) and writes it out. Tensors are laid out in
// insertion order, each aligned to `alignment` (llama.cpp's layout: padding
// after every tensor, the last one included).
//
// Tensor bytes come either from a buffer handed over at add_tensor, or from a
// fill function called while writing, one tensor at a time, so that a
// multi-gigabyte model is never held in memory whole (synth of a 7B model).
class Writer {
 public:
  // Fills exactly the tensor's bytes (size given by the span). Called once
  // per write()/serialize(), in tensor order, on the calling thread.
  using FillFn = std::function<void(std::span<uint8_t> out)>;

  explicit Writer(uint32_t alignment = kDefaultAlignment);

  // Keys must be unique; setting `general.alignment` (u32, a power of two)
  // also sets the layout alignment. Array items must all have the array's
  // element type. Errors are kInvalidArgument.
  Status set(std::string key, Value value);
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }

  // `data` must hold exactly row_size(type, ne[0]) * ne[1] * ... bytes; ne has
  // 1 to 4 dims, each > 0, ne[0] a multiple of the type's block size.
  Status add_tensor(std::string name, DType type, std::vector<uint64_t> ne, std::vector<uint8_t> data);
  Status add_tensor_fill(std::string name, DType type, std::vector<uint64_t> ne, FillFn fill);

  size_t n_tensors() const { return tensors_.size(); }
  uint32_t alignment() const { return alignment_; }
  // Size of the file write() produces.
  uint64_t file_size() const;

  std::vector<uint8_t> serialize() const;
  // Writes to `path`.tmp-<pid> and renames it over `path`, so that a failed or
  // interrupted write never leaves a truncated file under the final name.
  Status write(const std::string& path) const;

  class Sink;  // where the bytes go (memory or file); gguf_writer.cpp

 private:
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<uint64_t> ne;
    uint64_t size_bytes = 0;
    std::vector<uint8_t> data;  // empty when `fill` produces the bytes
    FillFn fill;
  };
  Status check_tensor(const std::string& name, DType type, const std::vector<uint64_t>& ne,
                      uint64_t* size_bytes) const;
  Status emit(Sink& sink) const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace minfer::gguf
