# Script mode: writes INPUT into OUTPUT as a C++ string_view named SYMBOL (hex bytes, so any
# content, including `)"`, survives).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR byte_count "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUTPUT}" "#include <string_view>\nnamespace exitsim::embedded {\nnamespace {\nconstexpr char k_${SYMBOL}[] = {${bytes} '\\0'};\n}\nstd::string_view ${SYMBOL}() { return {k_${SYMBOL}, ${byte_count}}; }\n}  // namespace exitsim::embedded\n")
