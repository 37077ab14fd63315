// CPython's code watchers (3.12+) feeding the Python chain key (unwind/python_frames.h, start_watching_code_objects).
// The in-process package registers gmt_python_code_event with PyCode_AddWatcher, holding the GIL, and then calls
// gmt_python_code_watch_started (python/gpumemtrace_inprocess/code_watch.py). CPython calls the watcher, with the
// GIL held, whenever a code object is created or destroyed: it only counts the destructions, never calls Python.
#include <string>

#include "recorder/recorder.h"
#include "schema/trace_schema.h"
#include "unwind/python_frames.h"

namespace {
constexpr int kCodeEventDestroy = 1;  // PyCodeEvent: PY_CODE_EVENT_CREATE = 0, PY_CODE_EVENT_DESTROY = 1
}  // namespace

// A PyCode_WatchCallback: int (*)(PyCodeEvent event, PyCodeObject* code). 0: no error (CPython would otherwise
// report it as unraisable).
extern "C" __attribute__((visibility("default"))) int gmt_python_code_event(int event, void* /*code*/) {
  if (event == kCodeEventDestroy) gmt::unwind::note_code_object_destroyed();
  return 0;
}

// After PyCode_AddWatcher accepted gmt_python_code_event: from now on every destruction is counted.
extern "C" __attribute__((visibility("default"))) void gmt_python_code_watch_started(int watcher_id) {
  if (gmt::unwind::code_objects_watched()) return;
  gmt::unwind::start_watching_code_objects();
  gmt::recorder::set_meta_later(gmt::schema::meta::kPythonCodeWatcher, std::to_string(watcher_id));
}
