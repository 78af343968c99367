#include "pipeline/schedule/pytorch_csv.h"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>

namespace brigade::pipeline {

namespace {

// PyTorch's _ComputationType values that the reader knows, longest first where one is a prefix.
enum class TorchKind { F, I, W, B, SendF, RecvF, SendB, RecvB, Unshard, Reshard, ReduceGrad };
struct KindName {
  const char* text;
  TorchKind kind;
};
constexpr KindName kKinds[] = {
    {"SEND_F", TorchKind::SendF},   {"RECV_F", TorchKind::RecvF},
    {"SEND_B", TorchKind::SendB},   {"RECV_B", TorchKind::RecvB},
    {"UNSHARD", TorchKind::Unshard}, {"RESHARD", TorchKind::Reshard},
    {"REDUCE_GRAD", TorchKind::ReduceGrad}, {"F", TorchKind::F}, {"I", TorchKind::I},
    {"W", TorchKind::W},            {"B", TorchKind::B}};

struct TorchAction {
  int stage = 0;
  TorchKind kind = TorchKind::F;
  std::optional<int> microbatch;  // none for UNSHARD, RESHARD, REDUCE_GRAD
};

bool per_stage_only(TorchKind k) {
  return k == TorchKind::Unshard || k == TorchKind::Reshard || k == TorchKind::ReduceGrad;
}

// A whole number of decimal digits, or nullopt ("" included); throws past int's range.
std::optional<int> digits(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  if (text.size() > 9) throw std::invalid_argument("number '" + std::string(text) + "' is too large");
  return std::stoi(std::string(text));
}

// "12SEND_F3" -> {12, SendF, 3}: the whole cell, nothing before or after (PyTorch's regex
// takes a prefix; a stray character here is a mistake to name, not to skip).
TorchAction parse_torch_action(std::string_view cell) {
  const size_t kind_at = cell.find_first_not_of("0123456789");
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("'" + std::string(cell) + "': " + why);
  };
  if (kind_at == 0 || kind_at == std::string_view::npos)
    throw bad("expected stage, kind, micro-batch, as PyTorch writes an action (e.g. 2F0, 1I3, "
              "0SEND_F1)");
  TorchAction a;
  a.stage = *digits(cell.substr(0, kind_at));
  const std::string_view rest = cell.substr(kind_at);
  for (const KindName& k : kKinds) {
    const std::string_view name = k.text;
    if (rest.substr(0, name.size()) != name) continue;
    const std::string_view number = rest.substr(name.size());
    a.kind = k.kind;
    if (per_stage_only(a.kind)) {
      if (!number.empty()) throw bad(std::string(k.text) + " takes no micro-batch");
      return a;
    }
    if (!(a.microbatch = digits(number)))
      throw bad(std::string(k.text) + " needs a micro-batch number after it, got '" +
                std::string(number) + "'");
    return a;
  }
  throw bad("unknown kind '" + std::string(rest) +
            "' (PyTorch's are F, I, W, B, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, "
            "REDUCE_GRAD and (..;..)OVERLAP_F_B)");
}

Kind brigade_kind(TorchKind k) {
  switch (k) {
    case TorchKind::F: return Kind::F;
    case TorchKind::I: return Kind::B;
    case TorchKind::W: return Kind::W;
    case TorchKind::B: return Kind::BW;
    case TorchKind::SendF: return Kind::SendF;
    case TorchKind::RecvF: return Kind::RecvF;
    case TorchKind::SendB: return Kind::SendB;
    case TorchKind::RecvB: return Kind::RecvB;
    default: throw std::logic_error("no Brigade kind for a per-stage action");
  }
}

const char* torch_kind(Kind k) {
  switch (k) {
    case Kind::F: return "F";
    case Kind::B: return "I";
    case Kind::W: return "W";
    case Kind::BW: return "B";
    case Kind::SendF: return "SEND_F";
    case Kind::RecvF: return "RECV_F";
    case Kind::SendB: return "SEND_B";
    case Kind::RecvB: return "RECV_B";
  }
  return "?";
}

// One cell: an action, or (A;B;...)OVERLAP_F_B, whose compute actions run one after the other.
std::vector<TorchAction> parse_cell(const std::string& cell) {
  if (cell[0] != '(') return {parse_torch_action(cell)};
  const size_t close = cell.find(')');
  if (close == std::string::npos || cell.substr(close + 1) != "OVERLAP_F_B")
    throw std::invalid_argument("'" + cell + "': expected (A;B;...)OVERLAP_F_B");
  std::vector<TorchAction> actions;
  for (size_t from = 1; from <= close;) {
    const size_t end = std::min(cell.find(';', from), close);
    const std::string one = cell.substr(from, end - from);
    if (!one.empty()) actions.push_back(parse_torch_action(one));
    from = end + 1;
  }
  for (const TorchAction& a : actions)
    if (a.kind != TorchKind::F && a.kind != TorchKind::I && a.kind != TorchKind::W &&
        a.kind != TorchKind::B)
      throw std::invalid_argument("'" + cell +
                                  "': OVERLAP_F_B holds compute actions only (F, I, W, B)");
  return actions;
}

std::string torch_string(const Instruction& i) {
  return std::to_string(i.stage) + torch_kind(i.kind) + std::to_string(i.microbatch);
}

// The cells of one CSV row; a cell in double quotes may hold commas, "" inside is one quote.
std::vector<std::string> cells_of(std::string_view line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') cells.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) cells.emplace_back();
    else cells.back() += c;
  }
  return cells;
}

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  return std::string(text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1));
}

