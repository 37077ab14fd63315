// The offline symbolizer against the test binary itself: pcs are real return addresses captured here, the
// module map is this process's own (dl_iterate_phdr, as the recorder does), so function names and lines
// are known exactly.
#include "analysis/read/symbolizer.h"

#include <dlfcn.h>
#include <elf.h>
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"
#include "symbolizer_inline_fixture.h"

// GCC may clone a noinline function (constprop/isra), which would change its symbol; noclone stops that.
#if defined(__clang__)
#define GMT_TEST_NOINLINE __attribute__((noinline))
#else
#define GMT_TEST_NOINLINE __attribute__((noinline, noclone))
#endif

namespace gmt_symbolizer_fixture {

GMT_TEST_NOINLINE void* leaf() { return __builtin_return_address(0); }

// Returns the return address of its call to leaf(), i.e. a pc inside leaf_caller on the line in *line.
GMT_TEST_NOINLINE void* leaf_caller(int* line) {
  *line = __LINE__ + 1;
  void* pc = leaf();
  asm volatile("" ::: "memory");  // keeps the call out of tail position, so it stays a call
  return pc;
}

// Returns a pc inside code inlined from symbolizer_inline_fixture.h into this function, at the line in *line.
GMT_TEST_NOINLINE void* inline_caller(int* line) {
  *line = __LINE__ + 1;
  void* pc = inlined_leaf_call();
  asm volatile("" ::: "memory");
  return pc;
}

}  // namespace gmt_symbolizer_fixture

// A C-linkage caller: its name must come back exactly as written, not run through the demangler.
extern "C" GMT_TEST_NOINLINE void* gmt_symbolizer_c_caller(int* line) {
  *line = __LINE__ + 1;
  void* pc = gmt_symbolizer_fixture::leaf();
  asm volatile("" ::: "memory");
  return pc;
}

namespace gmt::analysis {
namespace {

namespace fs = std::filesystem;

struct ModuleInfo {
  std::string path;
  uint64_t base = 0;
  uint64_t size = 0;
  std::optional<std::string> build_id;
  uint64_t text_begin = 0;  // runtime range of the executable PT_LOAD
  uint64_t text_end = 0;
};

// What the recorder writes for one loaded object: dlpi_addr, the extent of the PT_LOAD segments from it,
// and the GNU build-id read from the mapped PT_NOTE segments.
ModuleInfo describe(const dl_phdr_info* info, std::string path) {
  ModuleInfo module{std::move(path), info->dlpi_addr, 0, std::nullopt, 0, 0};
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      module.size = std::max<uint64_t>(module.size, ph.p_vaddr + ph.p_memsz);
      if (ph.p_flags & PF_X) {
        module.text_begin = info->dlpi_addr + ph.p_vaddr;
        module.text_end = module.text_begin + ph.p_memsz;
      }
    }
    if (ph.p_type != PT_NOTE || module.build_id) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        std::string hex;
        for (unsigned j = 0; j < note->n_descsz; ++j) hex += fmt::format("{:02x}", desc[j]);
        module.build_id = hex;
        break;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return module;
}

ModuleInfo main_executable() {
  std::optional<ModuleInfo> found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        // The first object is the main program; its dlpi_name is "", so the path comes from /proc.
        *static_cast<std::optional<ModuleInfo>*>(data) = describe(info, fs::read_symlink("/proc/self/exe"));
        return 1;
      },
      &found);
  return *found;
}

ModuleInfo module_named(const std::string& path) {
  std::pair<std::string, std::optional<ModuleInfo>> search{path, std::nullopt};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<std::pair<std::string, std::optional<ModuleInfo>>*>(data);
        if (info->dlpi_name == nullptr || s->first != info->dlpi_name) return 0;
        s->second = describe(info, s->first);
        return 1;
      },
      &search);
  if (!search.second) throw std::runtime_error("no loaded module " + path);
  return *search.second;
}

