// The fenced blocks of a Markdown page, as the docs test reads them: the commands of its
// ```sh blocks, one per line (a line ending in `\` goes on), and the files its pages show
// (a block whose info string names a file, e.g. ```model my.model, is that file's text).
// A fence without a language is an error: the reader of the test must know whether a block
// is run (sh) or is text (text, model, csv, ...), never guess it.
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace brigade::docs_test {

struct DocCommand {
  int line = 0;       // where the command starts (1-based)
  std::string text;   // as written, continuation lines joined with their `\` and newline
};

struct DocFile {
  std::string name;   // the file's name, as the info string gives it
  std::string text;   // its lines
};

struct MarkdownCommands {
  std::vector<DocCommand> commands;
  std::vector<DocFile> files;
  std::vector<std::string> errors;  // "PAGE:LINE: ..." for fences the test cannot classify
};

inline std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

inline bool is_shell_language(const std::string& language) {
  return language == "sh" || language == "bash" || language == "shell";
}

// `page` names the file in errors (e.g. "README.md"); `text` is its contents.
inline MarkdownCommands read_markdown_commands(const std::string& page, const std::string& text) {
  MarkdownCommands out;
  std::vector<std::string> lines;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = text.find('\n', begin);
    lines.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string opening = trimmed(lines[i]);
    if (opening.rfind("```", 0) != 0) continue;
    const int fence_line = static_cast<int>(i) + 1;
    const std::string info = trimmed(opening.substr(3));
    const size_t space = info.find(' ');
    const std::string language = info.substr(0, space);
    const std::string file_name = space == std::string::npos ? "" : trimmed(info.substr(space));
    std::vector<std::pair<int, std::string>> body;  // (line, text) up to the closing fence
    size_t j = i + 1;
    for (; j < lines.size() && trimmed(lines[j]).rfind("```", 0) != 0; ++j)
      body.emplace_back(static_cast<int>(j) + 1, lines[j]);
    if (j == lines.size()) {
      out.errors.push_back(page + ":" + std::to_string(fence_line) + ": a fence never closed");
      break;
    }
    i = j;
    if (language.empty()) {
      out.errors.push_back(page + ":" + std::to_string(fence_line) +
                           ": a fenced block without a language: mark commands ```sh (the docs "
                           "test runs them) and anything else ```text");
    } else if (is_shell_language(language)) {
      for (size_t k = 0; k < body.size(); ++k) {
        if (trimmed(body[k].second).empty() || trimmed(body[k].second)[0] == '#') continue;
        DocCommand command{body[k].first, body[k].second};
        while (!command.text.empty() && command.text.back() == '\\' && k + 1 < body.size())
          command.text += "\n" + body[++k].second;
        out.commands.push_back(command);
      }
    } else if (!file_name.empty()) {
      DocFile file{file_name, ""};
      for (const auto& [line, content] : body) file.text += content + "\n";
      out.files.push_back(file);
    }
  }
  return out;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace brigade::docs_test
