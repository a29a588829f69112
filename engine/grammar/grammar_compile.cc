// GbnfRule list -> Grammar: literals and classes to UTF-8 byte sets, groups and repetitions
// to generated rules, then the checks the matcher relies on (every rule defined, no left
// recursion, also none through rules that can match the empty string).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/gbnf_ast.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_checks.h"
#include "engine/grammar/utf8.h"

namespace pinfer::grammar {
namespace {

struct Sym {
  bool is_rule;
  int32_t v;  // byte set id or rule id
};
using SymSeq = std::vector<Sym>;

class Lowering {
 public:
  absl::Status Run(const std::vector<GbnfRule>& rules, std::string_view root, Grammar* g) {
    g_ = g;
    for (const GbnfRule& r : rules) {
      ids_[r.name] = static_cast<int32_t>(names_.size());
      names_.push_back(r.name);
      alts_.emplace_back();
    }
    auto it = ids_.find(std::string(root));
    if (it == ids_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("grammar has no rule '", std::string(root), "' to start from"));
    }
    for (const GbnfRule& r : rules) {
      current_ = r.name;
      line_ = r.line;
      std::vector<SymSeq> alts;
      for (const GbnfSequence& seq : r.alternatives) {
        SymSeq out;
        absl::Status st = LowerSequence(seq, &out);
        if (!st.ok()) return st;
        alts.push_back(std::move(out));
      }
      alts_[ids_[r.name]] = std::move(alts);
    }
    g_->root = it->second;
    g_->rule_names = names_;
    for (const auto& rule : alts_) {
      std::vector<int32_t> starts;
      for (const SymSeq& seq : rule) {
        starts.push_back(static_cast<int32_t>(g_->elements.size()));
        for (Sym s : seq) {
          g_->elements.push_back({s.is_rule ? Element::Kind::kRule : Element::Kind::kBytes, s.v});
        }
        g_->elements.push_back({Element::Kind::kEnd, 0});
      }
      g_->rule_alternatives.push_back(std::move(starts));
    }
    if (g_->elements.size() > kMaxGrammarElements) return TooLarge();
    return absl::OkStatus();
  }

