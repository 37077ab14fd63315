// Call sites at different depths through two chains, in a shared library (stack_memo_places.cpp says why). Also
// loaded by tests/unwind/walk_cut_test.cpp and, through ctypes, by tests/python/cut_app.py (TWO_PATHS_LIBRARY).
#pragma once

#include <cstdint>

using PlaceCallback = void (*)(void* argument);

// Calls callback(argument) from place `place` (0, 1, 2, ...): a stack of its own for each place, through the same
// call site of this function.
__attribute__((visibility("default"))) void call_from_place(int place, PlaceCallback callback, void* argument);

// Calls callback(argument) through a function that stands for CPython's eval loop (the walker's cut: its code range
// in *begin, *end from walk_cut_stand_in_range), reached by two native paths (path_y or not) whose frames have one
// size: the stack pointer below the stand-in is the same on both, the return addresses above it are not. In a
// Python program the callback is a ctypes function and the stand-in is one more native frame below the real eval
// loop: the case the stack memo's cut cannot tell apart (recorder/stacks.cpp).
extern "C" {
__attribute__((visibility("default"))) void call_through_cut(int path_y, PlaceCallback callback, void* argument);
__attribute__((visibility("default"))) void walk_cut_stand_in_range(uintptr_t* begin, uintptr_t* end);
}
