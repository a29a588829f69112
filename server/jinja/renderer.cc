// Statements: output, if, for (loop variable, else, break/continue, a scope per iteration as
// Jinja has it), set (names, tuples, namespace attributes, blocks), macros (late-bound to the
// template's top-level variables, their own scope), and output size bounds.
#include "server/jinja/renderer.h"

#include "absl/strings/str_cat.h"
#include "server/jinja/builtins.h"

namespace pinfer::jinja {

Renderer::Renderer(std::vector<std::pair<std::string, Value>> globals, const RenderOptions& options)
    : max_output_(options.max_output_bytes),
      max_steps_(options.max_steps),
      max_work_(options.max_work) {
  frames_.push_back(std::move(globals));
}

absl::Status Renderer::Step(int line) {
  if (++steps_ <= max_steps_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("template line ", line, ": more than ",
                                                   max_steps_, " loop iterations and macro calls"));
}

absl::Status Renderer::Error(int line, const std::string& what) const {
  return absl::InvalidArgumentError(absl::StrCat("template line ", line, ": ", what));
}

const Value* Renderer::Lookup(const std::string& name) const {
  for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
    for (auto it = f->rbegin(); it != f->rend(); ++it) {
      if (it->first == name) return &it->second;
    }
  }
  return nullptr;
}

void Renderer::Assign(const std::string& name, Value v) {
  for (auto& [k, old] : frames_.back()) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  frames_.back().push_back({name, std::move(v)});
}

absl::Status Renderer::Exec(const Body& body, MarkedText* out) {
  auto flow = ExecBody(body, out);
  return flow.ok() ? absl::OkStatus() : flow.status();
}

absl::StatusOr<Renderer::Flow> Renderer::ExecBody(const Body& body, MarkedText* out) {
  for (const StmtPtr& s : body) {
    auto flow = ExecOne(*s, out);
    if (!flow.ok() || *flow != Flow::kNormal) return flow;
    if (out->size() > max_output_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("template output over the limit of ", max_output_, " bytes"));
    }
  }
  return Flow::kNormal;
}

absl::StatusOr<Renderer::Flow> Renderer::ExecOne(const Stmt& s, MarkedText* out) {
  switch (s.kind) {
    case Stmt::Kind::kText:
      out->Append(s.text, /*content=*/false);
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      auto v = Eval(*s.expr);
      if (!v.ok()) return v.status();
      out->Append(*v);
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : s.branches) {
        auto c = Eval(*cond);
        if (!c.ok()) return c.status();
        if (c->Truthy()) return ExecBody(body, out);
      }
      return ExecBody(s.else_body, out);
    case Stmt::Kind::kFor:
      return ExecFor(s, out);
    case Stmt::Kind::kSet: {
      auto v = Eval(*s.expr);
      if (!v.ok()) return v.status();
      absl::Status st = ExecSet(s, std::move(*v));
      if (!st.ok()) return st;
      return Flow::kNormal;
    }
    case Stmt::Kind::kSetBlock: {
      MarkedText text;
      auto flow = ExecBody(s.body, &text);
      if (!flow.ok()) return flow;
      Assign(s.targets[0], text.ToValue());
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      Assign(s.name, MakeMacro(s));
      return Flow::kNormal;
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kBlock:
      return ExecBody(s.body, out);
  }
  return Flow::kNormal;
}

absl::Status Renderer::ExecSet(const Stmt& s, Value v) {
  if (!s.attr.empty()) {
    const Value* ns = Lookup(s.targets[0]);
    if (!ns || ns->kind() != Value::Kind::kNamespace) {
      return Error(s.line, absl::StrCat("cannot assign attribute '", s.attr, "' of '", s.targets[0],
                                        "': only namespace() objects take attributes"));
    }
    // Only namespaces change after they are made, so bounding what they hold bounds every
    // value (and a namespace, counted at kNamespaceDepth, can never hold one: no cycles).
    if (v.depth() >= kNamespaceDepth || v.nodes() > kNamespaceNodes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("template line ", s.line, ": ", s.targets[0], ".", s.attr,
                       " would hold a namespace, or a value nested deeper than ",
                       kNamespaceDepth - 1, " or of more than ", kNamespaceNodes, " values"));
    }
    ns->Set(Value::String(s.attr), std::move(v));
    return absl::OkStatus();
  }
  if (s.targets.size() == 1) {
    Assign(s.targets[0], std::move(v));
    return absl::OkStatus();
  }
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  if (items->size() != s.targets.size()) {
    return Error(s.line, absl::StrCat("cannot unpack ", items->size(), " values into ",
                                      s.targets.size(), " names"));
  }
  for (size_t i = 0; i < items->size(); ++i) Assign(s.targets[i], (*items)[i]);
  return absl::OkStatus();
}

