// What Jinja's `tojson` writes in Hugging Face chat templates: Python's
// json.dumps(value, ensure_ascii=False), with its default separators (", "
// and ": ") or, with an indent, its indented form (",\n" and ": "). Object
// keys stay in the order the text has them, as Python's dicts keep them.
#pragma once

#include <string>
#include <string_view>

#include "engine/common/expected.h"

namespace minfer {

// `json_text` is any JSON value; an error when it does not parse. indent < 0:
// one line.
Expected<std::string> python_json_dumps(std::string_view json_text, int indent = -1);

// A string as a JSON string literal, escaped as Python escapes it (what
// `tojson` writes for a string).
std::string python_json_string(std::string_view text);

}  // namespace minfer
