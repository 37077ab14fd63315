// TraceFile::open on files that are not readable traces: each must give a TraceError that names the file,
// never a crash or a half-read report.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;
using test_support::TraceBuilderOptions;

// Opens and analyzes the file; returns the TraceError message, or "" when the trace was read. Any other
// exception fails the test through gtest's handler.
std::string read_error(const std::string& path) {
  try {
    TraceFile trace = TraceFile::open(path);
    (void)analyze_trace(trace);
    return "";
  } catch (const TraceError& e) {
    return e.what();
  }
}

void expect_trace_error(const std::string& path, const std::string& also_mentions = "") {
  std::string message = read_error(path);
  ASSERT_FALSE(message.empty()) << path << " was read as a trace";
  EXPECT_NE(message.find(path), std::string::npos) << "message does not name the file: " << message;
  if (!also_mentions.empty()) {
    EXPECT_NE(message.find(also_mentions), std::string::npos) << "message lacks '" << also_mentions << "': " << message;
  }
}

// A scratch directory; the builder's own is reused so each test cleans up after itself.
std::string scratch_file(const TraceBuilder& builder, const std::string& name, const std::string& content) {
  std::string path = (builder.dir() / name).string();
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(TraceFileTest, ValidTraceOpens) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 64);
  TraceFile trace = builder.open();
  EXPECT_EQ(trace.path(), builder.path());
  EXPECT_EQ(trace.schema_version(), schema::kSchemaVersion);
  EXPECT_EQ(trace.meta(schema::meta::kPid), "4242");
  EXPECT_EQ(trace.meta_int(schema::meta::kPid), 4242);
  EXPECT_FALSE(trace.meta("no such key").has_value());
  EXPECT_EQ(read_error(builder.path()), "");
}

TEST(TraceFileTest, MissingFile) {
  TraceBuilder builder;
  expect_trace_error((builder.dir() / "does-not-exist.db").string(), "No such file");
}

TEST(TraceFileTest, ZeroLengthFile) {
  TraceBuilder builder;
  expect_trace_error(scratch_file(builder, "empty.db", ""), "empty");
}

TEST(TraceFileTest, TextFile) {
  TraceBuilder builder;
  expect_trace_error(scratch_file(builder, "notes.txt", "this is not a trace\nat all\n"), "not an SQLite");
}

TEST(TraceFileTest, ShortFileWithSqliteMagicOnly) {
  TraceBuilder builder;
  expect_trace_error(scratch_file(builder, "stub.db", std::string("SQLite format 3\0", 16)));
}

TEST(TraceFileTest, Directory) {
  TraceBuilder builder;
  std::string path = (builder.dir() / "a-directory.db").string();
  std::filesystem::create_directory(path);
  expect_trace_error(path, "directory");
}

TEST(TraceFileTest, SqliteFileFromAnotherProgram) {
  TraceBuilder builder(TraceBuilderOptions{.application_id = 0, .create_schema = false});
  builder.exec("CREATE TABLE contacts(name TEXT); INSERT INTO contacts VALUES ('someone');");
  builder.close();
  expect_trace_error(builder.path(), "not a gpumemtrace trace");
}

TEST(TraceFileTest, NewerSchemaVersionNamesBothVersions) {
  const int newer = schema::kSchemaVersion + 1;
  TraceBuilder builder(TraceBuilderOptions{.user_version = newer});
  builder.close();
  std::string message = read_error(builder.path());
  EXPECT_NE(message.find(builder.path()), std::string::npos) << message;
  EXPECT_NE(message.find("version " + std::to_string(newer)), std::string::npos) << message;
  EXPECT_NE(message.find("up to " + std::to_string(schema::kSchemaVersion)), std::string::npos) << message;
}

TEST(TraceFileTest, MissingTables) {
  TraceBuilder builder(TraceBuilderOptions{.create_schema = false});
  builder.exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);");
  builder.close();
  expect_trace_error(builder.path());
}

TEST(TraceFileTest, TruncatedTraceIsAnErrorNotACrash) {
  TraceBuilder builder;
  builder.begin();
  // Stacks, frames and events interleave, as the recorder writes them: every cut loses pages of each table.
  for (int64_t i = 0; i < 5000; ++i) {
    int64_t stack = builder.stack({0x400000 + static_cast<uint64_t>(i), 0x500000});
    builder.alloc(i * 10, 0x10000 + i * 0x100, 256, stack);
  }
  builder.commit();
  builder.close();
  const auto full_size = std::filesystem::file_size(builder.path());
  ASSERT_GT(full_size, 100'000u);
  ASSERT_EQ(read_error(builder.path()), "");  // intact, it reads

  for (int quarters : {2, 1, 3}) {
    SCOPED_TRACE(::testing::Message() << "cut to " << quarters << "/4");
    std::string cut = (builder.dir() / ("cut" + std::to_string(quarters) + ".db")).string();
    std::filesystem::copy_file(builder.path(), cut);
    std::filesystem::resize_file(cut, full_size * quarters / 4);
    expect_trace_error(cut);
  }
}

}  // namespace
}  // namespace gmt::analysis