// A fresh trace with the real schema, written the way the recorder would, in its own temp directory.
class SymbolizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "gmt_symbolizer_XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    path_ = (dir_ / "trace.db").string();
    ASSERT_EQ(sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr), SQLITE_OK);
    exec(fmt::format("PRAGMA application_id = {}", gmt::schema::kApplicationId));
    exec(fmt::format("PRAGMA user_version = {}", gmt::schema::kSchemaVersion));
    exec(gmt::schema::kCreateSchemaSql);
  }
  void TearDown() override {
    sqlite3_close(db_);
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  void exec(const std::string& sql) {
    char* error = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    std::string message = error ? error : "";
    sqlite3_free(error);
    ASSERT_EQ(rc, SQLITE_OK) << message << " in: " << sql;
  }

  int64_t add_module(const std::string& path, uint64_t base, uint64_t size,
                     const std::optional<std::string>& build_id) {
    exec(fmt::format("INSERT INTO modules(path, base, size, build_id) VALUES ('{}', {}, {}, {})", path, base, size,
                     build_id ? "'" + *build_id + "'" : std::string("NULL")));
    return sqlite3_last_insert_rowid(db_);
  }
  int64_t add_module(const ModuleInfo& m) { return add_module(m.path, m.base, m.size, m.build_id); }

  // Every pc becomes one frame of stack 1, in order.
  void add_pcs(const std::vector<uint64_t>& pcs) {
    exec("INSERT OR IGNORE INTO stacks(id, depth) VALUES (1, 0)");
    exec("BEGIN");
    for (uint64_t pc : pcs) {
      exec(fmt::format("INSERT INTO stack_frames(stack_id, level, pc) VALUES "
                       "(1, (SELECT count(*) FROM stack_frames), {})",
                       static_cast<int64_t>(pc)));
    }
    exec("COMMIT");
  }

  struct Row {
    std::optional<std::string> function, file;
    std::optional<int64_t> line, module_id;
  };
  std::optional<Row> symbol(const TraceFile& trace, uint64_t pc) {
    Statement q(trace, "SELECT function, file, line, module_id FROM symbols WHERE pc = ?1");
    q.bind(1, static_cast<int64_t>(pc));
    if (!q.step()) return std::nullopt;
    Row row{q.column_text(0), q.column_text(1), std::nullopt, std::nullopt};
    if (!q.column_is_null(2)) row.line = q.column_int(2);
    if (!q.column_is_null(3)) row.module_id = q.column_int(3);
    return row;
  }
  int64_t symbol_count(const TraceFile& trace) {
    Statement q(trace, "SELECT count(*) FROM symbols");
    q.step();
    return q.column_int(0);
  }

  fs::path dir_;
  std::string path_;
  sqlite3* db_ = nullptr;
};

TEST_F(SymbolizerTest, ResolvesOwnFunctionsAndLines) {
  int cpp_line = 0, c_line = 0;
  auto cpp_pc = reinterpret_cast<uint64_t>(gmt_symbolizer_fixture::leaf_caller(&cpp_line));
  auto c_pc = reinterpret_cast<uint64_t>(gmt_symbolizer_c_caller(&c_line));
  ModuleInfo exe = main_executable();
  ASSERT_TRUE(exe.build_id) << "the test binary should carry a GNU build-id";
  int64_t exe_id = add_module(exe);
  add_pcs({cpp_pc, c_pc});

  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  SymbolizeStats stats = symbolize_trace(trace);
  EXPECT_EQ(stats.pcs, 2u);
  EXPECT_EQ(stats.resolved_functions, 2u);
  EXPECT_EQ(stats.resolved_lines, 2u);
  EXPECT_EQ(stats.modules, 1u);
  EXPECT_TRUE(stats.missing_modules.empty());
  EXPECT_EQ(trace.meta(gmt::schema::meta::kSymbolized), "1");

  auto cpp = symbol(trace, cpp_pc);
  ASSERT_TRUE(cpp && cpp->function);
  EXPECT_NE(cpp->function->find("gmt_symbolizer_fixture::leaf_caller"), std::string::npos) << *cpp->function;
  ASSERT_TRUE(cpp->file);
  EXPECT_EQ(fs::path(*cpp->file).filename(), "symbolizer_test.cpp");
  EXPECT_TRUE(fs::path(*cpp->file).is_absolute()) << *cpp->file;
  EXPECT_EQ(cpp->line, cpp_line);
  EXPECT_EQ(cpp->module_id, exe_id);

  auto c = symbol(trace, c_pc);
  ASSERT_TRUE(c && c->function);
  EXPECT_EQ(*c->function, "gmt_symbolizer_c_caller");
  ASSERT_TRUE(c->file);
  EXPECT_EQ(fs::path(*c->file).filename(), "symbolizer_test.cpp");
  EXPECT_EQ(c->line, c_line);
}

// A pc in code inlined from a header: the function is the physical one (inline_caller), so the file and line
// must be its own, where it calls the inlined function, not the header's line inside it.
TEST_F(SymbolizerTest, InlinedCodeIsNamedAtTheCallersLine) {
  int line = 0;
  auto pc = reinterpret_cast<uint64_t>(gmt_symbolizer_fixture::inline_caller(&line));
  add_module(main_executable());
  add_pcs({pc});
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  symbolize_trace(trace);
  auto row = symbol(trace, pc);
  ASSERT_TRUE(row && row->function && row->file);
  EXPECT_NE(row->function->find("gmt_symbolizer_fixture::inline_caller"), std::string::npos) << *row->function;
  EXPECT_EQ(fs::path(*row->file).filename(), "symbolizer_test.cpp") << *row->file << ":" << row->line.value_or(0);
  EXPECT_EQ(row->line, line);
}