namespace {

Value LoopValue(const List& items, size_t i, int64_t depth) {
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t k = static_cast<int64_t>(i);
  DictItems d = {
      {Value::String("index"), Value::Int(k + 1)},
      {Value::String("index0"), Value::Int(k)},
      {Value::String("revindex"), Value::Int(n - k)},
      {Value::String("revindex0"), Value::Int(n - k - 1)},
      {Value::String("first"), Value::Bool(k == 0)},
      {Value::String("last"), Value::Bool(k == n - 1)},
      {Value::String("length"), Value::Int(n)},
      {Value::String("depth"), Value::Int(depth)},
      {Value::String("depth0"), Value::Int(depth - 1)},
      {Value::String("previtem"),
       k > 0 ? items[i - 1] : Value::Undefined("'loop.previtem' is undefined")},
      {Value::String("nextitem"),
       k + 1 < n ? items[i + 1] : Value::Undefined("'loop.nextitem' is undefined")},
  };
  d.push_back({Value::String("cycle"),
               Value::Callable("loop.cycle", [k](CallArgs& a) -> absl::StatusOr<Value> {
                 if (a.positional.empty())
                   return absl::InvalidArgumentError("loop.cycle() needs values");
                 return a.positional[static_cast<size_t>(k) % a.positional.size()];
               })});
  return Value::MakeDict(std::move(d));
}

}  // namespace

absl::StatusOr<Renderer::Flow> Renderer::ExecFor(const Stmt& s, MarkedText* out) {
  auto iterable = Eval(*s.expr);
  if (!iterable.ok()) return iterable.status();
  auto all = Iterate(*iterable);
  if (!all.ok()) return Error(s.line, std::string(all.status().message()));
  const Value* outer_loop = Lookup("loop");
  const int64_t depth =
      outer_loop && outer_loop->Find("depth") ? outer_loop->Find("depth")->i() + 1 : 1;
  auto bind = [&](const Value& item) -> absl::Status {
    if (s.targets.size() == 1) {
      Assign(s.targets[0], item);
      return absl::OkStatus();
    }
    auto parts = Iterate(item);
    if (!parts.ok() || parts->size() != s.targets.size()) {
      return Error(s.line, absl::StrCat("cannot unpack a ", item.TypeName(), " into ",
                                        s.targets.size(), " names"));
    }
    for (size_t i = 0; i < parts->size(); ++i) Assign(s.targets[i], (*parts)[i]);
    return absl::OkStatus();
  };
  List items;
  if (s.filter) {  // "for x in xs if cond": filtered first, so loop.length counts what is kept
    for (const Value& item : *all) {
      if (absl::Status st = Step(s.line); !st.ok()) return st;
      frames_.emplace_back();
      absl::Status st = bind(item);
      auto keep = st.ok() ? Eval(*s.filter) : absl::StatusOr<Value>(st);
      frames_.pop_back();
      if (!keep.ok()) return keep.status();
      if (keep->Truthy()) items.push_back(item);
    }
  } else {
    items = std::move(*all);
  }
  if (items.empty()) return ExecBody(s.else_body, out);
  for (size_t i = 0; i < items.size(); ++i) {
    if (absl::Status st = Step(s.line); !st.ok()) return st;
    frames_.emplace_back();
    frames_.back().push_back({"loop", LoopValue(items, i, depth)});
    absl::Status st = bind(items[i]);
    auto flow = st.ok() ? ExecBody(s.body, out) : absl::StatusOr<Flow>(st);
    frames_.pop_back();
    if (!flow.ok()) return flow;
    if (*flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Renderer::MakeMacro(const Stmt& s) {
  const size_t def_depth = frames_.size();
  const Stmt* stmt = &s;
  return Value::Callable(s.name, [this, stmt, def_depth](CallArgs& args) {
    return CallMacro(*stmt, def_depth, args);
  });
}

absl::StatusOr<Value> Renderer::CallMacro(const Stmt& s, size_t def_depth, CallArgs& args) {
  if (call_depth_ >= kMaxCallDepth) {
    return Error(s.line, absl::StrCat("macro calls nested deeper than ", kMaxCallDepth));
  }
  if (absl::Status st = Step(s.line); !st.ok()) return st;
  Frame locals;
  for (size_t i = 0; i < s.params.size(); ++i) {
    const auto& [name, dflt] = s.params[i];
    Value v = args.Get(i, name, Value::Undefined("missing"));
    if (v.is_undefined() && v.s() == "missing") {
      if (dflt) {
        auto d = Eval(*dflt);
        if (!d.ok()) return d.status();
        v = *d;
      } else {
        v = Value::Undefined(absl::StrCat("'", name, "' is undefined"));
      }
    }
    locals.push_back({name, v});
  }
  List extra;
  for (size_t i = s.params.size(); i < args.positional.size(); ++i)
    extra.push_back(args.positional[i]);
  locals.push_back({"varargs", Value::Tuple(std::move(extra))});
  DictItems kw;
  for (const auto& [k, v] : args.keyword) {
    bool is_param = false;
    for (const auto& p : s.params) is_param |= p.first == k;
    if (!is_param) kw.push_back({Value::String(k), v});
  }
  locals.push_back({"kwargs", Value::MakeDict(std::move(kw))});
  // The macro sees the frames where it was defined (the template's top level, late-bound).
  std::vector<Frame> saved = frames_;
  frames_.resize(std::min(def_depth, frames_.size()));
  frames_.push_back(std::move(locals));
  ++call_depth_;
  MarkedText text;
  auto flow = ExecBody(s.body, &text);
  --call_depth_;
  frames_ = std::move(saved);
  if (!flow.ok()) return flow.status();
  return text.ToValue();
}

}  // namespace pinfer::jinja
