#include "job/spec_text.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/utf8.h"

namespace hangar::job {

namespace {

// The first control character of `value` as "ESC (0x1b)", or "" when there is none. C1 controls
// (U+0080-U+009F, two bytes in UTF-8) count: some terminals take U+009B as ESC [.
std::string FirstControl(std::string_view value, bool tab_and_newline) {
  static const char* kC0[] = {"NUL", "SOH", "STX",     "ETX", "EOT", "ENQ", "ACK", "BEL",
                              "BS",  "tab", "newline", "VT",  "FF",  "CR",  "SO",  "SI",
                              "DLE", "DC1", "DC2",     "DC3", "DC4", "NAK", "SYN", "ETB",
                              "CAN", "EM",  "SUB",     "ESC", "FS",  "GS",  "RS",  "US"};
  char hex[8];
  for (size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20) {
      if (tab_and_newline && (c == '\t' || c == '\n')) continue;
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return std::string(kC0[c]) + " (" + hex + ")";
    }
    if (c == 0x7f) return "DEL (0x7f)";
    if (c == 0xc2 && i + 1 < value.size()) {
      const auto next = static_cast<unsigned char>(value[i + 1]);
      if (next >= 0x80 && next <= 0x9f) {
        std::snprintf(hex, sizeof hex, "%04X", next);
        return std::string("U+") + hex;
      }
    }
  }
  return "";
}

// Fields of a job file where tab and newline mean something.
bool MultilineField(const std::vector<std::string>& path) {
  // tasks[N].command, tasks[N].command[M], tasks[N].env.NAME
  if (path.size() < 3 || path[0] != "tasks") return false;
  return path[2] == "command" || (path[2] == "env" && path.size() == 4);
}

std::string Join(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& p : path) {
    if (!out.empty() && p.front() != '[') out += '.';
    out += p;
  }
  return out;
}

class TextWalk {
 public:
  explicit TextWalk(const YamlSource& src) : src_(src) {}

  Status Walk(const YAML::Node& n) {
    if (n.IsMap()) {
      for (const auto& kv : n) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
        if (FirstInvalidUtf8(key)) {
          return src_.Error(kv.first, "a key of " + Here() +
                                          " holds an escape that is no character: write the "
                                          "character itself");
        }
        if (std::string bad = FirstControl(key, false); !bad.empty()) {
          return src_.Error(kv.first, "a key of " + Here() + " holds a control character, " + bad +
                                          "; keys are plain names: remove it");
        }
        path_.push_back(key);
        HANGAR_RETURN_IF_ERROR(Walk(kv.second));
        path_.pop_back();
      }
    } else if (n.IsSequence()) {
      size_t i = 0;
      for (const auto& e : n) {
        path_.push_back("[" + std::to_string(i++) + "]");
        HANGAR_RETURN_IF_ERROR(Walk(e));
        path_.pop_back();
      }
    } else if (n.IsScalar()) {
      // An escape such as "\udc00" makes bytes that are not UTF-8 out of a file that is.
      if (FirstInvalidUtf8(n.Scalar())) {
        return src_.Error(
            n, Here() +
                   " holds an escape that is no character (a lone surrogate?): write the "
                   "character itself");
      }
      const bool multiline = MultilineField(path_);
      if (std::string bad = FirstControl(n.Scalar(), multiline); !bad.empty()) {
        return src_.Error(
            n, Here() + " holds a control character, " + bad + "; " +
                   (multiline ? "only tab and newline are allowed here: remove it"
                              : "it is plain text (no tab or newline either): remove it"));
      }
    }
    return Status::Ok();
  }

 private:
  std::string Here() const { return path_.empty() ? "the job" : Join(path_); }

  const YamlSource& src_;
  std::vector<std::string> path_;
};

