// Driver queries that are not on any hot path: what an IPC open handed this process (the size of the opened
// range, the device its memory lives on) and what a device is called (the devices table). These functions
// are wrapped by no backend, so the pointers resolved by name are the driver's own. Under the simulated
// runtime (no libcuda) they come from the runtime's cudaGetDriverEntryPointByVersion, which the simulator
// answers (tests/simcuda/api_ipc.cpp). Never loads a library: only ones the app loaded are asked.
#pragma once

#include <cstdint>
#include <string>

namespace gmt::recorder {

// An opened range of another process's memory. size 0 / device -1: the driver could not say.
struct ImportedRange {
  uint64_t size = 0;
  int16_t device = -1;
};

// cuMemGetAddressRange and cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) on `address`. Call it
// inside an active HookScope (the queries must not be recorded).
ImportedRange describe_imported(uint64_t address);

// The device the physical memory behind an imported VMM handle lives on
// (cuMemGetAllocationPropertiesFromHandle); -1 when unknown.
int16_t device_of_vmm_handle(uint64_t handle);

struct DeviceDescription {
  int ordinal = -1;
  std::string name;          // "" when unknown
  std::string uuid;          // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "" when unknown
  int64_t total_bytes = -1;  // -1 when unknown
  std::string pci_bus_id;    // "" when unknown
};

// For the devices table (the recorder's writer thread, never a hook). False when no driver answers.
bool describe_device(int ordinal, DeviceDescription& out);

// The 16 UUID bytes as nvidia-smi prints them: "GPU-" then 8-4-4-4-12 lowercase hex digits.
std::string format_gpu_uuid(const unsigned char (&bytes)[16]);

}  // namespace gmt::recorder
