// Moved to testbench/workloads/workloads.h. This forwarder keeps the include lines of main.cpp (and replay.cpp) that the
// parallel move of replay/serve/attack rewrites; remove it once those lines name testbench/workloads/workloads.h.
#pragma once
#include "testbench/workloads/workloads.h"
