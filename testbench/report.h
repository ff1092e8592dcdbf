// Moved to testbench/cli/report.h. This forwarder keeps the include lines of main.cpp (and replay.cpp) that the
// parallel move of replay/serve/attack rewrites; remove it once those lines name testbench/cli/report.h.
#pragma once
#include "testbench/cli/report.h"
