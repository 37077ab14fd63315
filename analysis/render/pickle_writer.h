// Writes Python pickles (protocol 2, which every Python 3 reads) of dicts, lists, tuples, strings, integers, floats,
// booleans and None: what PyTorch's memory snapshot holds, without a Python interpreter at report time. The opcodes
// are those of CPython's Lib/pickle.py for protocol 2. Values are written as the caller calls, depth first:
//
//   PickleWriter p;
//   p.begin_dict(); p.key("segments"); p.begin_list(); ... p.end_list(); p.end_dict();
//   std::string bytes = p.finish();
//
// A value written once can be remembered (remember()) and written again by reference (recall()): the reader then
// gets the same object, as pickle.dump does for repeated objects. The snapshot's dict keys and frame lists repeat on
// every entry; remembering them keeps a large snapshot several times smaller.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace gmt::analysis {

class PickleWriter {
 public:
  PickleWriter();

  void begin_dict();  // then key/value pairs
  void end_dict();
  void begin_list();
  void end_list();
  void begin_tuple();
  void end_tuple();

  void str(std::string_view text);  // UTF-8; invalid sequences are written as U+FFFD (Python refuses them)
  // A string that repeats (a dict key, a file name): written once, then by reference.
  void interned(std::string_view text);
  void key(std::string_view name) { interned(name); }
  void integer(int64_t value);
  void unsigned_integer(uint64_t value);
  void real(double value);
  void boolean(bool value);
  void none();

  // The value just written, remembered under a new number; recall(number) writes it again by reference.
  uint32_t remember();
  void recall(uint32_t number);

  std::string finish();  // the whole pickle, STOP included; the writer is then empty

 private:
  void put_u32(uint32_t value);
  std::string out_;
  uint32_t next_memo_ = 0;
  std::unordered_map<std::string, uint32_t> interned_;
};

// The text with every invalid UTF-8 sequence replaced by U+FFFD: what Python's decoder and JSON parsers accept.
std::string valid_utf8(std::string_view text);

}  // namespace gmt::analysis
