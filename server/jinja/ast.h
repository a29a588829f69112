// The parsed template: statements and expressions of the supported Jinja subset.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/jinja/value.h"

namespace pinfer::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // args
    kTuple,    // args
    kDict,     // args: key, value, key, value, ...
    kAttr,     // args[0] . name
    kItem,     // args[0] [ args[1] ]
    kSlice,    // args[0] [ args[1] : args[2] : args[3] ] (null ExprPtr: omitted)
    kCall,     // args[0] ( args[1..] , kwargs )
    kFilter,   // args[0] | name ( args[1..] , kwargs )
    kTest,     // args[0] is [not] name ( args[1..] ); negated
    kUnary,    // op args[0]: "-", "+", "not"
    kBinary,   // args[0] op args[1]: + - * / // % ** ~ and or
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ... (== != < <= > >= in notin)
    kCond,     // args[1] if args[0] else args[2] (args[2] null: undefined)
  };
  Kind kind = Kind::kLiteral;
  Value value;
  std::string name;  // kName, kAttr, kFilter, kTest; kUnary/kBinary: the operator
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  int line = 0;
};

struct Stmt;
using StmtPtr = std::shared_ptr<const Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body)...; else_body
    kFor,       // for targets in expr [if filter] body [else else_body]
    kSet,       // set targets = expr, or set targets[0].attr = expr
    kSetBlock,  // set targets[0] %} body {% endset
    kMacro,     // macro name(params) body
    kBreak,
    kContinue,
    kBlock,  // a block that just renders its body ({% generation %})
  };
  Kind kind = Kind::kText;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters, default or null
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  int line = 0;
};

}  // namespace pinfer::jinja
