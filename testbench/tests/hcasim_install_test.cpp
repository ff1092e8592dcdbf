// hcasim as an installed tool (issue 31): --version, presets by name (--config hdr-cx6 from any
// directory, --list-presets, an unknown name listing the presets), the bash completion, and
// `cmake --install` into a temporary prefix whose hcasim finds its own presets.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "testbench/cli/cli.h"
#include "testbench/cli/presets.h"
#include "testbench/tests/hcasim_run.h"

// The test links testbench_lib (for workload_names()), which needs a SystemC entry point.
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

namespace fs = std::filesystem;
using hcasim::test::result;
using hcasim::test::run_hcasim;
using hcasim::test::slurp;

const std::string source = HCASIM_SOURCE_DIR;

/// The preset names: configs/*.ini without the extension, sorted.
std::vector<std::string> preset_files() {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(source + "/configs"))
        if (e.path().extension() == ".ini") v.push_back(e.path().stem().string());
    std::sort(v.begin(), v.end());
    return v;
}

/// The first comment line of a preset with text, without its '#' and a trailing comma.
std::string first_comment(const std::string& name) {
    std::ifstream in(source + "/configs/" + name + ".ini");
    std::string line;
    while (std::getline(in, line))
        if (line.size() > 2 && line[0] == '#')
            return line.back() == ',' ? line.substr(2, line.size() - 3) : line.substr(2);
    return "";
}

/// A short two-node run with --stats-json, from `dir` with program `bin`; its JSON (null if none).
nlohmann::json short_run(const std::string& config, const std::string& dir, const std::string& bin,
                         result* r) {
    const std::string json = hcasim::test::empty_dir("install_json") + "/s.json";
    *r = run_hcasim(
        "--config " + config + " --workload write_lat --size 2 --iters 10 --stats-json '" + json + "'",
        "install", "", dir, bin);
    const std::string text = slurp(json);
    return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
}

TEST(Install, version_prints_hcasim_and_the_cmake_project_version) {
    const std::smatch m = [] {
        static const std::string cmake = slurp(source + "/CMakeLists.txt");
        std::smatch sm;
        std::regex_search(cmake, sm, std::regex(R"(project\(hcasim VERSION ([0-9.]+))"));
        return sm;
    }();
    ASSERT_EQ(m.size(), 2u);
    const result r = run_hcasim("--version", "install");
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.out, "hcasim " + m[1].str() + "\n");
    EXPECT_EQ(r.err, "");
}

TEST(Install, config_by_name_works_from_another_working_directory) {
    const std::string bin = HCASIM_BIN;
    result by_path;
    const nlohmann::json want = short_run("configs/hdr-cx6.ini", source, bin, &by_path);
    ASSERT_EQ(by_path.code, 0) << by_path.err;
    EXPECT_EQ(want["config"]["node0.pcie.generation"], "4");  // the preset's Gen4, not the default Gen3
    // hdr-cx6, hdr-cx6.ini and configs/hdr-cx6.ini from /tmp load the same file.
    for (const char* name : {"hdr-cx6", "hdr-cx6.ini", "configs/hdr-cx6.ini"}) {
        result r;
        const nlohmann::json got = short_run(name, "/tmp", bin, &r);
        ASSERT_EQ(r.code, 0) << name << ": " << r.err;
        EXPECT_EQ(r.err, "") << name;
        EXPECT_EQ(got["config"], want["config"]) << name;
        EXPECT_EQ(got["results"], want["results"]) << name;
    }
}

TEST(Install, config_path_that_exists_is_loaded_as_a_path_before_a_preset_of_that_name) {
    // A file named like a preset in the working directory wins: a path is a path.
    const std::string dir = hcasim::test::empty_dir("install_local");
    std::ofstream(dir + "/hdr-cx6.ini") << "[pcie]\nlanes = 2\n";
    result r;
    const nlohmann::json got = short_run("hdr-cx6.ini", dir, HCASIM_BIN, &r);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(got["config"]["node0.pcie.lanes"], "2");
    EXPECT_EQ(got["config"]["node0.pcie.generation"], "3");  // the default: the preset was not loaded
}

TEST(Install, unknown_preset_name_exits_2_listing_the_presets) {
    const result r = run_hcasim("--config nosuch-preset --workload write_lat", "install", "", "/tmp");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(
        r.err.find("hcasim: error: --config 'nosuch-preset': no such file and no such preset (presets in " +
                   source + "/configs: "),
        std::string::npos)
        << r.err;
    for (const std::string& name : preset_files()) EXPECT_NE(r.err.find(name), std::string::npos) << name;
}

