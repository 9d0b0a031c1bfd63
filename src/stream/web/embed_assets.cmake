# cmake -DROOT=<web folder> -DOUT=<file.cc> -P embed_assets.cmake
# Writes a C++ file that defines surge::stream::web::EmbeddedAssets() (stream/web/assets.h) with
# every .html/.js/.css/.svg file of ROOT as a byte array.
file(GLOB names RELATIVE ${ROOT} ${ROOT}/*.html ${ROOT}/*.js ${ROOT}/*.css ${ROOT}/*.svg)
list(SORT names)
set(body "")
set(table "")
set(i 0)
foreach(name IN LISTS names)
  file(READ ${ROOT}/${name} hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR size "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n" bytes "${bytes}")
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(name MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  else()
    set(type "image/svg+xml")
  endif()
  string(APPEND body "// ${name}\nconst unsigned char kData${i}[] = {\n${bytes}0};\n")
  string(APPEND table "    {\"/${name}\", \"${type}\", {reinterpret_cast<const char*>(kData${i}), ${size}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
if(i EQUAL 0)  # no files: C++ has no empty arrays
  set(table "    {\"\", \"\", {}},\n")
endif()
set(text "// Generated from web/ by src/stream/web/embed_assets.cmake at build time; do not edit.
#include \"stream/web/assets.h\"

namespace surge::stream::web {
namespace {

${body}
const Asset kAssets[] = {
${table}};

}  // namespace

std::span<const Asset> EmbeddedAssets() { return std::span<const Asset>(kAssets, ${i}); }

}  // namespace surge::stream::web
")
file(WRITE ${OUT} "${text}")
