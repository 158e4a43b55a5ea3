// The front of aim-train and aim-infer: MODEL as the positional argument, --help, --list, the
// model lookup and --config, with every problem a UsageError naming the flag. Header-only
// because it needs Boost.Program_options, which only the mains link.
#pragma once
#include <boost/program_options.hpp>
#include <iostream>
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
};

// `config` is the vector the options bind --config to (filled while parsing).
inline ModelCommand parse_model_command(int argc, char** argv,
                                        const boost::program_options::options_description& opts,
                                        const std::vector<std::string>& config) {
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
  try {
    c.entry = &models::find_model(model_name);
    c.cfg = c.entry->parse_config(config);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return c;
}

}  // namespace aim::cli
