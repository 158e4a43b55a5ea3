#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace aim::bench {
std::vector<nlohmann::json> run_peak(const std::string& device, bool quick);
std::vector<nlohmann::json> run_foundation(const std::string& device, bool quick);
}  // namespace aim::bench
