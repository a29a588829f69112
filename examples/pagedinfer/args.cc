#include "examples/pagedinfer/args.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pinfer::cli {

Args::Args(std::string command, std::string usage, std::vector<std::string> examples)
    : command_(std::move(command)), usage_(std::move(usage)), examples_(std::move(examples)) {
  AddFlag("-h,--help", "show this help", "", true, [this](const std::string&) {
    help_ = true;
    return absl::OkStatus();
  });
}

void Args::AddFlag(const std::string& names, const std::string& help, std::string default_text,
                   bool is_switch, std::function<absl::Status(const std::string&)> set) {
  Flag f;
  f.names = absl::StrSplit(names, ',');
  f.help = help;
  f.default_text = std::move(default_text);
  f.is_switch = is_switch;
  f.set = std::move(set);
  flags_.push_back(std::move(f));
}

void Args::Add(const std::string& names, std::string* out, const std::string& help) {
  AddFlag(names, help, *out, false, [out](const std::string& v) {
    *out = v;
    return absl::OkStatus();
  });
}

template <typename T>
static std::function<absl::Status(const std::string&)> NumberSetter(T* out, const char* what) {
  return [out, what](const std::string& v) -> absl::Status {
    T parsed;
    bool ok;
    if constexpr (std::is_same_v<T, float>) {
      ok = absl::SimpleAtof(v, &parsed);
    } else if constexpr (std::is_same_v<T, double>) {
      ok = absl::SimpleAtod(v, &parsed);
    } else {
      ok = absl::SimpleAtoi(v, &parsed);
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not ", what));
    *out = parsed;
    return absl::OkStatus();
  };
}

void Args::Add(const std::string& names, int* out, const std::string& help) {
  AddFlag(names, help, std::to_string(*out), false, NumberSetter(out, "an integer"));
}
void Args::Add(const std::string& names, int64_t* out, const std::string& help) {
  AddFlag(names, help, std::to_string(*out), false, NumberSetter(out, "an integer"));
}
void Args::Add(const std::string& names, double* out, const std::string& help) {
  AddFlag(names, help, absl::StrCat(*out), false, NumberSetter(out, "a number"));
}
void Args::Add(const std::string& names, float* out, const std::string& help) {
  AddFlag(names, help, absl::StrCat(*out), false, NumberSetter(out, "a number"));
}
void Args::AddSwitch(const std::string& names, bool* out, const std::string& help) {
  AddFlag(names, help, "", true, [out](const std::string&) {
    *out = true;
    return absl::OkStatus();
  });
}

Args::Flag* Args::Find(const std::string& name) {
  for (Flag& f : flags_) {
    for (const std::string& n : f.names) {
      if (n == name) return &f;
    }
  }
  return nullptr;
}

absl::Status Args::Parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9')) {
      positional_.push_back(a);
      continue;
    }
    std::string value;
    bool has_value = false;
    if (size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    Flag* f = Find(a);
    if (f == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '", a, "' for '", command_, "'"));
    }
    if (!f->is_switch && !has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("option '", a, "' needs a value"));
      }
      value = argv[++i];
    }
    if (absl::Status s = f->set(value); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("option '", a, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::string Args::Help() const {
  std::string out = absl::StrCat("usage: ", usage_, "\n\noptions:\n");
  for (const Flag& f : flags_) {
    std::string names = absl::StrJoin(f.names, ", ");
    if (!f.is_switch) absl::StrAppend(&names, " V");
    absl::StrAppend(&out, "  ", names, std::string(names.size() < 26 ? 26 - names.size() : 1, ' '),
                    f.help);
    if (!f.is_switch && !f.default_text.empty())
      absl::StrAppend(&out, " (default ", f.default_text, ")");
    absl::StrAppend(&out, "\n");
  }
  if (!examples_.empty()) {
    absl::StrAppend(&out, "\nexamples:\n");
    for (const std::string& e : examples_) absl::StrAppend(&out, "  ", e, "\n");
  }
  return out;
}

int Fail(const absl::Status& s, int rc) {
  std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
  return rc;
}

int ParseOrExit(Args& args, int argc, char** argv) {
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "error: %s\n(see --help)\n", std::string(s.message()).c_str());
    return 2;
  }
  if (args.help_requested()) {
    std::fputs(args.Help().c_str(), stdout);
    return 0;
  }
  return -1;
}

}  // namespace pinfer::cli
