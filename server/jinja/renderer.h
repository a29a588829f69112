// Runs a parsed template (internal to server/jinja: template.h is the interface).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/value.h"

namespace pinfer::jinja {

inline constexpr int kMaxCallDepth = 64;  // nested macro calls

class Renderer {
 public:
  // globals: the context's variables and the global functions (frame 0).
  Renderer(std::vector<std::pair<std::string, Value>> globals, size_t max_output_bytes);

  absl::Status Exec(const Body& body, std::string* out);
  absl::StatusOr<Value> Eval(const Expr& e);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::vector<std::pair<std::string, Value>>;

  absl::StatusOr<Flow> ExecBody(const Body& body, std::string* out);
  absl::StatusOr<Flow> ExecOne(const Stmt& s, std::string* out);
  absl::StatusOr<Flow> ExecFor(const Stmt& s, std::string* out);
  absl::Status ExecSet(const Stmt& s, Value v);
  Value MakeMacro(const Stmt& s);
  absl::StatusOr<Value> CallMacro(const Stmt& s, size_t def_depth, CallArgs& args);

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
  int call_depth_ = 0;
};

}  // namespace pinfer::jinja
