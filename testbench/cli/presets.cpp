// Finding the presets by name; see presets.h.
#include "presets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>

#include "model/core/param.h"

namespace fs = std::filesystem;

namespace hcasim {

namespace {

/// `configs/NAME`, `NAME.ini` or `NAME`: NAME; else empty (a path of some other directory).
std::string preset_name_of(const std::string& arg) {
    std::string name = arg;
    if (name.rfind("configs/", 0) == 0) name.erase(0, 8);
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".ini") == 0) name.erase(name.size() - 4);
    return name.empty() || name.find('/') != std::string::npos ? std::string() : name;
}

}  // namespace

std::string presets_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path installed = exe.parent_path().parent_path() / "share" / "hcasim" / "configs";
        if (fs::is_directory(installed, ec)) return installed.string();
    }
    const fs::path source = fs::path(HCASIM_PRESETS_DIR);
    return fs::is_directory(source, ec) ? source.string() : std::string();
}

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    const std::string dir = presets_dir();
    std::error_code ec;
    if (!dir.empty())
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".ini" && e.is_regular_file(ec))
                names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string resolve_config(const std::string& arg) {
    std::error_code ec;
    if (fs::is_regular_file(arg, ec)) return arg;
    const std::string name = preset_name_of(arg);
    if (name.empty()) return arg;
    const std::string dir = presets_dir();
    const fs::path preset = fs::path(dir) / (name + ".ini");
    if (!dir.empty() && fs::is_regular_file(preset, ec)) return preset.string();
    if (arg.find('/') != std::string::npos) return arg;  // configs/NAME: the loader names the path
    std::string list;
    for (const std::string& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
    throw config_error(
        "--config '" + arg + "': no such file and no such preset (" +
        (dir.empty() ? std::string("no presets directory found") : "presets in " + dir + ": " + list) + ")");
}

void list_presets(std::ostream& os) {
    const std::string dir = presets_dir();
    for (const std::string& name : preset_names()) {
        // The first comment line with text: what the preset models.
        std::ifstream in(fs::path(dir) / (name + ".ini"));
        std::string line, what;
        while (what.empty() && std::getline(in, line) && (line.empty() || line[0] == '#')) {
            const size_t b = line.find_first_not_of("# \t\r");
            if (b != std::string::npos) what = line.substr(b);
        }
        if (!what.empty() && what.back() == ',') what.pop_back();  // a sentence that goes on below
        os << std::left << std::setw(18) << name << " " << what << "\n";
    }
}

}  // namespace hcasim
