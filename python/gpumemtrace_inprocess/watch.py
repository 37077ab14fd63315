"""Run a function right after the app imports a module (e.g. torch), without importing it ourselves.

A finder placed first on sys.meta_path sees every import by name; for a watched top-level module it lets the real
finders locate it and wraps the loader's exec_module, so the callbacks run once the module's code has finished
executing, on the importing thread. Already-imported modules get their callbacks at once. A callback that raises
is reported once on stderr and dropped; the import itself always proceeds as without us.
"""
import importlib.abc
import sys
import threading

_lock = threading.Lock()
_callbacks = {}  # module name -> [callback(module)]
_finder = None


def _run(name, module):
    with _lock:
        callbacks = _callbacks.pop(name, [])
    for callback in callbacks:
        try:
            callback(module)
        except Exception as error:  # never into the app's import
            sys.stderr.write(f"gpumemtrace: {getattr(callback, '__qualname__', callback)} failed after "
                             f"'import {name}': {error!r}; that part is off\n")


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _callbacks or getattr(self._busy, "name", None) == fullname:
            return None
        self._busy.name = fullname
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.name = None
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        real_exec = loader.exec_module

        def exec_then_notify(module):
            # The module keeps the real loader, as without us (importlib.resources, reload, pickling of specs).
            module.__loader__ = loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = loader
            real_exec(module)
            _run(fullname, module)

        # Per spec, not per loader class: only this import is wrapped.
        spec.loader = _WrappedLoader(loader, exec_then_notify)
        return spec


class _WrappedLoader(importlib.abc.Loader):
    def __init__(self, loader, exec_module):
        self._loader = loader
        self._exec_module = exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._exec_module(module)

    def __getattr__(self, name):  # get_resource_reader, is_package, get_code, ...: the real loader's
        return getattr(self._loader, name)


def when_imported(name, callback):
    """Call callback(module) once the top-level module `name` is imported (now, if it already is)."""
    global _finder
    module = sys.modules.get(name)
    if module is not None:
        _callbacks.setdefault(name, []).append(callback)
        _run(name, module)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if _finder is None:
            _finder = _PostImportFinder()
            sys.meta_path.insert(0, _finder)
