// Call sites at different depths through two chains, in a shared library (stack_memo_places.cpp says why).
#pragma once

using PlaceCallback = void (*)(void* argument);

// Calls callback(argument) from place `place` (0, 1, 2, ...): a stack of its own for each place, through the same
// call site of this function.
__attribute__((visibility("default"))) void call_from_place(int place, PlaceCallback callback, void* argument);