// Where each document of a YAML text starts and whether it holds more than a null (an empty
// document, as "---" alone makes, holds a null).
struct DocumentScan : YAML::EventHandler {
  YAML::Mark start, content_at;
  int previous_start_pos = -1, start_pos = -2;
  bool content = false;

  void NextDocument() {
    previous_start_pos = start_pos;
    start_pos = -2;
    content = false;
  }
  void OnDocumentStart(const YAML::Mark& m) override {
    start = m;
    start_pos = m.pos;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Content(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Content(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Content(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Content(m);
  }
  void OnMapEnd() override {}

 private:
  void Content(const YAML::Mark& m) {
    if (!content) content_at = m;
    content = true;
  }
};

}  // namespace

StatusOr<YAML::Node> ParseOneDocument(const YamlSource& src, std::string_view text) {
  // Every string of a job or a queue goes out as JSON (to the controller, to the store), which
  // holds UTF-8 only: bytes that are not are refused here, where the line can be named.
  if (const auto bad = FirstInvalidUtf8(text)) {
    const std::string_view before = text.substr(0, *bad);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    const size_t line_start = before.rfind('\n');
    const size_t column = *bad - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[*bad]));
    return Status::InvalidArgument(src.name() + ":" + std::to_string(line) + ":" +
                                   std::to_string(column) + ": byte " + byte +
                                   " is not UTF-8; save the file as UTF-8 (iconv -t UTF-8)");
  }
  // The documents are walked as events first, not loaded with YAML::LoadAll: on some text that is
  // not YAML (",x" at the top) yaml-cpp 0.7's parser stops moving yet reports one more empty
  // document each time it is asked, and LoadAll grows without end (found by the queues fuzz
  // target). A document that starts where the one before it started is that case.
  DocumentScan scan;
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    for (size_t n = 0;; ++n) {
      scan.NextDocument();
      if (!parser.HandleNextDocument(scan)) break;
      if (n > 0 && scan.start_pos == scan.previous_start_pos && !scan.content) {
        return Status::InvalidArgument(
            src.name() + ":" + std::to_string(scan.start.line + 1) + ":" +
            std::to_string(scan.start.column + 1) +
            ": not valid YAML: the text here begins no value (a stray ',', "
            "']' or '}'?): quote it or remove it");
      }
      if (n > 0 && scan.content) {
        return Status::InvalidArgument(
            src.name() + ":" + std::to_string(scan.content_at.line + 1) +
            ": a second document begins here; a file holds one job (or one set "
            "of queues): put each job in a file of its own and submit each");
      }
    }
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(src.name() + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) +
                                   ": not valid YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(src.name() + ": not valid YAML: " + e.what());
  }
  try {
    return YAML::Load(std::string(text));  // the first document: the scan found no other
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(src.name() + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) +
                                   ": not valid YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(src.name() + ": not valid YAML: " + e.what());
  }
}

Status CheckNoDuplicateKeys(const YamlSource& src, const YAML::Node& root) {
  std::vector<YAML::Node> stack{root};
  while (!stack.empty()) {
    const YAML::Node n = stack.back();
    stack.pop_back();
    if (n.IsMap()) {
      std::set<std::string> seen;
      for (const auto& kv : n) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : YAML::Dump(kv.first);
        if (!seen.insert(key).second) {
          return src.Error(kv.first,
                           "'" + key + "' is given twice in the same map; keep one of them");
        }
        stack.push_back(kv.second);
      }
    } else if (n.IsSequence()) {
      for (const auto& e : n) stack.push_back(e);
    }
  }
  return Status::Ok();
}

Status CheckJobText(const YamlSource& src, const YAML::Node& root) {
  return TextWalk(src).Walk(root);
}

Status CheckPlainText(std::string_view field, std::string_view value, bool tab_and_newline) {
  const std::string bad = FirstControl(value, tab_and_newline);
  if (bad.empty()) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " holds a control character, " + bad +
                                 "; it is plain text: remove it");
}

}  // namespace hangar::job
