#include "layers/model/model_file.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

namespace brigade::model {

namespace {

struct Token {
  std::string_view text;
  int column;  // 1-based byte column in its line
};

// A token as it appears in a message: quoted, control bytes escaped, long ones cut short,
// so that a hostile file cannot put terminal escapes or megabytes into an error.
std::string shown(std::string_view s) {
  constexpr size_t kMaxShown = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "'";
}

// The key=value arguments each layer takes; the required ones first.
struct KindSyntax {
  LayerKind kind;
  std::string_view keyword;
  std::vector<std::string_view> keys;  // every key, in the order of the message
  size_t required;                     // keys[0, required) must be present
};

const std::vector<KindSyntax>& syntax_table() {
  static const std::vector<KindSyntax> table = {
      {LayerKind::conv2d, "conv2d", {"filters", "kernel", "activation", "stride", "padding"}, 2},
      {LayerKind::maxpool2d, "maxpool2d", {"pool", "stride"}, 1},
      {LayerKind::dropout, "dropout", {"rate"}, 1},
      {LayerKind::flatten, "flatten", {}, 0},
      {LayerKind::dense, "dense", {"units", "activation"}, 1},
      {LayerKind::relu, "relu", {}, 0},
      {LayerKind::softmax, "softmax", {}, 0},
  };
  return table;
}

std::string join(const std::vector<std::string_view>& words, size_t begin, size_t end) {
  std::string s;
  for (size_t i = begin; i < end; ++i) s += (i > begin ? ", " : "") + std::string(words[i]);
  return s;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  ModelSpec run() {
    // The bound also keeps line and column numbers far inside an int.
    if (text_.size() > kMaxModelFileBytes)
      throw ModelFileError(std::string(source_) + ": larger than the 1 MiB limit for a model file");
    size_t pos = 0;
    // A UTF-8 byte order mark (Windows editors write one) is not part of the first line.
    if (text_.starts_with("\xef\xbb\xbf")) pos = 3;
    while (pos <= text_.size()) {
      size_t end = text_.find('\n', pos);
      if (end == std::string_view::npos) end = text_.size();
      ++line_;
      parse_line(text_.substr(pos, end - pos));
      pos = end + 1;
    }
    if (!have_input_)
      throw ModelFileError(std::string(source_) +
                           ": no 'input' line (expected e.g. 'input 28x28x1' before the first layer)");
    if (model_.layers.empty())
      throw ModelFileError(std::string(source_) + ": no layers after the 'input' line on line " +
                           std::to_string(input_line_));
    close_block("the end of the file");
    fold_output_softmax();
    model_.device_count = block_ < 0 ? 1 : block_ + 1;
    assign_default_names(model_.layers);
    check_shapes();
    return std::move(model_);
  }

 private:
  [[noreturn]] void fail(int column, const std::string& what) const {
    throw ModelFileError(std::string(source_) + ":" + std::to_string(line_) + ":" +
                         std::to_string(column) + ": " + what);
  }

  void parse_line(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
    line = line.substr(0, line.find('#'));                            // comments
    std::vector<Token> tokens;
    for (size_t i = 0; i < line.size();) {
      if (line[i] == ' ' || line[i] == '\t') {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      tokens.push_back({line.substr(i, j - i), static_cast<int>(i) + 1});
      i = j;
    }
    if (tokens.empty()) return;
    const Token& word = tokens[0];
    if (word.text == "input") return parse_input(tokens);
    if (!have_input_)
      fail(word.column, "expected 'input HxWxC' (e.g. 'input 28x28x1') before " +
                            shown(word.text));
    if (word.text == "device") return parse_device(tokens);
    for (const KindSyntax& syntax : syntax_table())
      if (word.text == syntax.keyword) return parse_layer(syntax, tokens);
    fail(word.column, "unknown layer " + shown(word.text) +
                          " (expected input, device, conv2d, maxpool2d, dropout, flatten, "
                          "dense, relu, softmax)");
  }

  // A decimal integer > 0 (>= 0 when zero_ok); `what` names it in messages.
  int64_t number(std::string_view s, int column, const std::string& what, bool zero_ok = false) {
    bool digits = !s.empty();
    for (char c : s) digits = digits && c >= '0' && c <= '9';
    if (!digits)
      fail(column, "malformed number " + shown(s) + " for " + what +
                       (zero_ok ? " (expected an integer >= 0)" : " (expected a positive integer)"));
    int64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec == std::errc::result_out_of_range)
      fail(column, "number " + shown(s) + " for " + what +
                       " is too large (at most 9223372036854775807)");
    if (v == 0 && !zero_ok) fail(column, what + " must be positive, got 0");
    return v;
  }

  // "RxS" or "N" (= NxN) for kernel, pool and stride; "HxWxC" or "F" for input.
  std::vector<int64_t> sizes(std::string_view s, int column, const std::string& what,
                             size_t max_parts, const std::string& expected) {
    std::vector<int64_t> out;
    size_t start = 0;
    while (true) {
      const size_t x = s.find('x', start);
      const std::string_view part = s.substr(start, x == std::string_view::npos ? x : x - start);
      if (part.empty() || out.size() == max_parts)
        fail(column, "malformed size " + shown(s) + " for " + what + " (expected " + expected + ")");
      out.push_back(number(part, column + static_cast<int>(start), what));
      if (x == std::string_view::npos) break;
      start = x + 1;
    }
    return out;
  }

  void parse_input(const std::vector<Token>& tokens) {
    if (have_input_)
      fail(tokens[0].column, "second 'input' line (the first is on line " +
                                 std::to_string(input_line_) + ")");
    const std::string expected = "HxWxC like 28x28x1, or F like 784";
    if (tokens.size() != 2)
      fail(tokens[0].column, "'input' takes one shape (" + expected + ")");
    const std::vector<int64_t> d = sizes(tokens[1].text, tokens[1].column, "input", 3, expected);
    if (d.size() == 2)
      fail(tokens[1].column, "malformed size " + shown(tokens[1].text) + " for input (expected " +
                                 expected + ")");
    model_.input = d.size() == 3 ? std::vector<int64_t>{1, d[2], d[0], d[1]}  // HWC -> NCHW
                                 : std::vector<int64_t>{1, d[0]};
    have_input_ = true;
    input_line_ = line_;
  }

  void parse_device(const std::vector<Token>& tokens) {
    if (tokens.size() != 2) fail(tokens[0].column, "'device' takes one block number, e.g. 'device 0'");
    const int64_t k = number(tokens[1].text, tokens[1].column, "device", /*zero_ok=*/true);
    if (block_ < 0 && !model_.layers.empty())
      fail(tokens[0].column, "'device " + std::to_string(k) +
                                 "' after layers that are in no device block (put 'device 0' "
                                 "before the first layer, or use no device lines)");
    if (k != block_ + 1)
      fail(tokens[1].column, "device " + std::to_string(k) + " out of order: expected device " +
                                 std::to_string(block_ + 1) +
                                 " (blocks are numbered 0, 1, 2, ... in order, without gaps)");
    close_block("'device " + std::to_string(k) + "' on line " + std::to_string(line_));
    block_ = static_cast<int>(k);
    block_line_ = line_;
    block_column_ = tokens[0].column;
    block_layers_ = 0;
  }

  // A trailing `softmax` line after a dense without activation is the model's output
  // activation, as Keras reads Dense + Activation('softmax'): it is folded into that dense
  // (activation=softmax), whose logits the loss takes (the softmax cross-entropy applies the
  // softmax once). Any other trailing softmax would be applied twice, and is refused.
  void fold_output_softmax() {
    const size_t n = model_.layers.size();
    if (model_.layers.back().kind != LayerKind::softmax) return;
    line_ = model_.layers.back().line;
    const int column = columns_.back();
    const std::string why =
        "a softmax as the last layer is the output activation, which the loss applies to the "
        "logits (softmax cross-entropy)";
    if (n >= 2 && model_.layers[n - 2].kind == LayerKind::softmax)
      fail(column, "a softmax applied twice: the softmax on line " +
                       std::to_string(model_.layers[n - 2].line) + " is right before it; remove one");
    if (n < 2 || model_.layers[n - 2].kind != LayerKind::dense)
      fail(column, why + ", so it must follow a dense layer without activation" +
                       (n < 2 ? std::string(", and it is the only layer")
                              : ", not the " + std::string(kind_name(model_.layers[n - 2].kind)) +
                                    " on line " + std::to_string(model_.layers[n - 2].line)));
    LayerSpec& dense = model_.layers[n - 2];
    if (dense.activation == Activation::softmax)
      fail(column, "a softmax applied twice: the dense on line " + std::to_string(dense.line) +
                       " already has activation=softmax; remove one");
    if (dense.activation != Activation::none)
      fail(column, why + ", so it must follow a dense without activation, not the dense with "
                         "activation=" + std::string(activation_name(dense.activation)) +
                         " on line " + std::to_string(dense.line) +
                         " (the loss would apply a softmax to a softmax)");
    if (dense.device != model_.layers.back().device)
      fail(column, why + ", folded into the dense on line " + std::to_string(dense.line) +
                       " (activation=softmax), which would leave device " +
                       std::to_string(model_.layers.back().device) +
                       " without layers: put the softmax in that dense's block");
    dense.activation = Activation::softmax;
    model_.layers.pop_back();
    columns_.pop_back();
  }

  // A device block must hold at least one layer: a pipeline stage with none is a mistake.
  // Reported where the empty block opens.
  void close_block(const std::string& what_follows) {
    if (block_ < 0 || block_layers_ > 0) return;
    line_ = block_line_;
    fail(block_column_, "device " + std::to_string(block_) + " has no layers before " + what_follows);
  }

  void parse_layer(const KindSyntax& syntax, const std::vector<Token>& tokens) {
    LayerSpec l;
    l.kind = syntax.kind;
    l.line = line_;
    l.device = block_ < 0 ? 0 : block_;
    std::vector<int> seen(syntax.keys.size(), 0);  // column where each key was given, 0 = not
    for (size_t t = 1; t < tokens.size(); ++t) {
      const Token& tok = tokens[t];
      const size_t eq = tok.text.find('=');
      if (eq == std::string_view::npos)
        fail(tok.column, "expected key=value after " + std::string(syntax.keyword) + ", got " +
                             shown(tok.text));
      const std::string_view key = tok.text.substr(0, eq), value = tok.text.substr(eq + 1);
      const int vcol = tok.column + static_cast<int>(eq) + 1;
      size_t k = 0;
      while (k < syntax.keys.size() && syntax.keys[k] != key) ++k;
      if (k == syntax.keys.size())
        fail(tok.column, "unknown key " + shown(key) + " for " + std::string(syntax.keyword) +
                             (syntax.keys.empty()
                                  ? std::string(" (it takes no arguments)")
                                  : " (expected " + join(syntax.keys, 0, syntax.keys.size()) + ")"));
      if (seen[k])
        fail(tok.column, "duplicate key " + shown(key) + " for " + std::string(syntax.keyword) +
                             " (first at column " + std::to_string(seen[k]) + ")");
      seen[k] = tok.column;
      if (value.empty()) fail(vcol, "missing value for key " + shown(key));
      set_key(l, key, value, vcol);
    }
    for (size_t k = 0; k < syntax.required; ++k)
      if (!seen[k])
        fail(tokens[0].column, std::string(syntax.keyword) + " needs " +
                                   std::string(syntax.keys[k]) + "= (required: " +
                                   join(syntax.keys, 0, syntax.required) + ")");
    if (model_.layers.size() == kMaxModelLayers)
      fail(tokens[0].column, "more than " + std::to_string(kMaxModelLayers) +
                                 " layers, the limit for a model file (" + kMaxModelLayersWhy +
                                 ")");
    model_.layers.push_back(l);
    columns_.push_back(tokens[0].column);
    ++block_layers_;
  }

  void set_key(LayerSpec& l, std::string_view key, std::string_view value, int col) {
    const std::string k(key);
    if (key == "filters") l.filters = number(value, col, k);
    if (key == "units") l.units = number(value, col, k);
    auto two = [&](int64_t& h, int64_t& w) {
      const auto d = sizes(value, col, k, 2, "RxS like 3x3, or one number like 3");
      h = d[0];
      w = d.size() == 2 ? d[1] : d[0];
    };
    if (key == "kernel") two(l.kernel_h, l.kernel_w);
    if (key == "pool") two(l.pool_h, l.pool_w);
    if (key == "stride") two(l.stride_h, l.stride_w);
    if (key == "activation") {
      if (value == "none") l.activation = Activation::none;
      else if (value == "relu") l.activation = Activation::relu;
      else if (value == "softmax") l.activation = Activation::softmax;
      else fail(col, "unknown activation " + shown(value) + " (expected none, relu, softmax)");
    }
    if (key == "padding") {
      if (value == "valid") l.padding = Padding::valid;
      else if (value == "same") l.padding = Padding::same;
      else fail(col, "unknown padding " + shown(value) + " (expected valid, same)");
    }
    if (key == "rate") {
      double r = -1;
      const auto res = std::from_chars(value.data(), value.data() + value.size(), r);
      if (res.ec != std::errc() || res.ptr != value.data() + value.size() ||
          !(value[0] >= '0' && value[0] <= '9'))
        fail(col, "malformed number " + shown(value) + " for rate (expected e.g. 0.25)");
      if (!(r >= 0.0 && r < 1.0)) fail(col, "rate must be in [0, 1), got " + std::string(value));
      l.rate = r;
    }
  }

  // Shape errors name the layer; the file adds where it is written.
  void check_shapes() {
    try {
      infer_shapes(model_.input, model_.layers);
    } catch (const ShapeError& e) {
      line_ = model_.layers[e.layer_index()].line;
      fail(columns_[e.layer_index()], e.what());
    } catch (const std::invalid_argument& e) {
      line_ = input_line_;
      fail(1, e.what());
    }
  }

  std::string_view text_, source_;
  ModelSpec model_;
  std::vector<int> columns_;  // column of each layer's keyword
  int line_ = 0;
  bool have_input_ = false;
  int input_line_ = 0;
  int block_ = -1;         // the open device block; -1 before any `device` line
  int block_line_ = 0;     // where it opened
  int block_column_ = 0;
  int block_layers_ = 0;   // layers in it so far
};

}  // namespace

ModelSpec parse_model(std::string_view text, std::string_view source) {
  return Parser(text, source).run();
}

ModelSpec load_model_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ModelFileError("cannot read model file '" + path + "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ModelFileError("cannot open model file '" + path + "': " + std::strerror(errno));
  // Read at most one byte past the limit: a huge file is refused without reading it all.
  std::string text(kMaxModelFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw ModelFileError("cannot read model file '" + path + "'");
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_model(text, path);  // refuses the (kMaxModelFileBytes + 1)-byte case
}

std::string print_model(const ModelSpec& model) {
  const auto& in = model.input;
  std::string s = "input " + (in.size() == 4 ? std::to_string(in[2]) + "x" + std::to_string(in[3]) +
                                                   "x" + std::to_string(in[1])
                                             : std::to_string(in.size() == 2 ? in[1] : 0)) + "\n";
  auto size = [](int64_t h, int64_t w) {
    return std::to_string(h) + "x" + std::to_string(w);
  };
  int device = -1;
  for (const LayerSpec& l : model.layers) {
    if (l.device != device) s += "device " + std::to_string(device = l.device) + "\n";
    s += kind_name(l.kind);
    switch (l.kind) {
      case LayerKind::conv2d:
        s += " filters=" + std::to_string(l.filters) + " kernel=" + size(l.kernel_h, l.kernel_w);
        break;
      case LayerKind::maxpool2d: s += " pool=" + size(l.pool_h, l.pool_w); break;
      case LayerKind::dense: s += " units=" + std::to_string(l.units); break;
      case LayerKind::dropout: {
        char buf[64];
        const auto r = std::to_chars(buf, buf + sizeof buf, l.rate);  // shortest exact form
        s += " rate=" + std::string(buf, r.ptr);
        break;
      }
      default: break;
    }
    if (l.activation != Activation::none)
      s += " activation=" + std::string(activation_name(l.activation));
    if (l.stride_h || l.stride_w) s += " stride=" + size(l.stride_h, l.stride_w);
    if (l.padding != Padding::valid) s += " padding=" + std::string(padding_name(l.padding));
    s += "\n";
  }
  return s;
}

}  // namespace brigade::model
