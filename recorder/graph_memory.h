// CUDA graph memory nodes (docs/design.md, "CUDA graphs"). An allocation made on a capturing stream, or added to a
// graph with cuGraphAddMemAllocNode, is a node of the graph: its memory is allocated each time the graph is
// launched, from the device's graph memory pool, and freed by a free node of the graph or later by the app. So:
//   - the node itself is recorded where it is made (GraphAllocNode: its address and size, with the stack that made
//     it), and is no memory;
//   - each instantiated graph is read once (its alloc and free nodes, child graphs included) and each launch records
//     an Alloc per alloc node (with the node's stack) and then a Free per free node, at launch time;
//   - the graph memory pool's reserved and used bytes are sampled at launches, like a stream-ordered pool's.
// Shared by both driver-level backends (interpose/driver_hooks.cpp, cupti/cupti_callbacks.cpp), like
// driver_events.h: call inside an active HookScope, after the call returned successfully.
#pragma once

#include <cstdint>

#include "recorder/driver_events.h"

namespace gmt::recorder {

// A memory-alloc node was added to a graph (a stream-ordered allocation on a capturing stream, or
// cuGraphAddMemAllocNode): records GraphAllocNode with the caller's stack and keeps the stack for the launches.
void record_graph_alloc_node(const DriverCall& call, uint64_t address, uint64_t size);

// An instantiated graph: its memory nodes are read now (`flags`: the instantiation flags, for auto-free on launch).
void note_graph_instantiated(uint64_t exec, uint64_t graph, uint64_t flags);
// A launch of an instantiated graph on `call.stream`: its nodes' allocations and frees.
void record_graph_launch(const DriverCall& call, uint64_t exec);
// cuGraphExecDestroy: the graph is forgotten (before the real call).
void forget_graph_exec(uint64_t exec);
// A free of `address` outside any graph (record_driver_free): an allocation of a graph node is no longer live.
void note_free_outside_graph(uint64_t address);

}  // namespace gmt::recorder