TEST_F(SymbolizerTest, PcInNoModuleGetsNullFunctionAndModule) {
  ModuleInfo exe = main_executable();
  add_module(exe);
  // Past the executable's end; and 0, which must not wrap around when pc - 1 is taken. (A low pc such as
  // 0x10 would not do: a non-PIE executable has base 0, so its [base, base + size) starts at 0.)
  const uint64_t beyond = exe.base + exe.size + 0x10000;
  add_pcs({beyond, 0});
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  SymbolizeStats stats = symbolize_trace(trace);
  EXPECT_EQ(stats.pcs, 2u);
  EXPECT_EQ(stats.resolved_functions, 0u);
  EXPECT_EQ(stats.modules, 0u);
  for (uint64_t pc : {beyond, uint64_t{0}}) {
    auto row = symbol(trace, pc);
    ASSERT_TRUE(row) << pc;
    EXPECT_FALSE(row->function);
    EXPECT_FALSE(row->file);
    EXPECT_FALSE(row->line);
    EXPECT_FALSE(row->module_id);
  }
}

TEST_F(SymbolizerTest, MissingModuleFileIsReported) {
  const std::string gone = "/nonexistent/gpumemtrace/libgone.so";
  int64_t id = add_module(gone, 0x7f0000000000, 0x10000, std::string("0123456789abcdef"));
  add_pcs({0x7f0000001234});
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  SymbolizeStats stats = symbolize_trace(trace);
  EXPECT_EQ(stats.modules, 1u);
  ASSERT_EQ(stats.missing_modules, std::vector<std::string>{gone});
  auto row = symbol(trace, 0x7f0000001234);
  ASSERT_TRUE(row);
  EXPECT_FALSE(row->function);
  EXPECT_EQ(row->module_id, id);
}

TEST_F(SymbolizerTest, BuildIdMismatchIsNeverSymbolized) {
  int line = 0;
  auto pc = reinterpret_cast<uint64_t>(gmt_symbolizer_fixture::leaf_caller(&line));
  ModuleInfo exe = main_executable();
  exe.build_id = "00112233445566778899aabbccddeeff00112233";  // "a different build of the same path"
  int64_t id = add_module(exe);
  add_pcs({pc});
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  SymbolizeStats stats = symbolize_trace(trace);
  EXPECT_EQ(stats.missing_modules, std::vector<std::string>{exe.path});
  auto row = symbol(trace, pc);
  ASSERT_TRUE(row);
  EXPECT_FALSE(row->function);
  EXPECT_FALSE(row->line);
  EXPECT_EQ(row->module_id, id);
}

TEST_F(SymbolizerTest, OddModuleFilesAreMissingNotFatal) {
  std::string text = (dir_ / "not-elf.so").string();
  std::ofstream(text) << "this is not an ELF file\n";
  std::string empty = (dir_ / "empty.so").string();
  std::ofstream{empty};
  const std::vector<std::string> odd = {dir_.string(), text, empty, "/dev/null", path_};
  std::vector<uint64_t> pcs;
  for (size_t i = 0; i < odd.size(); ++i) {
    uint64_t base = 0x7e0000000000 + i * 0x100000;
    add_module(odd[i], base, 0x1000, std::nullopt);
    pcs.push_back(base + 0x100);
  }
  add_pcs(pcs);
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  SymbolizeStats stats;
  ASSERT_NO_THROW(stats = symbolize_trace(trace));
  EXPECT_EQ(stats.missing_modules, odd);
  EXPECT_EQ(symbol_count(trace), static_cast<int64_t>(odd.size()));
}

TEST_F(SymbolizerTest, RunningTwiceIsIdempotent) {
  int line = 0;
  auto pc = reinterpret_cast<uint64_t>(gmt_symbolizer_fixture::leaf_caller(&line));
  add_module(main_executable());
  add_pcs({pc, 0x10});
  {
    TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
    EXPECT_EQ(symbolize_trace(trace).pcs, 2u);
    EXPECT_EQ(symbol_count(trace), 2);
    SymbolizeStats again = symbolize_trace(trace);
    EXPECT_EQ(again.pcs, 0u);
    EXPECT_EQ(again.modules, 0u);
    EXPECT_EQ(symbol_count(trace), 2);
    EXPECT_EQ(symbol(trace, pc)->line, line);
  }
  // A pc added later (a resumed run) is the only one done by the next call.
  add_pcs({0x20});
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  EXPECT_EQ(symbolize_trace(trace).pcs, 1u);
  EXPECT_EQ(symbol_count(trace), 3);
}

