# Writes OUTPUT, a C++ source defining `const char* const <SYMBOL>` holding INPUT's text, so a
# file can be compiled into the binary (the chart library of the HTML reports).
file(READ "${INPUT}" content)
set(delim "hgr9f3c")
string(FIND "${content}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter; change it in embed.cmake")
endif()
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by cmake/embed.cmake. Do not edit.\n")
file(APPEND "${OUTPUT}" "namespace hangar::sim {\nextern const char* const ${SYMBOL};\n")
file(APPEND "${OUTPUT}" "const char* const ${SYMBOL} = R\"${delim}(${content})${delim}\";\n}\n")
