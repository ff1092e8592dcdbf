// The presets (configs/*.ini) by name: `--config hdr-cx6` from any directory, from the build
// tree as from an install (docs/usage.md, Presets).
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace hcasim {

/// The directory the presets are read from, the first that exists of: `<exe>/../share/hcasim/configs`
/// (an install: found relative to the running program) and the source tree's `configs/` (compiled
/// in, for the build tree). Empty if neither exists.
std::string presets_dir();

/// The preset names (file names without `.ini`) in presets_dir(), sorted.
std::vector<std::string> preset_names();

/// What `--config ARG` loads: ARG itself when it names an existing file; else, when ARG is a bare
/// name (`hdr-cx6`, `hdr-cx6.ini`) or `configs/NAME[.ini]`, that preset in presets_dir(); else
/// ARG (the loader then reports the missing file). Throws config_error for a bare name that is no
/// preset, listing the presets.
std::string resolve_config(const std::string& arg);

/// --list-presets: one line per preset, its name and the first line of its header comment
/// (without a trailing comma).
void list_presets(std::ostream& os);

}  // namespace hcasim
