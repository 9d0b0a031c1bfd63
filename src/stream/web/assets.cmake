# Included by src/stream/CMakeLists.txt: the dashboard files (web/) become a generated .cc in
# surge_stream, rebuilt when one of them changes.
file(GLOB SURGE_WEB_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/web/*.html
  ${PROJECT_SOURCE_DIR}/web/*.js ${PROJECT_SOURCE_DIR}/web/*.css ${PROJECT_SOURCE_DIR}/web/*.svg)
set(SURGE_WEB_ASSETS_CC ${PROJECT_BINARY_DIR}/src/stream/web_assets.cc)
add_custom_command(
  OUTPUT ${SURGE_WEB_ASSETS_CC}
  COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR}/web -DOUT=${SURGE_WEB_ASSETS_CC}
          -P ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  DEPENDS ${SURGE_WEB_FILES} ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  COMMENT "embedding the dashboard (web/) into surge_stream")
target_sources(surge_stream PRIVATE ${SURGE_WEB_ASSETS_CC})
