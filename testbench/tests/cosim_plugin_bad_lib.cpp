// Unfit RTL plug-in libraries (rtl/abi/hcasim_rtl.h) for the error tests of
// hcasim_plugin_test.cpp, one per build flag: BAD_VERSION exports every symbol but another ABI
// version; NO_EVAL lacks hcasim_rtl_eval; neither: a well-formed P_Key checker plug-in whose
// hcasim_rtl_create fails with a reason.
#include <cstdio>

#include "rtl/abi/hcasim_rtl.h"

extern "C" uint32_t hcasim_rtl_abi_version(void) {
#ifdef BAD_VERSION
    return HCASIM_RTL_ABI_VERSION + 41;
#else
    return HCASIM_RTL_ABI_VERSION;
#endif
}

extern "C" const char* hcasim_rtl_unit(void) { return HCASIM_RTL_UNIT_PKEY_CHECKER; }

extern "C" void* hcasim_rtl_create(const char*, const char*, char* error, size_t error_len) {
    std::snprintf(error, error_len, "no licence for this RTL");
    return nullptr;
}

#ifndef NO_EVAL
extern "C" void hcasim_rtl_eval(void*, void*, uint64_t) {}
#endif

extern "C" void hcasim_rtl_destroy(void*) {}
