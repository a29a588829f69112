// A small flag parser shared by the pagedinfer subcommands: typed flags with help texts,
// "--flag value" and "--flag=value", positional arguments, and clear errors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loaders/byte_size.h"

namespace pinfer::cli {

class Args {
 public:
  // usage: the synopsis line; examples: lines shown under "Examples:" in --help.
  Args(std::string command, std::string usage, std::vector<std::string> examples = {});

  // names: "-m,--model" style aliases. The current value of *out is shown as the default.
  void Add(const std::string& names, std::string* out, const std::string& help);
  void Add(const std::string& names, int* out, const std::string& help);
  void Add(const std::string& names, int64_t* out, const std::string& help);
  void Add(const std::string& names, double* out, const std::string& help);
  void Add(const std::string& names, float* out, const std::string& help);
  void AddSwitch(const std::string& names, bool* out, const std::string& help);

  // InvalidArgument naming the flag for unknown flags, missing or malformed values.
  absl::Status Parse(int argc, char** argv);
  bool help_requested() const { return help_; }
  std::string Help() const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  struct Flag {
    std::vector<std::string> names;
    std::string help, default_text;
    bool is_switch = false;
    std::function<absl::Status(const std::string&)> set;
  };
  void AddFlag(const std::string& names, const std::string& help, std::string default_text,
               bool is_switch, std::function<absl::Status(const std::string&)> set);
  Flag* Find(const std::string& name);

  std::string command_, usage_;
  std::vector<std::string> examples_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// Parses "16GiB", "512MiB", "4G", "1000000" into bytes (loaders/byte_size.h).
using ::pinfer::ParseBytes;

// Runs parse; prints help (exit 0) or the error plus a hint (exit 2). Returns -1 to go on.
int ParseOrExit(Args& args, int argc, char** argv);

// Prints "error: <message>" to stderr and returns rc: a subcommand's exit on a failed Status.
int Fail(const absl::Status& s, int rc = 1);

}  // namespace pinfer::cli