 private:
  absl::Status TooLarge() {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar too large: over ", kMaxGrammarElements,
                     " elements after expanding repetitions (near rule '", current_, "')"));
  }

  int32_t NewRule(std::vector<SymSeq> alts) {
    const int32_t id = static_cast<int32_t>(names_.size());
    names_.push_back(absl::StrCat(current_, "#", ++generated_[current_]));
    alts_.push_back(std::move(alts));
    return id;
  }

  int32_t ByteSet(const std::bitset<256>& bits) {
    auto [it, fresh] = set_ids_.try_emplace(bits, static_cast<int32_t>(g_->byte_sets.size()));
    if (fresh) g_->byte_sets.push_back(bits);
    return it->second;
  }

  Sym ByteSym(uint8_t lo, uint8_t hi) {
    std::bitset<256> b;
    for (int c = lo; c <= hi; ++c) b.set(c);
    return {false, ByteSet(b)};
  }

  // A class as one byte set (all of it single-byte) or a rule of UTF-8 sequences.
  Sym ClassSym(const GbnfItem& item) {
    std::vector<CodeRange> r = item.ranges;
    std::sort(r.begin(), r.end());
    std::vector<CodeRange> merged;
    for (const CodeRange& x : r) {
      if (!merged.empty() && x.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, x.second);
      } else {
        merged.push_back(x);
      }
    }
    if (item.negated) {
      std::vector<CodeRange> comp;
      char32_t next = 0;
      for (const CodeRange& x : merged) {
        if (x.first > next) comp.push_back({next, x.first - 1});
        next = x.second + 1;
      }
      if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
      merged = std::move(comp);
    }
    std::bitset<256> single;
    std::vector<SymSeq> multi;
    for (const CodeRange& x : merged) {
      for (const auto& seq : Utf8RangeSequences(x.first, x.second)) {
        if (seq.size() == 1) {
          for (int c = seq[0].first; c <= seq[0].second; ++c) single.set(c);
          continue;
        }
        SymSeq s;
        for (const ByteRange& b : seq) s.push_back(ByteSym(b.first, b.second));
        multi.push_back(std::move(s));
      }
    }
    if (multi.empty()) return {false, ByteSet(single)};
    if (single.any()) multi.insert(multi.begin(), SymSeq{{false, ByteSet(single)}});
    return {true, NewRule(std::move(multi))};
  }

  absl::Status LowerSequence(const GbnfSequence& seq, SymSeq* out) {
    for (const GbnfItem& item : seq) {
      absl::Status st = LowerItem(item, out);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status LowerItem(const GbnfItem& item, SymSeq* out) {
    SymSeq base;
    switch (item.kind) {
      case GbnfItem::Kind::kLiteral: {
        std::string bytes;
        for (char32_t cp : item.literal) AppendUtf8(cp, &bytes);
        for (char c : bytes) base.push_back(ByteSym(uint8_t(c), uint8_t(c)));
        break;
      }
      case GbnfItem::Kind::kClass:
        base.push_back(ClassSym(item));
        break;
      case GbnfItem::Kind::kRef: {
        auto it = ids_.find(item.name);
        if (it == ids_.end()) {
          return absl::InvalidArgumentError(absl::StrCat("grammar line ", line_, ": rule '",
                                                         current_, "' uses undefined rule '",
                                                         item.name, "'"));
        }
        base.push_back({true, it->second});
        break;
      }
      case GbnfItem::Kind::kGroup: {
        std::vector<SymSeq> alts;
        for (const GbnfSequence& s : *item.group) {
          SymSeq a;
          absl::Status st = LowerSequence(s, &a);
          if (!st.ok()) return st;
          alts.push_back(std::move(a));
        }
        if (alts.size() == 1) {
          base = std::move(alts[0]);
        } else {
          base.push_back({true, NewRule(std::move(alts))});
        }
        break;
      }
    }
    return Repeat(std::move(base), item.min, item.max, out);
  }

  absl::Status Repeat(SymSeq base, int min, int max, SymSeq* out) {
    if (min == 1 && max == 1) {
      out->insert(out->end(), base.begin(), base.end());
      return Count(base.size());
    }
    if (base.empty()) return absl::OkStatus();
    if (base.size() > 1) base = {{true, NewRule({base})}};
    for (int i = 0; i < min; ++i) out->push_back(base[0]);
    if (max == -1) {
      const int32_t star = static_cast<int32_t>(names_.size());
      NewRule({{base[0], {true, star}}, {}});  // star ::= base star | (empty)
      out->push_back({true, star});
    } else if (max > min) {
      int32_t tail = NewRule({base, {}});  // base?
      for (int k = 1; k < max - min; ++k) tail = NewRule({{base[0], {true, tail}}, {}});
      out->push_back({true, tail});
    }
    return Count(static_cast<size_t>(max == -1 ? min + 4 : 3 * max));
  }

  absl::Status Count(size_t n) {
    elements_ += n;
    return elements_ > kMaxGrammarElements ? TooLarge() : absl::OkStatus();
  }

  Grammar* g_ = nullptr;
  std::map<std::string, int32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::vector<SymSeq>> alts_;
  std::unordered_map<std::bitset<256>, int32_t> set_ids_;
  std::map<std::string, int> generated_;
  std::string current_;
  int line_ = 0;
  size_t elements_ = 0;
};

void ComputeByteClasses(Grammar* g) {
  std::array<int, 256> cls{};
  int n = 1;
  for (const auto& set : g->byte_sets) {
    std::map<std::pair<int, bool>, int> remap;
    for (int b = 0; b < 256; ++b) {
      auto [it, fresh] = remap.try_emplace({cls[b], set.test(b)}, static_cast<int>(remap.size()));
      cls[b] = it->second;
    }
    n = static_cast<int>(remap.size());
  }
  for (int b = 0; b < 256; ++b) g->byte_class[b] = static_cast<uint8_t>(cls[b]);
  g->n_byte_classes = n;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileGrammar(std::string_view gbnf,
                                                              std::string_view root) {
  auto rules = ParseGbnf(gbnf);
  if (!rules.ok()) return rules.status();
  auto g = std::make_shared<Grammar>();
  absl::Status st = Lowering().Run(*rules, root, g.get());
  if (!st.ok()) return st;
  st = CheckNoLeftRecursion(*g);
  if (!st.ok()) return st;
  ComputeByteClasses(g.get());
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace pinfer::grammar
