// What a job (or queue) file may hold as text, checked on the YAML tree before any field is read.
//
// yaml-cpp reads the first document of a stream and keeps both entries of a key written twice:
// a second job in the same file was dropped without a word, and which of two values counted was
// up to the reader. And text reaches terminals: an ESC in a task group's name retitled the
// terminal of whoever ran `hangar jobs`, a newline forged rows of its table.
#pragma once

#include <string_view>

#include "common/status.h"
#include "common/yaml_util.h"

namespace hangar::job {

// The one document of `text`. A second document that holds anything is refused with its line
// ("---" at the end, with nothing after it, is not a document).
StatusOr<YAML::Node> ParseOneDocument(const YamlSource& src, std::string_view text);

// Refuses a map that names a key twice, with the line of the second.
Status CheckNoDuplicateKeys(const YamlSource& src, const YAML::Node& root);

// Refuses, with its line and field, a key or value of a job file that holds a control character
// (C0, DEL or C1). Tab and newline are allowed where they mean something: in a command's
// arguments (a shell script) and in environment values (a certificate); nowhere else.
Status CheckJobText(const YamlSource& src, const YAML::Node& root);

// Ok, or the sentence naming `field` when `value` holds a control character (tab and newline
// too unless `tab_and_newline`). For names and values that do not come from a job file.
Status CheckPlainText(std::string_view field, std::string_view value, bool tab_and_newline = false);

}  // namespace hangar::job
