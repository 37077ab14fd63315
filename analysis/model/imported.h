// Memory of other processes opened here, tracked apart from the process's own memory during the model's one
// pass (docs/analysis.md "Imported memory"): it never reaches LiveBytes, so it is in no total, peak, leak,
// timeline or growth of this process. Internal to analysis/.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>

#include "analysis/model/report.h"
#include "analysis/model/timeline.h"

namespace gmt::analysis {

class ImportedTracker {
 public:
  // An Alloc of memory kind IpcImported: an IPC handle opened at `address`.
  void on_open(uint64_t address, uint64_t size, int64_t device, int64_t stack_id, schema::Api api, int64_t time_ns);
  // A Free: true when `address` is an open IPC handle (then it is closed here and nowhere else).
  bool on_close(uint64_t address, int64_t time_ns);
  // VmmImport: a shareable handle of another process's physical memory.
  void on_vmm_import(uint64_t handle, int64_t device, int64_t stack_id, schema::Api api);
  // VmmMap / VmmUnmap / VmmRelease: true when they concern an imported handle (else they are the process's
  // own VMM memory, for VmmState).
  bool on_vmm_map(uint64_t handle, uint64_t address, uint64_t size, int64_t time_ns);
  bool on_vmm_unmap(uint64_t address, int64_t time_ns);
  bool on_vmm_release(uint64_t handle);

  // `origin`: the process start, to make times relative.
  ImportedMemory finish(int64_t origin, const StackLoadFn& load_stack, const StackKeyFn& stack_key) const;

 private:
  struct Opened {        // an open IPC handle or an imported VMM handle
    uint64_t bytes = 0;  // IPC: the opened size; VMM: the bytes mapped now
    int64_t device = -1;
    int64_t stack_id = 0;
    schema::Api api = schema::Api::Unknown;
  };
  struct Mapping {
    uint64_t handle = 0;
    uint64_t size = 0;
    int64_t device = -1;  // the imported memory's
  };
  struct PerDevice {
    uint64_t current = 0;
    uint64_t peak = 0;
    int64_t peak_time_ns = 0;
    uint64_t opens = 0;
  };

  void add(int64_t device, uint64_t bytes, int64_t time_ns);
  void remove(int64_t device, uint64_t bytes);

  std::unordered_map<uint64_t, Opened> ipc_;  // address -> open IPC handle
  // Imported VMM handles until released. A released handle's value may come back from cuMemCreate as the
  // process's own memory, so only handles not yet released are looked up for new mappings.
  std::unordered_map<uint64_t, Opened> handles_;
  std::unordered_map<uint64_t, Mapping> mappings_;  // mapped address -> imported handle
  std::map<int64_t, PerDevice> devices_;
  uint64_t current_ = 0;
  uint64_t peak_ = 0;
  int64_t peak_time_ns_ = 0;
  uint64_t opens_ = 0;
  uint64_t closes_ = 0;
};

}  // namespace gmt::analysis