TEST(Install, list_presets_lists_every_configs_ini_with_its_first_comment_line) {
    const result r = run_hcasim("--list-presets", "install", "", "/tmp");
    ASSERT_EQ(r.code, 0) << r.err;
    std::string want;
    for (const std::string& name : preset_files()) {
        const std::string pad(name.size() < 18 ? 18 - name.size() : 0, ' ');
        want += name + pad + " " + first_comment(name) + "\n";
    }
    EXPECT_EQ(r.out, want);
    EXPECT_GE(preset_files().size(), 8u);
    EXPECT_NE(r.out.find("hdr-cx6            ConnectX-6 class HCA: HDR InfiniBand 4x on PCIe Gen4 x16"),
              std::string::npos);
    EXPECT_NE(
        r.out.find("fdr-cib            Connect-IB class HCA: FDR InfiniBand 4x on PCIe Gen3 x16 (issue 30's "
                   "message-rate preset)\n"),
        std::string::npos)
        << r.out;
}

TEST(Install, bash_completion_lists_every_workload) {
    const std::string text = slurp(source + "/completion/hcasim.bash");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(_hcasim_workloads="([^"]*)\")")));
    std::istringstream words(m[1].str());
    std::set<std::string> listed{std::istream_iterator<std::string>(words),
                                 std::istream_iterator<std::string>()};
    const std::vector<std::string>& names = hcasim::workload_names();
    EXPECT_EQ(listed, std::set<std::string>(names.begin(), names.end()));
}

/// What the completion offers for the command line `words` (the last word is being completed).
std::string complete(const std::string& words) {
    const std::string out = ::testing::TempDir() + "install_complete_" + std::to_string(getpid());
    const std::string script = "source '" + source + "/completion/hcasim.bash'; COMP_WORDS=('" + HCASIM_BIN +
                               "' " + words + "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _hcasim; " +
                               "printf '%s\\n' \"${COMPREPLY[@]}\" | sort >'" + out + "'";
    EXPECT_EQ(std::system(("bash -c \"$(cat <<'EOS'\n" + script + "\nEOS\n)\"").c_str()), 0) << script;
    const std::string text = slurp(out);
    std::remove(out.c_str());
    return text;
}

TEST(Install, bash_completion_offers_options_presets_workloads_and_set_keys) {
    EXPECT_EQ(complete("--list-p"), "--list-presets\n");
    EXPECT_EQ(complete("--config hdr"), "hdr-cx6\n");
    EXPECT_EQ(complete("--workload write_"), "write_bw\nwrite_lat\n");
    EXPECT_EQ(complete("--set pcie.la"), "pcie.lanes=\n");
    EXPECT_EQ(complete("ser"), "serve\n");
    EXPECT_EQ(complete("serve --sy"), "--sysfs\n");
}

TEST(Install, installed_hcasim_runs_a_preset_by_name_from_tmp) {
    const std::string prefix = hcasim::test::empty_dir("install_prefix");
    const std::string log = prefix + ".log";
    const std::string cmd = std::string("'") + HCASIM_CMAKE + "' --install '" + HCASIM_BUILD_DIR +
                            "' --prefix '" + prefix + "' >'" + log + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(log);
    std::vector<std::string> files = {"bin/hcasim",
                                      "bin/hcasim-with-simhca",
                                      "share/hcasim/configs/hdr-cx6.ini",
                                      "share/hcasim/configs/topologies/ring4.topo",
                                      "share/doc/hcasim/README.md",
                                      "share/doc/hcasim/LICENSE",
                                      "share/doc/hcasim/CHANGELOG.md",
                                      "share/doc/hcasim/docs/usage.md",
                                      "share/bash-completion/completions/hcasim"};
    if (fs::exists(std::string(HCASIM_BUILD_DIR) + "/provider/libhcasim-rdmav34.so"))
        files.push_back("lib/hcasim/libhcasim-rdmav34.so");
    if (!std::string(HCASIM_MAN_PAGE).empty())
        for (const char* page : {"hcasim.1", "hcasim-serve.1", "hcasim-replay.1"})
            files.push_back(std::string("share/man/man1/") + page);
    for (const std::string& f : files) EXPECT_TRUE(fs::is_regular_file(prefix + "/" + f)) << f;

    const std::string bin = prefix + "/bin/hcasim";
    result r;
    const nlohmann::json got = short_run("hdr-cx6", "/tmp", bin, &r);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("hcasim write_lat"), std::string::npos) << r.out;
    EXPECT_EQ(got["config"]["node0.pcie.generation"], "4");

    // The installed program reads the installed presets (not the source tree's): a preset added
    // there is found by it alone.
    std::ofstream(prefix + "/share/hcasim/configs/installed-only.ini") << "# Only in the install.\n";
    const result listed = run_hcasim("--list-presets", "install", "", "/tmp", bin);
    EXPECT_NE(listed.out.find("installed-only     Only in the install.\n"), std::string::npos) << listed.out;
    EXPECT_EQ(run_hcasim("--config installed-only --help-config", "install", "", "/tmp", bin).code, 0);
    EXPECT_EQ(run_hcasim("--config installed-only --help-config", "install", "", "/tmp").code, 2);
    fs::remove_all(prefix);
    std::remove(log.c_str());
}

TEST(Install, man_page_is_generated_when_help2man_was_found) {
    if (std::string(HCASIM_MAN_PAGE).empty()) GTEST_SKIP() << "help2man was not found at configure time";
    const std::string page = slurp(HCASIM_MAN_PAGE);
    EXPECT_NE(page.find(".TH HCASIM"), std::string::npos);
    EXPECT_NE(page.find("list\\-presets"), std::string::npos);
}

