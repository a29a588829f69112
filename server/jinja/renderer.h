// Runs a parsed template (internal to server/jinja: template.h is the interface).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/marks.h"
#include "server/jinja/template.h"
#include "server/jinja/value.h"

namespace pinfer::jinja {

inline constexpr int kMaxCallDepth = 64;  // nested macro calls
class Renderer {
 public:
  // globals: the context's variables and the global functions (frame 0); options: the
  // bounds (output, steps, work; options.now is the caller's).
  Renderer(std::vector<std::pair<std::string, Value>> globals, const RenderOptions& options);

  absl::Status Exec(const Body& body, MarkedText* out);
  // An expression's value, or an error when it fails or is larger than value.h's bounds.
  absl::StatusOr<Value> Eval(const Expr& e);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::vector<std::pair<std::string, Value>>;

  absl::StatusOr<Flow> ExecBody(const Body& body, MarkedText* out);
  absl::StatusOr<Flow> ExecOne(const Stmt& s, MarkedText* out);
  absl::StatusOr<Flow> ExecFor(const Stmt& s, MarkedText* out);
  absl::Status ExecSet(const Stmt& s, Value v);
  Value MakeMacro(const Stmt& s);
  absl::StatusOr<Value> CallMacro(const Stmt& s, size_t def_depth, CallArgs& args);

  absl::StatusOr<Value> EvalNode(const Expr& e);
  absl::Status Step(int line);  // counts a loop iteration or a macro call against max_steps
  absl::StatusOr<Value> EvalCall(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);
  absl::StatusOr<Value> EvalCompare(const Expr& e);
  absl::StatusOr<Value> EvalSlice(const Expr& e);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first);

  const Value* Lookup(const std::string& name) const;
  void Assign(const std::string& name, Value v);
  absl::Status Error(int line, const std::string& what) const;

  std::vector<Frame> frames_;
  size_t max_output_;
  int64_t max_steps_, max_work_;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  int64_t work_ = 0;  // against max_work_
};

}  // namespace pinfer::jinja
