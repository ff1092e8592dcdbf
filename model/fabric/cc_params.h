// The fabric.cc.* keys (docs/fabric.md "Congestion control", docs/configuration.md): params of
// the fabric module, read into one cc_config that every switch and HCA is built with. Their
// ranges are checked by cc_config::validate (named by key) before the fabric builds anything.
#pragma once
#include <string>

#include "model/core/cc_config.h"
#include "model/core/param.h"

namespace hcasim {

struct cc_params {
    cc_params();
    param<bool> enable;
    param<unsigned> threshold, marking_rate, packet_size;
    param<std::string> victim_mask;
    param<std::string> port_control;
    param<unsigned> ccti_increase, ccti_limit, ccti_min, ccti_timer, trigger_threshold;
    param<std::string> cct;

    /// The settings, validated: throws config_error naming the key ("fabric.cc.threshold=16:
    /// out of range 0-15 (4-bit Threshold)").
    cc_config config() const;
};

}  // namespace hcasim
