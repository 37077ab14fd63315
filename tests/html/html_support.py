"""Helpers for the exported-report tests: headless chromium, and a DOM reader for what it dumps."""
import html.parser
import os
import shutil
import subprocess
import sys
import tempfile

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium():
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def require_chromium():
    """The browser, or exit 77 (ctest: skipped) with a message saying how to get it."""
    path = find_chromium()
    if path is None:
        print("SKIP: chromium is not installed (scripts/install-deps.sh installs Debian's `chromium`)", file=sys.stderr)
        sys.exit(77)
    return path


def browser_environment():
    """The test's environment without preloads: the sanitizer runs preload ASan's runtime into every process
    they start, and chromium under it does not finish loading a page in two minutes. The browser is only the
    page's reader; it is never what a test measures."""
    env = dict(os.environ)
    for name in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS"):
        env.pop(name, None)
    return env


def chromium(browser, *args, timeout=120):
    """Runs headless chromium with a profile of its own (tests may run in parallel); returns stdout."""
    with tempfile.TemporaryDirectory(prefix="gmt-chromium-") as profile:
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                   f"--user-data-dir={profile}", *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                env=browser_environment())
    if result.returncode != 0:
        raise AssertionError(f"chromium failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def dump_dom(browser, page):
    """The DOM after the page's scripts ran, serialized."""
    return chromium(browser, "--dump-dom", "file://" + os.path.abspath(page))


def screenshot(browser, page, png, width=1200, height=1800):
    chromium(browser, f"--window-size={width},{height}", f"--screenshot={os.path.abspath(png)}",
             "file://" + os.path.abspath(page))


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag = tag
        self.attrs = dict(attrs)
        self.parent = parent
        self.children = []
        self.text_parts = []

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        """All text inside, as a browser's textContent."""
        parts = []
        for child in self.children:
            parts.append(child if isinstance(child, str) else child.text())
        return "".join(parts)

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag=None, cls=None):
        return [e for e in self.iter() if (tag is None or e.tag == tag) and (cls is None or cls in e.classes())]


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class DomReader(html.parser.HTMLParser):
    """A tree of the dumped DOM; entities in text and attributes are decoded, as in the browser."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", [], None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        element = Element(tag, attrs, self.current)
        self.current.children.append(element)
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, attrs, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse_dom(text):
    reader = DomReader()
    reader.feed(text)
    reader.close()
    return reader.root
