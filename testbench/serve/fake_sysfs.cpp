// SPDX-License-Identifier: MIT
//
// fake_sysfs.cpp - see fake_sysfs.h for the tree layout and file formats.
#include "testbench/serve/fake_sysfs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

namespace hcasim {
namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// mkdir -p; returns "" or an error.
std::string make_dirs(const std::string& path) {
    std::string cur;
    std::size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        cur = path.substr(0, pos);
        if (cur.empty()) continue;
        if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return errno_text("mkdir " + cur);
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "not a directory: " + path;
    return "";
}

// Writes text + '\n' (sysfs attributes end in a newline).
std::string put(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    if (!f) return errno_text("open " + path);
    f << text << '\n';
    f.close();
    if (!f) return "write failed: " + path;
    return "";
}

std::string hex_n(uint64_t v, int digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(v));
    return buf;
}

const char* port_state_name(unsigned s) {
    switch (s) {
    case 0: return "NOP";
    case 1: return "DOWN";
    case 2: return "INIT";
    case 3: return "ARMED";
    case 4: return "ACTIVE";
    case 5: return "ACTIVE_DEFER";
    default: return "UNKNOWN";
    }
}

const char* phys_state_name(unsigned s) {
    switch (s) {
    case 1: return "Sleep";
    case 2: return "Polling";
    case 3: return "Disabled";
    case 4: return "PortConfigurationTraining";
    case 5: return "LinkUp";
    case 6: return "LinkErrorRecovery";
    case 7: return "Phy Test";
    default: return "<unknown>";
    }
}

}  // namespace

std::string format_guid(uint64_t guid) {
    return hex_n(guid >> 48 & 0xffff, 4) + ":" + hex_n(guid >> 32 & 0xffff, 4) + ":" +
           hex_n(guid >> 16 & 0xffff, 4) + ":" + hex_n(guid & 0xffff, 4);
}

std::string format_gid(uint64_t subnet_prefix, uint64_t guid) {
    return format_guid(subnet_prefix) + ":" + format_guid(guid);
}

std::string format_rate(uint8_t width_code, uint8_t speed_code) {
    int lanes = 1;
    switch (width_code) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: lanes = 1; break;
    }
    // Per-lane rate in units of 0.1 Gb/s, as the kernel computes it.
    int lane_rate = 25;
    const char* name = "SDR";
    switch (speed_code) {
    case 1:
        lane_rate = 25;
        name = "SDR";
        break;
    case 2:
        lane_rate = 50;
        name = "DDR";
        break;
    case 4:
        lane_rate = 100;
        name = "QDR";
        break;
    case 8:
        lane_rate = 100;
        name = "FDR10";
        break;
    case 16:
        lane_rate = 140;
        name = "FDR";
        break;
    case 32:
        lane_rate = 250;
        name = "EDR";
        break;
    case 64:
        lane_rate = 500;
        name = "HDR";
        break;
    case 128:
        lane_rate = 1000;
        name = "NDR";
        break;
    default: break;
    }
    const int rate = lane_rate * lanes;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%d%s Gb/sec (%dX %s)", rate / 10, rate % 10 ? ".5" : "", lanes, name);
    return buf;
}

