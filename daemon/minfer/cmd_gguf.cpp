// `minfer gguf info FILE`: what a GGUF file holds. The header facts, every
// metadata key with its type and value (long arrays abbreviated: the first
// items, "...", the last three and the count; long strings cut), the tensor
// table (name, type, shape, bytes) and the totals by type.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "engine/chat/chat_template.h"
#include "engine/gguf/gguf.h"

namespace minfer::cli {
namespace {

constexpr const char* kUsage = "usage: minfer gguf info FILE [--items N] [--string-bytes N] [--no-tensors]";

std::string mib(uint64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20)); }

void print_header(const gguf::File& f) {
  fmt::print("file:        {}\n", f.path());
  fmt::print("version:     {}\n", f.version());
  fmt::print("size:        {} bytes ({})\n", f.file_size(), mib(f.file_size()));
  fmt::print("alignment:   {}{}\n", f.alignment(), f.has(gguf::kAlignmentKey) ? "" : " (default)");
  fmt::print("data offset: {}\n", f.data_offset());
}

void print_metadata(const gguf::File& f, size_t max_items, size_t max_string_bytes) {
  fmt::print("\nmetadata: {} keys\n", f.metadata().size());
  size_t width = 0;
  for (const auto& kv : f.metadata()) width = std::max(width, kv.first.size());
  for (const auto& [key, value] : f.metadata()) {
    fmt::print("  {:<{}}  {} = {}\n", key, width, value.type_string(), value.to_string(max_items, max_string_bytes));
  }
}

void print_tensors(const gguf::File& f) {
  fmt::print("\ntensors: {}\n", f.tensors().size());
  if (f.tensors().empty()) return;
  size_t name_width = 4;
  size_t shape_width = 5;
  for (const gguf::TensorInfo& t : f.tensors()) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, t.shape_string().size());
  }
  fmt::print("  {:>5}  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", "#", "name", name_width, "type", "shape", shape_width,
             "bytes", "offset");
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const gguf::TensorInfo& t = f.tensors()[i];
    fmt::print("  {:>5}  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", i, t.name, name_width, dtype_name(t.type),
               t.shape_string(), shape_width, t.size_bytes, t.offset);
  }
}

void print_totals(const gguf::File& f) {
  struct Sum {
    uint64_t tensors = 0;
    uint64_t bytes = 0;
    uint64_t elements = 0;
  };
  std::map<std::string_view, Sum> by_type;
  Sum all;
  for (const gguf::TensorInfo& t : f.tensors()) {
    for (Sum* s : {&by_type[dtype_name(t.type)], &all}) {
      s->tensors += 1;
      s->bytes += t.size_bytes;
      s->elements += t.n_elements();
    }
  }
  fmt::print("\ntotal: {} tensors, {} elements, {} bytes ({})\n", all.tensors, all.elements, all.bytes, mib(all.bytes));
  for (const auto& [type, s] : by_type) {
    fmt::print("  {:<5}  {:>5} tensors  {:>14} bytes  ({:.3f} bits per element)\n", type, s.tensors, s.bytes,
               8.0 * static_cast<double>(s.bytes) / static_cast<double>(s.elements));
  }
}

}  // namespace

int cmd_gguf(const std::vector<std::string>& args) {
  std::string action;
  std::string path;
  size_t max_items = 8;
  size_t max_string_bytes = 160;
  po::options_description desc("minfer gguf options");
  desc.add_options()
      ("action", po::value(&action)->required(), "what to do: info")
      ("file", po::value(&path)->required(), "the GGUF file")
      ("items", po::value(&max_items)->default_value(max_items), "array items shown before the \"...\"")
      ("string-bytes", po::value(&max_string_bytes)->default_value(max_string_bytes),
       "bytes of a string shown before it is cut")
      ("no-tensors", "leave out the tensor table");
  po::positional_options_description pos;
  pos.add("action", 1).add("file", 1);
  po::variables_map vm;
  int code = 0;
  if (!parse_args(kUsage, desc, &pos, args, vm, &code)) return code;
  if (action != "info") {
    std::cerr << "minfer gguf: unknown action '" << action << "'; known: info\n" << kUsage << "\n";
    return 2;
  }

  auto file = gguf::File::open(path);
  if (!file) {
    std::cerr << "minfer gguf: " << file.error().message << "\n";
    return 1;
  }
  const gguf::File& f = **file;
  print_header(f);
  print_metadata(f, max_items, max_string_bytes);
  // The chat template minfer applies for this file, as engine/chat
  // recognises tokenizer.chat_template (a fallback says why).
  const ChatTemplate chat = ChatTemplate::from_gguf(f);
  std::cout << "\nchat template: " << chat.name();
  if (!chat.fallback_reason().empty()) std::cout << " (" << chat.fallback_reason() << ")";
  if (!chat.tool_style_name().empty()) std::cout << ", tool calls as " << chat.tool_style_name();
  if (chat.thinks()) std::cout << ", thinking";
  std::cout << "\n";
  if (vm.count("no-tensors") == 0) print_tensors(f);
  print_totals(f);
  return 0;
}

}  // namespace minfer::cli