TEST(Install, serve_and_replay_have_man_pages_of_their_own) {
    if (std::string(HCASIM_MAN_PAGE).empty()) GTEST_SKIP() << "help2man was not found at configure time";
    const std::string dir = fs::path(HCASIM_MAN_PAGE).parent_path().string();
    // Each page is titled after its subcommand and describes that subcommand's own options.
    const std::string serve = slurp(dir + "/hcasim-serve.1");
    EXPECT_NE(serve.find(".TH HCASIM-SERVE \"1\""), std::string::npos) << serve.substr(0, 200);
    EXPECT_NE(serve.find("hcasim serve \\- simulated HCAs"), std::string::npos);
    EXPECT_NE(serve.find("\\-\\-socket"), std::string::npos);
    const std::string replay = slurp(dir + "/hcasim-replay.1");
    EXPECT_NE(replay.find(".TH HCASIM-REPLAY \"1\""), std::string::npos) << replay.substr(0, 200);
    EXPECT_NE(replay.find("\\-\\-timing"), std::string::npos);
}

}  // namespace

namespace {

/// hcasim --help as parse_cli prints it.
std::string help_text() {
    std::ostringstream out;
    const char* argv[] = {"hcasim", "--help"};
    EXPECT_TRUE(hcasim::parse_cli(2, argv, out).help);
    return out.str();
}

TEST(Help, groups_options_into_workloads_configuration_outputs_and_information) {
    const std::string h = help_text();
    // Each group's caption, in order, and one of its options between it and the next caption.
    const std::vector<std::pair<std::string, std::string>> groups = {
        {"\nWorkloads:\n", "--workload"},
        {"\nConfiguration:\n", "--config"},
        {"\nOutputs:\n", "--stats-json"},
        {"\nInformation:\n", "--list-presets"},
        {"\nExamples:\n", "hcasim --config hdr-cx6"}};
    size_t at = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
        const size_t caption = h.find(groups[i].first);
        ASSERT_NE(caption, std::string::npos) << groups[i].first;
        EXPECT_GT(caption, at) << groups[i].first << " out of order";
        const size_t next = i + 1 < groups.size() ? h.find(groups[i + 1].first) : h.size();
        const size_t option = h.find(groups[i].second, caption);
        EXPECT_LT(option, next) << groups[i].second << " not under " << groups[i].first;
        at = caption;
    }
}

TEST(Help, names_the_subcommands_serve_replay_and_compare) {
    const std::string h = help_text();
    EXPECT_EQ(
        h.rfind(
            "Usage: hcasim [options]\n  or:  hcasim serve [options]\n  or:  hcasim replay FILE [options]\n"
            "  or:  hcasim compare A.json B.json [--tolerance P%]\n",
            0),
        0u)
        << h;
    for (const char* sub : {"\n  serve      ", "\n  replay     ", "\n  compare    "})
        EXPECT_NE(h.find(sub), std::string::npos) << sub;
}

TEST(Help, every_example_run_parses_and_names_existing_presets) {
    const std::string h = help_text();
    std::istringstream lines(h.substr(h.find("\nExamples:\n")));
    std::string line;
    int runs = 0;
    while (std::getline(lines, line)) {
        if (line.rfind("  hcasim --", 0) != 0) continue;  // subcommands have parsers of their own
        std::istringstream words(line);
        std::vector<std::string> args{std::istream_iterator<std::string>(words),
                                      std::istream_iterator<std::string>()};
        std::vector<const char*> argv;
        for (const std::string& a : args) argv.push_back(a.c_str());
        std::ostringstream out;
        hcasim::run_options o;
        EXPECT_NO_THROW(o = hcasim::parse_cli(int(argv.size()), argv.data(), out)) << line;
        for (const std::string& c : o.configs) EXPECT_NO_THROW(hcasim::resolve_config(c)) << line;
        ++runs;
    }
    EXPECT_GE(runs, 5);
}

}  // namespace

namespace {

TEST(Install, replay_and_serve_find_presets_by_name_too) {
    const std::string trace = source + "/traces/regression/err_immediate.jsonl";
    const result ok = run_hcasim("replay --config edr-cx5 '" + trace + "'", "install", "", "/tmp");
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_NE(ok.out.find("equal to the recording"), std::string::npos) << ok.out;
    const result bad = run_hcasim("replay --config nosuch '" + trace + "'", "install", "", "/tmp");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("--config 'nosuch': no such file and no such preset (presets in "),
              std::string::npos)
        << bad.err;
    const std::string sock = hcasim::test::empty_dir("install_serve") + "/s.sock";
    const result serve = run_hcasim("serve --config nosuch --socket '" + sock + "'", "install", "", "/tmp");
    EXPECT_EQ(serve.code, 2);
    EXPECT_NE(serve.err.find(
                  "hcasim: error: serve: --config 'nosuch': no such file and no such preset (presets in "),
              std::string::npos)
        << serve.err;
}

}  // namespace
