#include "model/hca/rtl_waves.h"

#include <map>

#include "model/core/param.h"
#include "verilated.h"
#include "verilated_fst_sc.h"

namespace hcasim {

rtl_waves::rtl_waves(std::string file) : file_(std::move(file)), tfp_(new VerilatedFstSc) {}

rtl_waves::~rtl_waves() { close(); }

void rtl_waves::open() {
    if (!opened_) {
        tfp_->open(file_.c_str());
        if (!tfp_->isOpen()) throw config_error("--waves: cannot write '" + file_ + "'");
        opened_ = true;
    }
}

void rtl_waves::close() {
    if (opened_) {
        tfp_->close();
        opened_ = false;
    }
}

std::shared_ptr<rtl_waves> rtl_waves::get(const std::string& file) {
    static std::map<std::string, std::weak_ptr<rtl_waves>> open_files;
    auto& w = open_files[file];
    if (auto s = w.lock()) return s;
    Verilated::traceEverOn(true);
    auto s = std::make_shared<rtl_waves>(file);
    w = s;
    return s;
}

}  // namespace hcasim
