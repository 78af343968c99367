#include "layers/model/safetensors_header.h"

#include "engine/error.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "layers/model/safetensors.h"

namespace brigade::safetensors::detail {

std::string shown(std::string_view s) {
  std::string out = "'";  // appends: GCC 12 -O3 warns falsely (-Wrestrict) on "'" + string
  return out.append(escaped(s, 80)).append("'");
}

std::string escaped(std::string_view s, size_t max_bytes) { return printable(s, max_bytes); }

namespace {

using json = nlohmann::json;

// Where the parser is, by depth: 0 outside everything, 1 in the root object, 2 in a tensor
// entry or __metadata__, 3 in a tensor's shape or data_offsets array. Nothing deeper exists.
class HeaderSax : public nlohmann::json_sax<json> {
 public:
  explicit HeaderSax(const std::string& source) : source_(source) {}
  RawHeader header;

  bool start_object(std::size_t) override {
    if (depth_ == 0) return enter();
    if (depth_ == 1) {
      if (!in_metadata()) {
        header.entries.emplace_back();
        header.entries.back().name = key1_;
      }
      field_keys_.clear();
      return enter();
    }
    return misplaced("an object");
  }
  bool start_array(std::size_t) override {
    if (depth_ == 2 && !in_metadata() && (key2_ == "shape" || key2_ == "data_offsets")) return enter();
    return misplaced("an array");
  }
  bool end_object() override { return leave(); }
  bool end_array() override {
    if (key2_ == "data_offsets" && entry().offsets.size() != 2) offsets_error();
    return leave();
  }

  bool key(string_t& k) override {
    if (depth_ == 1) {
      if (!root_keys_.insert(k).second) duplicate(k);
      key1_ = k;
    } else if (in_metadata()) {
      if (!field_keys_.insert(k).second) duplicate(k);
      key2_ = k;
    } else {
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        tensor_error("unknown key " + shown(k) + " (expected dtype, shape, data_offsets)");
      if (!field_keys_.insert(k).second) duplicate(k);
      key2_ = k;
      RawEntry& e = entry();
      (k == "dtype" ? e.has_dtype : k == "shape" ? e.has_shape : e.has_offsets) = true;
    }
    return true;
  }

  bool string(string_t& s) override {
    if (depth_ == 2 && in_metadata()) {
      header.metadata[key2_] = s;
      return true;
    }
    if (depth_ == 2 && key2_ == "dtype") {
      entry().dtype_is_string = true;
      entry().dtype = s;
      return true;
    }
    // A string where none belongs, shown in a message: escaped (it is the file's bytes) and
    // cut. Built by append: GCC 12 -O3 warns falsely on "\"" + s + "\"".
    std::string text = "\"";
    text.append(escaped(s, 40)).append("\"");
    return scalar(text);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (depth_ == 3) {
      if (key2_ == "shape" && v > uint64_t{INT64_MAX}) size_error(std::to_string(v));
      std::vector<uint64_t>& list = key2_ == "shape" ? entry().shape : entry().offsets;
      if (key2_ == "data_offsets" && list.size() == 2) offsets_error();
      list.push_back(v);
      return true;
    }
    return scalar(std::to_string(v));
  }
  bool number_integer(number_integer_t v) override { return scalar(std::to_string(v)); }
  bool number_float(number_float_t, const string_t& text) override { return scalar(text.substr(0, 40)); }
  bool boolean(bool v) override { return scalar(v ? "true" : "false"); }
  bool null() override { return scalar("null"); }
  bool binary(binary_t&) override { return scalar("binary"); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    // nlohmann's text ends with the offending token's raw bytes: escape them and cut.
    throw Error(source_ + ": header is not valid JSON: " + escaped(ex.what(), 300));
  }

 private:
  bool in_metadata() const { return key1_ == "__metadata__"; }
  RawEntry& entry() { return header.entries.back(); }
  bool enter() {
    ++depth_;
    return true;
  }
  bool leave() {
    --depth_;
    return true;
  }

  // A value that is not a container, anywhere: only metadata strings, a dtype string and
  // sizes are allowed (and are handled before this is called).
  bool scalar(const std::string& text) {
    if (depth_ == 1) misplaced(text);
    if (depth_ == 2 && in_metadata())
      throw Error(source_ + ": __metadata__ value of " + shown(key2_) + " is not a string");
    if (depth_ == 2 && key2_ == "dtype") entry().dtype = text;  // reported as unsupported
    if (depth_ == 2 && key2_ == "shape") tensor_error("shape must be an array of sizes");
    if (depth_ == 2 && key2_ == "data_offsets") offsets_error();
    if (depth_ == 3 && key2_ == "shape") size_error(text);
    if (depth_ == 3) offsets_error();
    return true;
  }
  // A value of the wrong kind where an object or array was expected, or nested too deep.
  bool misplaced(const std::string& what) {
    if (depth_ == 1 && in_metadata())
      throw Error(source_ + ": __metadata__ must be an object of strings");
    if (depth_ == 1) tensor_error("expected an object {dtype, shape, data_offsets}, got " + what);
    if (depth_ == 2 && in_metadata())
      throw Error(source_ + ": __metadata__ value of " + shown(key2_) + " is not a string");
    if (depth_ == 2 && key2_ == "dtype") tensor_error("dtype must be a string, got " + what);
    if (depth_ == 2) tensor_error(key2_ + " must be an array of integers, got " + what);
    throw Error(source_ + ": header nests deeper than {name: {key: [sizes]}}");
  }
  [[noreturn]] void tensor_error(const std::string& what) {
    throw Error(source_ + ": tensor " + shown(key1_) + ": " + what);
  }
  [[noreturn]] void size_error(const std::string& text) {
    tensor_error("shape entry " + text + " is not a size (an integer in [0, 2^63))");
  }
  [[noreturn]] void offsets_error() {
    tensor_error("data_offsets must be [begin, end], two integers >= 0");
  }
  [[noreturn]] void duplicate(const std::string& k) {
    throw Error(source_ + ": duplicate key " + shown(k) + " in the header");
  }

  const std::string& source_;
  int depth_ = 0;
  std::string key1_, key2_;            // the current key in the root, and in an entry
  std::set<std::string> root_keys_;    // every tensor name so far (and __metadata__)
  std::set<std::string> field_keys_;   // keys of the entry being read
};

}  // namespace

RawHeader parse_header_json(std::string_view header, const std::string& source) {
  if (header.empty() || header[0] != '{')
    throw Error(source + ": header does not start with '{' (not a safetensors file?)");
  HeaderSax sax(source);
  json::sax_parse(header.begin(), header.end(), &sax);  // errors throw from the handler
  return std::move(sax.header);
}

}  // namespace brigade::safetensors::detail
