// The front of aim-train and aim-infer: MODEL as the positional argument, --help, --list, the
// model lookup and --config, with every problem a UsageError naming the flag. Header-only
// because it needs Boost.Program_options, which only the mains link.
#pragma once
#include <boost/program_options.hpp>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cli/common.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::cli {

struct ModelCommand {
  boost::program_options::variables_map vm;
  const models::ModelEntry* entry = nullptr;  // null: --help or --list was printed (exit 0)
  models::ModelConfig cfg;
  std::set<std::string> from_defaults;  // flags the model's recipe / inference defaults set
  // The command line gave `flag` itself (not a default, not the model's).
  bool given(const char* flag) const {
    return vm.count(flag) && !vm[flag].defaulted() && !from_defaults.count(flag);
  }
};

// The flags of the optimizer a recipe names: when the command line chooses its own --optimizer,
// the recipe's values for these do not apply (Adam with SGD's lr and momentum makes no sense).
inline bool is_optimizer_flag(const std::string& name) {
  return name == "optimizer" || name == "lr" || name == "lr-batch" || name == "momentum" ||
         name == "nesterov" || name == "weight-decay";
}

// Stores the model's recipe (ModelEntry::train_defaults, or infer_defaults) under the flags the
// command line left
// at their defaults: Program_options keeps an explicitly given value and replaces a defaulted one.
inline void apply_model_defaults(ModelCommand& c,
                                 const boost::program_options::options_description& all,
                                 const std::vector<std::string>& defaults) {
  namespace po = boost::program_options;
  std::vector<std::string> args;
  auto given = [&](const char* f) { return c.vm.count(f) && !c.vm[f].defaulted(); };
  // --lr on the command line is meant as given: the recipe's --lr-batch scaling does not apply.
  const bool own_optimizer = given("optimizer");
  const bool own_lr = given("lr");
  for (const std::string& flag : defaults) {
    const std::string name = flag.substr(2, flag.find('=') - 2);
    if (own_optimizer && is_optimizer_flag(name)) continue;
    if (own_lr && name == "lr-batch") continue;
    args.push_back(flag);
  }
  po::variables_map recipe;
  po::store(po::command_line_parser(args).options(all).run(), recipe);
  for (const auto& [name, value] : recipe)
    if (!c.vm.count(name) || c.vm[name].defaulted()) {
      c.vm.erase(name);
      c.from_defaults.insert(name);
    }
  po::store(po::command_line_parser(args).options(all).run(), c.vm);
  po::notify(c.vm);
}

// `config` is the vector the options bind --config to (filled while parsing). train: the model's
// training recipe fills the flags left at their defaults (aim-train).
// The flags both CLIs share beyond the model's: kernel selection (DESIGN §4).
inline void add_kernel_options(boost::program_options::options_description& opts) {
  namespace po = boost::program_options;
  opts.add_options()("kernels", po::value<std::string>(),
                     "kernel variants: own | vendor | op=variant,... (over AIM_KERNELS; "
                     "names as in a --results line's variants_used)")(
      "kernels-fallback",
      "a --kernels choice that cannot take a call runs the op's default instead, logged once "
      "and recorded in --results (otherwise: an error naming why)");
}

inline ModelCommand parse_model_command(int argc, char** argv,
                                        const boost::program_options::options_description& opts,
                                        const std::vector<std::string>& config,
                                        bool train = false) {
  namespace po = boost::program_options;
  std::string model_name;
  po::options_description hidden;
  hidden.add_options()("model", po::value<std::string>(&model_name));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("model", 1);
  ModelCommand c;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), c.vm);
    po::notify(c.vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  if (c.vm.count("help")) {
    std::cout << opts << "\n";
    return c;
  }
  if (c.vm.count("list")) {
    print_models(std::cout);
    return c;
  }
  if (model_name.empty()) throw UsageError("missing MODEL (see --list)");
  // A key given twice is a mistake, not "the last one wins".
  for (size_t i = 0; i < config.size(); ++i)
    for (size_t k = 0; k < i; ++k) {
      const std::string a = config[i].substr(0, config[i].find('='));
      if (a == config[k].substr(0, config[k].find('=')))
        throw UsageError("--config " + a + " is given twice ('" + config[k] + "' and '" +
                         config[i] + "'): give each key once");
    }
  auto given = [&](const char* f) { return c.vm.count(f) && !c.vm[f].defaulted(); };
  if (given("steps") && given("epochs") && c.vm["epochs"].as<double>() > 0)
    throw UsageError("--steps and --epochs both set the run's length: give one");
  if (c.vm.count("kernels") || c.vm.count("kernels-fallback"))
    set_kernels(c.vm.count("kernels") ? c.vm["kernels"].as<std::string>() : std::string(),
                c.vm.count("kernels") > 0, c.vm.count("kernels-fallback") > 0);
  try {
    c.entry = &models::find_model(model_name);
    c.cfg = c.entry->parse_config(config);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  const std::vector<std::string>& defaults =
      train ? c.entry->train_defaults : c.entry->infer_defaults;
  if (!defaults.empty()) {
    try {
      apply_model_defaults(c, all, defaults);
    } catch (const po::error& e) {
      throw UsageError(
          std::string(train ? "the training recipe of " : "the inference defaults of ") +
          model_name + ": " + e.what());
    }
  }
  return c;
}

}  // namespace aim::cli