struct Where {
  int line = 0;  // the rank's row, from 1
  int cell = 0;  // from 1
};

std::string placement_refusal(const std::map<int, std::pair<int, Where>>& owner, int p, int v) {
  std::string why;
  for (const Placement pl : {Placement::looped, Placement::v_shape})
    for (const auto& [stage, at] : owner)
      if (at.first != stage_device(stage, p, pl)) {
        why += "; stage " + std::to_string(stage) + " is on rank " + std::to_string(at.first) +
               " (line " + std::to_string(at.second.line) + "), " +
               (pl == Placement::looped ? "looped" : "a V") + " places it on rank " +
               std::to_string(stage_device(stage, p, pl));
        break;
      }
  return std::to_string(p * v) + " stages on " + std::to_string(p) +
         " ranks placed neither looped (stage s on rank s mod p) nor in a V (schedule.h), the "
         "two shapes Brigade cuts a model into" + why;
}

}  // namespace

bool is_pytorch_csv(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
}

std::string format_pytorch_csv(const Schedule& s) {
  LoweredSchedule compute{s.name, s.devices, s.chunks, s.microbatches, s.batch_units,
                          s.placement, {}};
  for (const auto& list : s.lists) {
    auto& out = compute.lists.emplace_back();
    for (const Action& a : list) out.push_back(instruction(a));
  }
  return format_pytorch_csv(compute);
}

std::string format_pytorch_csv(const LoweredSchedule& s) {
  if (s.batch_units != 1)
    throw std::invalid_argument("schedule '" + s.name + "': PyTorch's CSV has no batch_units (" +
                                std::to_string(s.batch_units) + ")");
  const bool lowered = s.has_transfers();
  std::string out;
  for (const auto& list : s.lists) {
    std::map<int, size_t> last_weight;  // stage -> index of its last W or BW
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].kind == Kind::W || list[i].kind == Kind::BW) last_weight[list[i].stage] = i;
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) out += ',';
      out += torch_string(list[i]);
      if (lowered && last_weight.count(list[i].stage) && last_weight[list[i].stage] == i) {
        out += ',';
        out += std::to_string(list[i].stage);
        out += "REDUCE_GRAD";
      }
    }
    out += "\n";
  }
  return out;
}

