// SPDX-License-Identifier: MIT
//
// fake_sysfs.h - builds a sysfs-like tree that makes libibverbs 44 (and the
// tools on top of it: ibv_devices, ibv_devinfo, ibv_*_pingpong, perftest)
// see simulated hcasim HCAs when run with SYSFS_PATH=<root> and no kernel
// RDMA stack (netlink fails, libibverbs falls back to sysfs).
//
// Layout written by write_fake_sysfs(root, devs), device i = devs[i]:
//
//   <root>/class/infiniband_verbs/abi_version      "6"   (uverbs ABI, 3..6)
//   <root>/class/infiniband_verbs/uverbs<i>/ibdev   "<name>"
//   <root>/class/infiniband_verbs/uverbs<i>/dev     "<major>:<minor>" of the
//        character device /dev/infiniband/uverbs<i> really is.  We point the
//        node at /dev/null, so this is /dev/null's numbers ("1:3"); if it
//        differed libibverbs would try /dev/char/MAJ:MIN and fail to open.
//   <root>/class/infiniband_verbs/uverbs<i>/abi_version  "6"
//   <root>/class/infiniband_verbs/uverbs<i>/device  -> symlink to the ibdev
//        directory (only cosmetic; real sysfs has a link to the PCI device)
//   <root>/class/infiniband/<name>/node_type        "1: CA"  (decimal first)
//   <root>/class/infiniband/<name>/node_guid        "xxxx:xxxx:xxxx:xxxx"
//        (16 hex digits in 4 groups, most significant first; libibverbs
//        parses "%hx:%hx:%hx:%hx" for ibv_get_device_guid)
//   <root>/class/infiniband/<name>/sys_image_guid   same format
//   <root>/class/infiniband/<name>/node_desc        "<name> hcasim HCA"
//   <root>/class/infiniband/<name>/fw_ver           e.g. "1.0.0"
//   <root>/class/infiniband/<name>/hca_type         e.g. "HCASIM"
//   <root>/class/infiniband/<name>/board_id         e.g. "HCASIM_0001"
//   <root>/class/infiniband/<name>/ports/<p>/ (p = 1..ports.size()):
//       state          "<n>: <NAME>"  n = enum ibv_port_state, e.g. "4: ACTIVE"
//       phys_state     "<n>: <Name>"  e.g. "5: LinkUp"
//       rate           "<Gbps> Gb/sec (<W>X <SPEED>)" e.g. "100 Gb/sec (4X EDR)"
//       lid            "0x<hex>"      e.g. "0x1"
//       sm_lid         "0x<hex>"
//       sm_sl          "0"
//       lid_mask_count "<dec>"
//       cap_mask       "0x<8 hex>"    e.g. "0x02510868"
//       link_layer     "InfiniBand"
//       gids/<k>       "xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx" for
//                      k < gid_count; k = 0 is subnet_prefix:port_guid, the
//                      others all zero (as the kernel shows unused entries)
//       gid_attrs/types/<k>  "IB/RoCE v1" (what the kernel reports on IB)
//       gid_attrs/ndevs/<k>  not written: on IB the kernel returns an error
//                      for it and libibverbs treats that as "no netdev"
//       pkeys/<k>      "0x<4 hex>" e.g. "0xffff", k < pkeys.size()
//
// Files read by libibverbs itself: infiniband_verbs/abi_version, uverbsN/
// {ibdev,dev,abi_version}, <ibdev>/{node_type,node_guid}, ports/*/pkeys/*,
// ports/*/gids/*, ports/*/gid_attrs/types/* (ibv_query_gid_ex/_table).  The
// rest mirrors what the kernel exposes for tools that read sysfs directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hcasim {

/// One IB port as shown in sysfs.  Numeric codes use the ibverbs enums.
struct fake_ib_port {
    uint16_t lid = 1;
    uint16_t sm_lid = 1;
    uint8_t lmc = 0;
    uint8_t state = 4;       ///< enum ibv_port_state (4 = IBV_PORT_ACTIVE)
    uint8_t phys_state = 5;  ///< 5 = LinkUp
    uint8_t width_code = 2;  ///< ibv_port_attr::active_width (1=1X,2=4X,4=8X,8=12X,16=2X)
    uint8_t speed_code =
        32;  ///< ibv_port_attr::active_speed (1 SDR,2 DDR,4 QDR,8 FDR10,16 FDR,32 EDR,64 HDR,128 NDR)
    uint64_t subnet_prefix = 0xfe80000000000000ull;
    uint64_t port_guid = 0;
    std::vector<uint16_t> pkeys{0xffff};
    int gid_count = 1;               ///< number of gids/<k> entries (gid_tbl_len)
    int max_mtu = 5;                 ///< enum ibv_mtu (5 = 4096)
    uint32_t cap_mask = 0x02510868;  ///< ibv_port_attr::port_cap_flags
};

/// One HCA.  name becomes class/infiniband/<name>; index i in the vector
/// passed to write_fake_sysfs becomes uverbs<i>.
struct fake_ib_device {
    std::string name;
    uint64_t node_guid = 0;
    uint64_t sys_image_guid = 0;
    std::string fw_ver = "1.0.0";
    std::string hca_type = "HCASIM";
    std::string board_id = "HCASIM_0001";
    std::vector<fake_ib_port> ports;
};

/// "xxxx:xxxx:xxxx:xxxx" form of a GUID (as sysfs prints node_guid).
std::string format_guid(uint64_t guid);
/// "xxxx:...:xxxx" (8 groups) form of a GID built from prefix and guid.
std::string format_gid(uint64_t subnet_prefix, uint64_t guid);
/// Kernel "rate" text, e.g. "100 Gb/sec (4X EDR)", for the given codes.
std::string format_rate(uint8_t width_code, uint8_t speed_code);

/// Writes a sysfs tree under root (root/class/infiniband/...,
/// root/class/infiniband_verbs/...) for the devices, device i as uverbs<i>;
/// returns "" or an error message.  Existing files are overwritten.
std::string write_fake_sysfs(const std::string& root, const std::vector<fake_ib_device>& devs);

/// Makes /dev/infiniband/uverbs<i> exist for i < n (symlinks to /dev/null;
/// libibverbs insists on a character device) - returns "" or an error
/// naming what failed (e.g. not root).
std::string ensure_uverbs_nodes(int n);

}  // namespace hcasim
