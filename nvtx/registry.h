// NVTX domains and registered strings: the handles the application holds, mapped to interned names.
// Lookups are lock-free (every Ex call with a domain or a registered string makes one); registering takes no
// lock either, so a fork can never inherit a held lock from here. Internal to nvtx/.
//
// The handle the app gets is the chained tool's own (so calls we do not intercept, e.g. nvtxDomainSyncUser* or
// the memory and counter extensions, reach that tool with the handles it made), or, when there is no chained
// tool or it made none, a unique value of ours ("fake"): a fake handle is forwarded to the chained tool as
// nullptr, which is what it would have been given without us (NVTX's no-op DomainCreate returns nullptr).
#pragma once

#include <cstdint>

namespace gmt::nvtx {

struct DomainInfo {
  uint32_t name_id = 0;  // strings.id of the domain's name; 0 = the default domain
  bool own = false;      // created by gpumemtrace's own emission (under the guard): never recorded
  bool fake = false;     // the handle is ours: forward nullptr to the chained tool
};

// The domain of `handle`; nullptr is the default domain. An unknown handle (the table was full) reads as a
// domain named "(unknown domain)", forwarded as it is.
DomainInfo find_domain(const void* handle);
// The handle to give the app for a new domain. `chained`: what the chained tool returned (may be null).
const void* register_domain(uint32_t name_id, const void* chained, bool own);

struct StringInfo {
  uint32_t name_id = 0;
  bool fake = false;
};
StringInfo find_string(const void* handle);
const void* register_string(uint32_t name_id, const void* chained);

}  // namespace gmt::nvtx