ScheduleText parse_pytorch_csv(std::string_view text, const std::string& source) {
  ScheduleText out;
  LoweredSchedule& s = out.lists;
  s.name = source;
  std::vector<std::string_view> rows;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    rows.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  if (rows.empty()) throw std::invalid_argument(source + ": no ranks: the CSV is empty");
  const auto fail = [&](Where at, const std::string& why) {
    throw std::invalid_argument(source + ":" + std::to_string(at.line) +
                                (at.cell ? ": cell " + std::to_string(at.cell) : "") + ": " + why);
  };
  std::map<int, std::pair<int, Where>> owner;  // stage -> its rank and first cell
  struct Reduce {
    int stage;
    size_t position;  // instructions of the rank before it
    Where at;
  };
  std::vector<std::vector<Reduce>> reduces(rows.size());
  int microbatches = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    auto& list = s.lists.emplace_back();
    out.line_of_device.push_back(static_cast<int>(r) + 1);
    const std::vector<std::string> cells = cells_of(rows[r]);
    for (size_t c = 0; c < cells.size(); ++c) {
      const Where at{static_cast<int>(r) + 1, static_cast<int>(c) + 1};
      const std::string cell = trim(cells[c]);
      if (cell.empty()) continue;  // a bubble
      std::vector<TorchAction> actions;
      try {
        actions = parse_cell(cell);
      } catch (const std::invalid_argument& e) {
        fail(at, e.what());
      }
      for (const TorchAction& a : actions) {
        const auto it = owner.try_emplace(a.stage, static_cast<int>(r), at).first;
        if (it->second.first != static_cast<int>(r))
          fail(at, "stage " + std::to_string(a.stage) + " is on rank " + std::to_string(r) +
                       " and on rank " + std::to_string(it->second.first) + " (line " +
                       std::to_string(it->second.second.line) +
                       "): a stage lives on one rank, in PyTorch as here");
        if (a.kind == TorchKind::ReduceGrad) {
          for (const Reduce& seen : reduces[r])
            if (seen.stage == a.stage)
              fail(at, "a second REDUCE_GRAD for stage " + std::to_string(a.stage));
          reduces[r].push_back({a.stage, list.size(), at});
        }
        if (per_stage_only(a.kind)) continue;  // UNSHARD, RESHARD, REDUCE_GRAD: see the header
        microbatches = std::max(microbatches, *a.microbatch + 1);
        list.push_back({a.stage, brigade_kind(a.kind), *a.microbatch});
      }
    }
    if (list.empty() && reduces[r].empty())
      fail({static_cast<int>(r) + 1, 0}, "rank " + std::to_string(r) + " has no actions (each "
           "row of PyTorch's CSV is a rank, an empty one too)");
  }
  const int p = static_cast<int>(rows.size());
  const int stages = owner.empty() ? 0 : owner.rbegin()->first + 1;
  if (microbatches == 0) fail({1, 0}, "no forward or backward on any rank");
  for (int st = 0; st < stages; ++st)
    if (!owner.count(st)) fail({1, 0}, "stage " + std::to_string(st) + " is on no rank");
  if (stages % p != 0)
    fail({1, 0}, std::to_string(stages) + " stages on " + std::to_string(p) +
                     " ranks: Brigade gives every device the same number of stages");
  s.devices = p;
  s.chunks = stages / p;
  s.microbatches = microbatches;
  const auto placed = [&](Placement pl) {
    return std::all_of(owner.begin(), owner.end(), [&](const auto& o) {
      return o.second.first == stage_device(o.first, p, pl);
    });
  };
  if (placed(Placement::looped)) s.placement = Placement::looped;
  else if (placed(Placement::v_shape)) s.placement = Placement::v_shape;
  else fail({1, 0}, placement_refusal(owner, p, s.chunks));
  // A stage's gradients are complete after its last W or BW: REDUCE_GRAD there or later.
  for (int r = 0; r < p; ++r)
    for (const Reduce& red : reduces[size_t(r)]) {
      const auto& list = s.lists[size_t(r)];
      for (size_t i = red.position; i < list.size(); ++i)
        if (list[i].stage == red.stage && (list[i].kind == Kind::W || list[i].kind == Kind::BW))
          fail(red.at, std::to_string(red.stage) + "REDUCE_GRAD comes before " +
                           torch_string(list[i]) + ": PyTorch would reduce the stage's "
                           "gradients before they are complete; Brigade reduces them after "
                           "its last W or B");
    }
  return out;
}

}  // namespace brigade::pipeline
