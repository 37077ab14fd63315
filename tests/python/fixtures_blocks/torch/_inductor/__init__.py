"""TEST FIXTURE, not PyTorch: the lazily imported package that PyTorch's snapshot symbolizer asks for. It notes
which thread imported it (importlib.import_module, as torch's lazy __getattr__ uses, raises no import audit
event)."""
import threading

imported_by = threading.current_thread().name
