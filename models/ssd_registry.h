// What the SSD family's registry entries share (models/ssd_registry.cpp): the --data sources
// (synthetic | voc:ROOT | coco:ROOT at the model's input size), the evaluation (post-processing,
// VOC mAP or COCO AP), the config keys size (full | tiny) and num_classes. A detector's own
// registry file takes the entry, adds its description, build function and training defaults.
#pragma once
#include <cstdint>
#include <string>

#include "models/registry.h"
#include "models/ssd.h"

namespace aim::models {

ModelEntry ssd_family_entry(const std::string& name, int64_t image_size);
// num_classes (auto: 21), width_divisor (size=tiny: 8) and the seed from the entry's config.
SsdConfig ssd_family_config(const ModelConfig& c, uint64_t seed);

}  // namespace aim::models
