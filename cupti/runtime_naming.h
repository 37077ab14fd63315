// Naming driver-level events after the runtime call the app made, when our cudart hooks cannot.
//
// The runtime-API callbacks of cupti_callbacks.h count nothing: they only name the runtime call in progress
// (cudaMalloc rather than cuMemAlloc). A shared libcudart is interposed by interpose/cudart_hooks.cpp, which
// names the call itself (recorder::RuntimeApiScope) at no CUPTI cost; only a runtime we cannot interpose (a
// static cudart: nvcc's default, and inside libraries such as cuBLAS) needs the callbacks. CUPTI's dispatch of
// them costs ~0.5 us per cudaMallocAsync+cudaFreeAsync pair on the H200 (docs/benchmarks.md), so they are
// turned off once the hooks prove to name the allocations, and on again if an allocation arrives unnamed:
//
//   On (start) --first allocation named by a cudart hook--> Off --first allocation not named--> OnAgain (stays)
//
// Memory is never affected: the driver-API callbacks count every allocation in every state. At worst a name is
// lost: in an app with both a hooked shared cudart and a static cudart (or direct driver calls) the first
// unnamed allocation after the switch-off is recorded under its driver name (cuMemAlloc, cuMemAllocAsync...),
// and from then on the callbacks stay on (the old cost). GMT_CUPTI_RUNTIME_CALLBACKS=1 keeps them on
// throughout (the old behaviour, for comparisons).
#pragma once

#include <cupti.h>

#include "cupti/cupti_loader.h"
#include "schema/trace_schema.h"

namespace gmt::cupti {

// Called by start() once every site of kCallbackSites is enabled (the runtime ones included).
void start_runtime_naming(const CuptiTable* table, CUpti_SubscriberHandle subscriber);

// A runtime-API callback: remembers the outermost runtime call of this thread (entry) and forgets it (exit,
// matched by correlation id). `active`: not nested in our own code.
void on_runtime(CUpti_CallbackId cbid, const CUpti_CallbackData& data, bool active);

// The runtime call this thread is inside, as the runtime callbacks saw it; Unknown when none, or when the
// callbacks were switched off or on since its entry (its exit may never be seen: the name is stale).
schema::Api runtime_call_in_progress();

// Called at the exit of every driver allocation that has a runtime counterpart: `named_by_hook` says whether
// a cudart hook named it. Drives the state machine above; one relaxed load when nothing changes.
void note_allocation(bool named_by_hook);

}  // namespace gmt::cupti
