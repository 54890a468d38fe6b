# TT-Metalium package config for tilefarm's functional emulator (ttemu).
#
# Same package and target names as the real SDK, so one project builds against either:
#     find_package(TT-Metalium REQUIRED)
#     target_link_libraries(app PUBLIC TT::Metalium)
# Use: cmake -DCMAKE_PREFIX_PATH=<this directory> ...
# Optional: -DTTEMU_RUNTIME_LIBRARY=<path to a prebuilt libttemu.so> (else libttemu is built from ../src here).
include_guard(GLOBAL)

get_filename_component(_ttemu_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(TT-Metalium_VERSION 0.81.1)
set(TT-Metalium_EMULATED TRUE)
set(TT-Metalium_INCLUDE_DIR "${_ttemu_root}/include")

find_package(Threads REQUIRED)

if(NOT TARGET TT::Metalium)
    if(TTEMU_RUNTIME_LIBRARY)
        if(NOT EXISTS "${TTEMU_RUNTIME_LIBRARY}")
            message(FATAL_ERROR "TT-Metalium (emulated): TTEMU_RUNTIME_LIBRARY=${TTEMU_RUNTIME_LIBRARY} does not exist")
        endif()
        add_library(TT::Metalium SHARED IMPORTED)
        set_target_properties(TT::Metalium PROPERTIES IMPORTED_LOCATION "${TTEMU_RUNTIME_LIBRARY}")
    else()
        file(GLOB _ttemu_sources "${_ttemu_root}/src/*.cpp")
        add_library(ttemu SHARED ${_ttemu_sources})
        target_include_directories(ttemu PRIVATE "${_ttemu_root}/include")
        target_compile_features(ttemu PRIVATE cxx_std_20)
        target_compile_definitions(ttemu PRIVATE TTEMU_DEFAULT_INCLUDE_DIR="${_ttemu_root}/include")
        target_link_libraries(ttemu PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
        add_library(TT::Metalium ALIAS ttemu)
    endif()
    if(TTEMU_RUNTIME_LIBRARY)
        set_target_properties(TT::Metalium PROPERTIES
            INTERFACE_INCLUDE_DIRECTORIES "${_ttemu_root}/include"
            INTERFACE_COMPILE_FEATURES cxx_std_20
            INTERFACE_LINK_LIBRARIES Threads::Threads)
    else()
        target_include_directories(ttemu INTERFACE "${_ttemu_root}/include")
        target_compile_features(ttemu INTERFACE cxx_std_20)
    endif()
endif()

set(TT-Metalium_FOUND TRUE)
