# cmake/embed.cmake — what a C/C++ host embedding luamx gets (docs/embedding.md): the
# runtime's headers, the pkg-config file (`pkg-config --cflags --libs luamx`), the CMake
# package (`find_package(luamx)`, target luamx::mx) and the hosts of examples/embed, which
# spec/embed_spec.lua builds and runs. Included by CMakeLists.txt for both builds.

# Where the C library and headers are installed: beside the Lua modules in the full
# build (LuaRocks' layout: the FFI loads lib/lua/5.1/mx/libmx.so), in lib/ and include/
# for the inference-only library.
if(MX_INFERENCE_ONLY)
  set(MX_C_LIBDIR ${CMAKE_INSTALL_PREFIX}/lib)
  set(MX_C_INCDIR ${CMAKE_INSTALL_PREFIX}/include)
  install(TARGETS mx LIBRARY DESTINATION ${MX_C_LIBDIR})
else()
  set(MX_C_LIBDIR ${LIBDIR}/mx)
  set(MX_C_INCDIR ${LIBDIR}/mx/include)
endif()
install(FILES core/include/mx_runtime.h DESTINATION ${MX_C_INCDIR})
install(FILES core/include/mxnet/c_predict_api.h DESTINATION ${MX_C_INCDIR}/mxnet)
# the .pc and CMake files find the library relative to themselves (a DESTDIR staging or a
# moved tree works): paths below the install prefix
file(RELATIVE_PATH MX_C_LIBDIR_REL ${CMAKE_INSTALL_PREFIX} ${MX_C_LIBDIR})
file(RELATIVE_PATH MX_C_INCDIR_REL ${CMAKE_INSTALL_PREFIX} ${MX_C_INCDIR})
set(MX_PC_VERSION ${PROJECT_VERSION})
if(NOT MX_PC_VERSION)
  set(MX_PC_VERSION 0.1.0)
endif()
configure_file(cmake/luamx.pc.in ${CMAKE_BINARY_DIR}/luamx.pc @ONLY)
configure_file(cmake/luamxConfig.cmake.in ${CMAKE_BINARY_DIR}/luamxConfig.cmake @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/luamxConfigVersion.cmake
                                 VERSION ${MX_PC_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/luamx.pc DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/pkgconfig)
install(FILES ${CMAKE_BINARY_DIR}/luamxConfig.cmake ${CMAKE_BINARY_DIR}/luamxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/cmake/luamx)

# ---- the hosts (built into build/embed/, not installed) -----------------------------
set(MX_EMBED_OUT ${CMAKE_BINARY_DIR}/embed)
# predict.c: a photo through MXNet's C predict API (libjpeg decodes it)
add_executable(embed_predict examples/embed/predict.c)
target_include_directories(embed_predict PRIVATE core/include)
target_compile_options(embed_predict PRIVATE ${MX_WARN})
target_link_libraries(embed_predict PRIVATE mx JPEG::JPEG pthread)
set_target_properties(embed_predict PROPERTIES OUTPUT_NAME predict
                      RUNTIME_OUTPUT_DIRECTORY ${MX_EMBED_OUT} BUILD_RPATH $<TARGET_FILE_DIR:mx>)

# game_loop.c: LuaJIT (a Gluon policy in Lua) and the C runtime in one frame loop
find_path(MX_EMBED_LUAJIT_INC lua.h PATH_SUFFIXES luajit-2.1 luajit)
find_library(MX_EMBED_LUAJIT_LIB NAMES luajit-5.1 luajit)
if(MX_EMBED_LUAJIT_INC AND MX_EMBED_LUAJIT_LIB AND NOT MX_INFERENCE_ONLY)
  add_executable(embed_game_loop examples/embed/game_loop.c)
  target_include_directories(embed_game_loop PRIVATE core/include ${MX_EMBED_LUAJIT_INC})
  target_compile_options(embed_game_loop PRIVATE ${MX_WARN})
  target_link_libraries(embed_game_loop PRIVATE mx ${MX_EMBED_LUAJIT_LIB} m dl)
  set_target_properties(embed_game_loop PROPERTIES OUTPUT_NAME game_loop
                        RUNTIME_OUTPUT_DIRECTORY ${MX_EMBED_OUT} BUILD_RPATH $<TARGET_FILE_DIR:mx>)
endif()

# predict_cxx.cpp: a C++ host over the RAII wrapper examples/embed/mx_predict.hpp
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  add_executable(embed_predict_cxx examples/embed/predict_cxx.cpp)
  target_include_directories(embed_predict_cxx PRIVATE core/include)
  target_compile_options(embed_predict_cxx PRIVATE -Wall -Wextra -Werror)
  target_link_libraries(embed_predict_cxx PRIVATE mx pthread)
  set_target_properties(embed_predict_cxx PROPERTIES OUTPUT_NAME predict_cxx CXX_STANDARD 11
                        RUNTIME_OUTPUT_DIRECTORY ${MX_EMBED_OUT} BUILD_RPATH $<TARGET_FILE_DIR:mx>)
endif()