TEST_F(SymbolizerTest, SharedLibraryPcResolves) {
  // qsort, looked up in libc itself (dlsym on libc's handle, so not a canonical PLT stub in a non-PIE
  // executable) and not an IFUNC, so libc's .dynsym names it even without libc's debug info installed.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  void* qsort_entry = dlsym(libc, "qsort");
  dlclose(libc);
  ASSERT_NE(qsort_entry, nullptr);
  Dl_info where{};
  ASSERT_NE(dladdr(qsort_entry, &where), 0);
  ModuleInfo lib = module_named(where.dli_fname);
  EXPECT_EQ(lib.base, reinterpret_cast<uint64_t>(where.dli_fbase));
  int64_t id = add_module(lib);
  // As if qsort's first instruction were a call: the recorded return address is one past it.
  uint64_t pc = reinterpret_cast<uint64_t>(qsort_entry) + 1;
  add_pcs({pc});
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);
  SymbolizeStats stats = symbolize_trace(trace);
  EXPECT_TRUE(stats.missing_modules.empty());
  auto row = symbol(trace, pc);
  ASSERT_TRUE(row && row->function) << lib.path;
  EXPECT_FALSE(row->function->empty());
  EXPECT_NE(row->function->find("qsort"), std::string::npos) << *row->function;
  EXPECT_EQ(row->module_id, id);
}

TEST_F(SymbolizerTest, ManyPcsAreQuickAndReportProgress) {
  ModuleInfo exe = main_executable();
  ASSERT_GT(exe.text_end, exe.text_begin);
  add_module(exe);
  constexpr uint64_t kCount = 10000;
  std::vector<uint64_t> pcs;
  uint64_t step = std::max<uint64_t>(1, (exe.text_end - exe.text_begin) / kCount);
  for (uint64_t i = 0; i < kCount; ++i) pcs.push_back(exe.text_begin + 1 + i * step);
  add_pcs(pcs);
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadWrite);

  std::vector<std::pair<size_t, size_t>> calls;
  auto start = std::chrono::steady_clock::now();
  SymbolizeStats stats = symbolize_trace(trace, [&](size_t done, size_t total) { calls.emplace_back(done, total); });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(stats.pcs, kCount);
  EXPECT_GT(stats.resolved_functions, kCount / 2);
  // Generous, for sanitizer and debug builds: the point is catching per-pc reloading (minutes), not timing.
  EXPECT_LT(seconds, 20.0);
  ASSERT_GE(calls.size(), 10u);
  EXPECT_EQ(calls.back(), std::make_pair(size_t{kCount}, size_t{kCount}));
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GT(calls[i].first, calls[i - 1].first);
  std::cout << "symbolized " << kCount << " pcs in " << seconds << " s (" << stats.resolved_lines << " with lines)\n";
}

TEST_F(SymbolizerTest, ReadOnlyTraceIsRefused) {
  add_pcs({0x10});
  TraceFile trace = TraceFile::open(path_, OpenMode::ReadOnly);
  EXPECT_THROW(symbolize_trace(trace), TraceError);
  EXPECT_EQ(symbol_count(trace), 0);
}

// `gpumemtrace top`'s symbols (PcSymbolizer): read-only, nothing written, the same answer as symbolize_trace, and a
// module the process loads later (a new modules row) is found at the next update.
TEST_F(SymbolizerTest, InMemorySymbolsMatchTheWrittenOnesWithoutWriting) {
  int line = 0;
  auto pc = reinterpret_cast<uint64_t>(gmt_symbolizer_fixture::leaf_caller(&line));
  add_pcs({pc});
  PcSymbolizer symbols;
  {
    TraceFile running = TraceFile::open(path_, OpenMode::ReadOnly);
    symbols.update_modules(running);
    EXPECT_FALSE(symbols.symbolize(pc).module_known);  // no modules row yet: nothing holds the pc
  }
  add_module(main_executable());
  TraceFile running = TraceFile::open(path_, OpenMode::ReadOnly);
  symbols.update_modules(running);
  const PcSymbolizer::Answer& answer = symbols.symbolize(pc);
  EXPECT_TRUE(answer.module_known);
  ASSERT_TRUE(answer.function);
  EXPECT_NE(answer.function->find("gmt_symbolizer_fixture::leaf_caller"), std::string::npos) << *answer.function;
  EXPECT_EQ(answer.line, line);
  EXPECT_EQ(symbol_count(running), 0);

  Stack stack{1, false, {Frame{0, pc}}};
  symbols.fill(stack);
  EXPECT_EQ(stack.frames[0].function, answer.function);
  EXPECT_EQ(stack.frames[0].line, line);

  TraceFile written = TraceFile::open(path_, OpenMode::ReadWrite);
  symbolize_trace(written);
  auto row = symbol(written, pc);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->function, answer.function);
  EXPECT_EQ(row->file, answer.file);
  EXPECT_EQ(row->line, answer.line);
}

}  // namespace
}  // namespace gmt::analysis