std::string write_fake_sysfs(const std::string& root, const std::vector<fake_ib_device>& devs) {
    if (root.empty() || root[0] != '/') return "sysfs root must be an absolute path: '" + root + "'";
    const std::string verbs_cls = root + "/class/infiniband_verbs";
    const std::string ib_cls = root + "/class/infiniband";
    std::string err;
    if (!(err = make_dirs(verbs_cls)).empty()) return err;
    if (!(err = make_dirs(ib_cls)).empty()) return err;
    if (!(err = put(verbs_cls + "/abi_version", "6")).empty()) return err;

    // The uverbs node is a link to /dev/null; "dev" must carry its numbers.
    unsigned dev_major = 1, dev_minor = 3;
    struct stat nullst {};
    if (::stat("/dev/null", &nullst) == 0 && S_ISCHR(nullst.st_mode)) {
        dev_major = major(nullst.st_rdev);
        dev_minor = minor(nullst.st_rdev);
    }

    for (std::size_t i = 0; i < devs.size(); ++i) {
        const fake_ib_device& d = devs[i];
        if (d.name.empty() || d.name.find('/') != std::string::npos)
            return "bad device name '" + d.name + "'";
        const std::string uv = verbs_cls + "/uverbs" + std::to_string(i);
        const std::string ib = ib_cls + "/" + d.name;
        if (!(err = make_dirs(uv)).empty()) return err;
        if (!(err = make_dirs(ib + "/ports")).empty()) return err;

        if (!(err = put(uv + "/ibdev", d.name)).empty()) return err;
        if (!(err = put(uv + "/dev", std::to_string(dev_major) + ":" + std::to_string(dev_minor))).empty())
            return err;
        if (!(err = put(uv + "/abi_version", "6")).empty()) return err;
        const std::string link = uv + "/device";
        ::unlink(link.c_str());
        if (::symlink(ib.c_str(), link.c_str()) != 0) return errno_text("symlink " + link);

        if (!(err = put(ib + "/node_type", "1: CA")).empty()) return err;
        if (!(err = put(ib + "/node_guid", format_guid(d.node_guid))).empty()) return err;
        if (!(err = put(ib + "/sys_image_guid", format_guid(d.sys_image_guid))).empty()) return err;
        if (!(err = put(ib + "/node_desc", d.name + " hcasim HCA")).empty()) return err;
        if (!(err = put(ib + "/fw_ver", d.fw_ver)).empty()) return err;
        if (!(err = put(ib + "/hca_type", d.hca_type)).empty()) return err;
        if (!(err = put(ib + "/board_id", d.board_id)).empty()) return err;

        for (std::size_t p = 0; p < d.ports.size(); ++p) {
            const fake_ib_port& pt = d.ports[p];
            const std::string pd = ib + "/ports/" + std::to_string(p + 1);
            for (const char* sub : {"/gids", "/pkeys", "/gid_attrs/types", "/gid_attrs/ndevs"})
                if (!(err = make_dirs(pd + sub)).empty()) return err;
            if (!(err = put(pd + "/state", std::to_string(pt.state) + ": " + port_state_name(pt.state)))
                     .empty())
                return err;
            if (!(err = put(pd + "/phys_state",
                            std::to_string(pt.phys_state) + ": " + phys_state_name(pt.phys_state)))
                     .empty())
                return err;
            if (!(err = put(pd + "/rate", format_rate(pt.width_code, pt.speed_code))).empty()) return err;
            char num[32];
            std::snprintf(num, sizeof num, "0x%x", pt.lid);
            if (!(err = put(pd + "/lid", num)).empty()) return err;
            std::snprintf(num, sizeof num, "0x%x", pt.sm_lid);
            if (!(err = put(pd + "/sm_lid", num)).empty()) return err;
            if (!(err = put(pd + "/sm_sl", "0")).empty()) return err;
            if (!(err = put(pd + "/lid_mask_count", std::to_string(pt.lmc))).empty()) return err;
            std::snprintf(num, sizeof num, "0x%08x", pt.cap_mask);
            if (!(err = put(pd + "/cap_mask", num)).empty()) return err;
            if (!(err = put(pd + "/link_layer", "InfiniBand")).empty()) return err;
            for (int k = 0; k < pt.gid_count; ++k) {
                const std::string gid =
                    k == 0 ? format_gid(pt.subnet_prefix, pt.port_guid) : format_gid(0, 0);
                if (!(err = put(pd + "/gids/" + std::to_string(k), gid)).empty()) return err;
                if (!(err = put(pd + "/gid_attrs/types/" + std::to_string(k), "IB/RoCE v1")).empty())
                    return err;
            }
            for (std::size_t k = 0; k < pt.pkeys.size(); ++k) {
                std::snprintf(num, sizeof num, "0x%04x", pt.pkeys[k]);
                if (!(err = put(pd + "/pkeys/" + std::to_string(k), num)).empty()) return err;
            }
        }
    }
    return "";
}

std::string ensure_uverbs_nodes(int n) {
    const std::string dir = "/dev/infiniband";
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return errno_text("mkdir " + dir) + (geteuid() != 0 ? " (not root)" : "");
    for (int i = 0; i < n; ++i) {
        const std::string node = dir + "/uverbs" + std::to_string(i);
        struct stat st {};
        if (::stat(node.c_str(), &st) == 0) {
            if (S_ISCHR(st.st_mode)) continue;
            return node + " exists but is not a character device";
        }
        ::unlink(node.c_str());  // a dangling link would block symlink()
        if (::symlink("/dev/null", node.c_str()) != 0)
            return errno_text("symlink " + node + " -> /dev/null") + (geteuid() != 0 ? " (not root)" : "");
        if (::stat(node.c_str(), &st) != 0 || !S_ISCHR(st.st_mode))
            return node + " does not resolve to a character device";
    }
    return "";
}

}  // namespace hcasim
